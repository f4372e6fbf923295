"""Command line: `python -m sampler serve ...` and `python -m sampler record ...`.

serve: prints one line `sampler: serving <backend> gpus [...] on HOST:PORT` once it listens
(PORT is the real one when --addr asks for port 0), then serves until SIGTERM or SIGINT, ends
every stream, closes NVML and exits 0. It refuses a non-loopback address unless --allow-remote
is given: the daemon has no authentication.

Non-goals: no daemonizing, pid files or log files (run it under your process manager or `&`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from sampler.addr import is_loopback
from sampler.backends import BackendError, NvmlBackend, ReplayBackend
from sampler.trace import record


def _gpus(text: str) -> list[int]:
    try:
        return [int(g) for g in text.split(",") if g.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--gpus takes indices like 0,1 (got {text!r})") from e


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sampler", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("serve", "record"):
        p = sub.add_parser(name)
        p.add_argument("--backend", choices=("nvml", "replay"), default="nvml")
        p.add_argument("--trace", help="trace file for --backend replay (sampler/trace.py format)")
        p.add_argument("--gpus", type=_gpus, default=None, help="device indices, e.g. 0,1 (default: all)")
        p.add_argument("--interval-ms", type=int, default=100, help="sampling interval (serve: default "
                       "for requests that set none)")
    serve = sub.choices["serve"]
    serve.add_argument("--addr", default="127.0.0.1:50052", help="host:port; port 0 picks a free one")
    serve.add_argument("--allow-remote", action="store_true", help="permit a non-loopback --addr")
    serve.add_argument("--max-streams", type=int, default=32, help="concurrent streams served")
    rec = sub.choices["record"]
    rec.add_argument("--out", required=True, help="trace file to write (.jsonl or .jsonl.gz)")
    rec.add_argument("--duration-s", type=float, required=True)
    args = parser.parse_args(argv)
    if args.backend == "replay" and not args.trace:
        parser.error("--backend replay needs --trace FILE")
    if args.interval_ms < 1:
        parser.error("--interval-ms must be >= 1")
    if args.command == "serve" and not args.allow_remote and not is_loopback(args.addr):
        parser.error(f"--addr {args.addr} is not loopback; the sampler has no authentication "
                     "(pass --allow-remote to bind it anyway)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.backend == "replay":
            backend = ReplayBackend(args.trace, gpus=args.gpus)
        else:
            backend = NvmlBackend(gpus=args.gpus)
    except BackendError as e:
        print(f"sampler: {e}", file=sys.stderr)
        return 2

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if args.command == "record":
        try:
            lines = record(backend, list(backend.gpus), args.interval_ms / 1000.0, args.duration_s,
                           args.out, stop)
        finally:
            backend.close()
        print(f"sampler: wrote {lines} readings to {args.out}", flush=True)
        return 0

    from sampler.server import Daemon  # grpc only for serve

    try:
        daemon = Daemon(backend, args.addr, args.interval_ms, args.max_streams)
    except (OSError, RuntimeError) as e:
        backend.close()
        print(f"sampler: cannot serve on {args.addr}: {e}", file=sys.stderr)
        return 2
    print(f"sampler: serving {backend.name} gpus {list(backend.gpus)} on {daemon.address}", flush=True)
    while not stop.wait(0.5):
        pass
    daemon.stop()
    print("sampler: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
