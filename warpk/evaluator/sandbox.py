"""Run one worker in a child process and say what became of it.

Threat model (this foundation version):
  Covered: a candidate that raises, crashes the interpreter (segfault, os._exit), hangs or
  sleeps (wall-clock timeout, then SIGKILL to the whole process group, so its children die
  too), writes huge files (RLIMIT_FSIZE) or spins the CPU (RLIMIT_CPU); it runs in a temp
  working dir with a scrubbed environment (no API keys or tokens inherited).
  Not covered yet (the evaluator issue, #3): memory limits, AST checks against tampering with
  torch or the timer, reading the reference's outputs, network and file access outside the
  temp dir, and CUDA-specific exploits. Do not evaluate untrusted code on a machine you care
  about with this version.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Variables a worker may inherit; everything else (tokens, W&B keys, HF tokens...) is dropped.
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH",
            "VIRTUAL_ENV", "TMPDIR")
FILE_SIZE_LIMIT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class WorkerOutcome:
    result: dict | None  # the worker's result file, None if it never wrote one
    returncode: int | None
    timed_out: bool
    stderr_tail: str
    wall_s: float

    def failure(self) -> tuple[str, str] | None:
        """(status, reason) when the worker did not report, else None."""
        if self.timed_out:
            return "timeout", f"worker exceeded its wall-clock limit ({self.wall_s:.0f} s) and was killed"
        if self.result is not None:
            return None
        if self.returncode is not None and self.returncode < 0:
            name = signal.Signals(-self.returncode).name
            detail = f": {self.stderr_tail}" if self.stderr_tail else ""
            return "crashed", f"worker killed by {name}{detail}"
        reason = f"worker exited with code {self.returncode} before reporting a result"
        return "crashed", reason + (f": {self.stderr_tail}" if self.stderr_tail else "")


def _limits(cpu_s: int) -> None:
    """Runs in the child before exec: resource limits of the worker (and what it spawns)."""
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT_BYTES, FILE_SIZE_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _worker_env(home: str, threads: int) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    env.update(
        HOME=home,
        PYTHONPATH=str(PROJECT_ROOT),
        PYTHONDONTWRITEBYTECODE="1",
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        TORCHINDUCTOR_CACHE_DIR=os.path.join(home, "inductor"),
        # Keep freed tensors in glibc's heap instead of unmapping and re-mapping them on every
        # call: without this, CPU timings of the bundled tasks jumped between two levels (~10x).
        MALLOC_MMAP_THRESHOLD_=str(32 * 1024 * 1024),
        MALLOC_TRIM_THRESHOLD_=str(1024 * 1024 * 1024),
        MALLOC_TOP_PAD_=str(64 * 1024 * 1024),
    )
    return env


def _tail(path: Path, chars: int = 300) -> str:
    if not path.exists():
        return ""
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][-chars:] if lines else ""


def run_worker(request: dict, timeout_s: float, threads: int) -> WorkerOutcome:
    """Evaluate `request` in a fresh sandboxed child; never raises for what the child does."""
    with tempfile.TemporaryDirectory(prefix="warpk-eval-") as tmp:
        request_path, result_path = Path(tmp, "request.json"), Path(tmp, "result.json")
        request_path.write_text(json.dumps(request))
        stdout_path, stderr_path = Path(tmp, "stdout.txt"), Path(tmp, "stderr.txt")
        start = time.perf_counter()
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "warpk.evaluator.worker", str(request_path), str(result_path)],
                cwd=tmp,
                env=_worker_env(tmp, threads),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # own process group: killpg reaches its children
                preexec_fn=lambda: _limits(int(timeout_s * threads) + 10),
            )
            timed_out = False
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # also reaps leftovers of a finished worker
                except ProcessLookupError:
                    pass
                proc.wait()
        wall_s = time.perf_counter() - start
        result = None
        if result_path.exists() and not timed_out:
            result = json.loads(result_path.read_text())
        return WorkerOutcome(result, proc.returncode, timed_out, _tail(stderr_path), wall_s)
