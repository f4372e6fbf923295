"""Does CUDA start in the sandbox (bwrap, the lane's device nodes, copied as a root evaluator's
workers get them, the worker's uid and environment) under the seccomp filter as committed, under
another one, and under none, and with the host's own nodes? A GPU machine's one-minute
probe; the stderr of each is shown, so a failure says why.

    python benchmarks/probe_cuda_sandbox.py [--filter-from OTHER_SECCOMP.py] [--gpu 0]

`--filter-from`: a file defining `seccomp_program()` like warpk/evaluator/seccomp.py, e.g. the one
that also refused AF_UNIX sockets (`git show 5529872:warpk/evaluator/seccomp.py`): libcuda makes
an AF_UNIX socket at start to look for an MPS daemon (H100, 2026-12-07: under that filter
`cudaGetDeviceCount()` failed with Error 304; under the committed one and none, CUDA started).

Non-goals: no evaluation (the evaluator's own GPU tests).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.evaluator import identity  # noqa: E402
from warpk.evaluator.devnodes import DeviceCopies, gpu_nodes  # noqa: E402
from warpk.evaluator.sandbox import SANDBOX_HOME, bwrap_command, worker_env  # noqa: E402
from warpk.evaluator.seccomp import seccomp_program  # noqa: E402

CODE = "import torch; print(float(torch.ones(4, device='cuda').sum()))"


def run(program: bytes | None, gpu: str, copies: bool = True) -> tuple[int, str, str]:
    """`copies`: the lane's device nodes copied, as every worker of a root evaluator gets them
    (devnodes.DeviceCopies), else the host's own."""
    fd = None
    if program is not None:
        fd = os.memfd_create("warpk-probe-seccomp", 0)
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    devices = DeviceCopies(gpu_nodes(gpu)) if copies else None
    try:
        done = subprocess.run(bwrap_command(None, gpu, fd, devices.binds() if devices else ()) + [
                              sys.executable, "-c", CODE],
                              env=worker_env(SANDBOX_HOME, 1, {}), capture_output=True, text=True,
                              pass_fds=() if fd is None else (fd,), timeout=120)
    finally:
        if fd is not None:
            os.close(fd)
        if devices is not None:
            devices.close()
    return done.returncode, done.stdout.strip(), done.stderr[-1500:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter-from", type=Path, help="another seccomp.py to try")
    parser.add_argument("--gpu", default="0", help="the device index the sandbox gets")
    args = parser.parse_args()
    filters = [("committed", seccomp_program(local_only=False)),
               ("committed, sockets as without a GPU", seccomp_program(local_only=True)), ("none", None)]
    if args.filter_from:
        spec = importlib.util.spec_from_file_location("other_seccomp", args.filter_from)
        other = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(other)
        filters.insert(1, (str(args.filter_from), other.seccomp_program()))
    print(f"the worker's uid: {'nobody' if identity.drops() else os.geteuid()}")
    variants = [(name, program, True) for name, program in filters]
    for name, program, copies in [*variants, ("committed, the host's nodes", filters[0][1], False)]:
        rc, out, err = run(program, args.gpu, copies)
        print(f"{name}: rc {rc}, printed {out!r}")
        if rc:
            print("  " + err.replace("\n", "\n  "))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
