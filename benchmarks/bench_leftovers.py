"""What a dead sandbox leaves to the kernel, and what the lane's wait for it costs
(warpk.evaluator.leftovers): a real bwrap sandbox in a real memory cgroup, one after another.

    python benchmarks/bench_leftovers.py [--files 300000] [--looks 10]

- `kept`: a sandbox keeps a tmpfs of FILES empty files alive in a unix socket's own queue and
  exits; the group's held memory is read every 0.1 s for LOOKS looks without running the kernel's
  collector, then `ResourceGroup.close` runs it and waits (`settled`: seconds, bytes held after).
- `honest`: a sandbox that only imports torch; its close.
- `syncfs`: `leftovers.sync_folder` of a folder on the disk this checkout is on, nothing dirty.

Needs bwrap and a writable memory cgroup (the development VM: cgroup v1). Prints one line each.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.evaluator import leftovers  # noqa: E402
from warpk.evaluator.resources import ResourceGroup, placement  # noqa: E402
from warpk.evaluator.sandbox import SANDBOX_HOME, bwrap_command, worker_env  # noqa: E402
from warpk.evaluator.seccomp import seccomp_fd  # noqa: E402

KEPT = r'''
import array, os, socket
os.makedirs("/tmp/f")
for i in range(FILES):
    os.close(os.open(f"/tmp/f/{i}", os.O_CREAT | os.O_WRONLY, 0o600))
d = os.open("/tmp", os.O_PATH | os.O_DIRECTORY)
s1, s2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
s1.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [d, s2.fileno()]))])
os.close(d)
s1.close()
'''
HONEST = "import torch"
MIB = 1 << 20


def dead_sandbox(group: ResourceGroup, code: str) -> None:
    fd = seccomp_fd()
    try:
        done = subprocess.run(bwrap_command(None, None, fd) + [sys.executable, "-c", code],
                              env=worker_env(SANDBOX_HOME, 1, {}), pass_fds=() if fd is None else (fd,),
                              preexec_fn=group.join, capture_output=True, text=True, timeout=300)
    finally:
        if fd is not None:
            os.close(fd)
    if done.returncode:
        raise SystemExit(f"the sandbox failed: {done.stderr[-500:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=300_000)
    parser.add_argument("--looks", type=int, default=10, help="looks 0.1 s apart before the close")
    args = parser.parse_args()
    method, bases = placement()
    if "memory" not in bases:
        print("bench_leftovers: no writable memory cgroup here (limits: none)", file=sys.stderr)
        return 2
    v2 = method == "cgroup2"
    group = ResourceGroup(4 << 30)
    dead_sandbox(group, KEPT.replace("FILES", str(args.files)))
    held = []
    for _ in range(args.looks):
        held.append(leftovers.held_bytes(group.dirs["memory"], v2) // MIB)
        time.sleep(0.1)
    start = time.monotonic()
    group.close()
    waited_s, left = group.settled
    print(f"kept ({args.files} files, {method}): held {min(held)}-{max(held)} MiB "
          f"over {args.looks * 0.1:.1f} s "
          f"after the death; close {time.monotonic() - start:.2f} s, waited {waited_s:.2f} s, "
          f"{(left or 0) / MIB:.1f} MiB held after")
    group = ResourceGroup(4 << 30)
    dead_sandbox(group, HONEST)
    start = time.monotonic()
    group.close()
    waited_s, left = group.settled
    print(f"honest (torch imported): close {(time.monotonic() - start) * 1e3:.1f} ms, waited "
          f"{waited_s * 1e3:.2f} ms, {(left or 0) / MIB:.1f} MiB held after")
    folder = Path(tempfile.mkdtemp(dir=Path(__file__).resolve().parents[1]))
    try:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            leftovers.sync_folder(folder)
            times.append((time.perf_counter() - start) * 1e3)
    finally:
        folder.rmdir()
    print(f"syncfs with nothing of ours dirty: {min(times):.2f}-{max(times):.2f} ms (5 calls)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
