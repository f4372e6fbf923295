"""Run one worker in a sandboxed child process and say what became of it.

Threat model.
  Covered: a candidate that raises; crashes the interpreter (segfault, os._exit, a CUDA fault);
  hangs in the compile phase or the run phase (separate wall-clock limits, then SIGKILL to the
  whole process group, so anything it spawned dies too); spins the CPU (RLIMIT_CPU); writes
  huge files (RLIMIT_FSIZE); grows host memory (RSS watchdog on every device, RLIMIT_AS on CPU
  workers: CUDA needs a huge address space, so GPU workers rely on the watchdog). It runs in a
  fresh temp working dir, with a scrubbed environment (no API keys or tokens), with only the GPU
  it was given visible. The static checks (warpk.evaluator.static) refuse the imports and calls
  that reach files, network, processes, threads, timers and the harness before it runs.
  Not covered: a determined escape through a bug in Python, torch or the CUDA driver; reading
  world-readable files if the static checks are bypassed (no filesystem namespace); network
  access if bypassed (no network namespace); process limits for root (RLIMIT_NPROC does not
  apply to root: fork bombs are stopped by the static checks and the group kill). Run untrusted
  code on machines and accounts you can afford to lose, inside a container for real isolation.
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
ENV_KEEP = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "VIRTUAL_ENV",
    "TMPDIR",
    "CC",
    "CXX",
)
FILE_SIZE_LIMIT_BYTES = 256 * 1024 * 1024
POLL_S = 0.02


@dataclass(frozen=True)
class Limits:
    compile_timeout_s: float  # from start until the worker enters its run phase
    run_timeout_s: float  # correctness and timing
    memory_limit_gb: float  # host resident memory of the worker
    threads: int
    address_space_limit: bool  # RLIMIT_AS too (CPU workers only)


@dataclass(frozen=True)
class WorkerOutcome:
    result: dict | None  # the worker's result file, None if it never wrote one
    returncode: int | None
    killed_for: str | None  # why the parent killed it: a phase timeout or memory
    stderr_tail: str
    wall_s: float

    def failure(self) -> tuple[str, str] | None:
        """(status, reason) when the worker did not report, else None."""
        if self.killed_for and self.killed_for.startswith("timeout"):
            return "timeout", self.killed_for.removeprefix("timeout: ")
        if self.killed_for:
            return "crashed", self.killed_for
        if self.result is not None:
            return None
        detail = f": {self.stderr_tail}" if self.stderr_tail else ""
        if self.returncode is not None and self.returncode < 0:
            return "crashed", f"worker killed by {signal.Signals(-self.returncode).name}{detail}"
        return "crashed", f"worker exited with code {self.returncode} before reporting a result{detail}"


def _apply_limits(limits: Limits) -> None:
    """Runs in the child before exec."""
    cpu_s = int((limits.compile_timeout_s + limits.run_timeout_s) * max(limits.threads, 1)) + 30
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT_BYTES, FILE_SIZE_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.address_space_limit:
        space = int((limits.memory_limit_gb + 4) * 1024**3)  # + room for torch's own mappings
        resource.setrlimit(resource.RLIMIT_AS, (space, space))


def worker_env(home: str, threads: int, extra: dict[str, str]) -> dict[str, str]:
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
    env.update(extra)
    return env


def _rss_gb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024**2
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0.0


def _tail(path: Path, chars: int = 300) -> str:
    if not path.exists():
        return ""
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][-chars:] if lines else ""


def _watch(proc: subprocess.Popen, phase_file: Path, limits: Limits) -> str | None:
    """Wait for the worker; the reason it had to be killed, or None if it exited by itself."""
    phase, phase_start = "compile", time.monotonic()
    while True:
        try:
            proc.wait(timeout=POLL_S)
            return None
        except subprocess.TimeoutExpired:
            pass
        if phase == "compile" and phase_file.exists() and phase_file.read_text().startswith("run"):
            phase, phase_start = "run", time.monotonic()
        limit = limits.compile_timeout_s if phase == "compile" else limits.run_timeout_s
        if time.monotonic() - phase_start > limit:
            return f"timeout: the {phase} phase exceeded its limit of {limit:g} s; worker killed"
        if _rss_gb(proc.pid) > limits.memory_limit_gb:
            return f"worker exceeded the host memory limit of {limits.memory_limit_gb:g} GB and was killed"


def run_worker(request: dict, limits: Limits, env: dict[str, str] | None = None) -> WorkerOutcome:
    """Evaluate `request` in a fresh sandboxed child; never raises for what the child does."""
    with tempfile.TemporaryDirectory(prefix="warpk-eval-") as tmp:
        request_path, result_path = Path(tmp, "request.json"), Path(tmp, "result.json")
        request_path.write_text(json.dumps(request))
        stderr_path = Path(tmp, "stderr.txt")
        start = time.perf_counter()
        with open(Path(tmp, "stdout.txt"), "wb") as out, open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "warpk.evaluator.worker", str(request_path), str(result_path)],
                cwd=tmp,
                env=worker_env(tmp, limits.threads, env or {}),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # own process group: killpg reaches its children
                preexec_fn=lambda: _apply_limits(limits),
            )
            try:
                killed_for = _watch(proc, Path(tmp, "phase"), limits)
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # also reaps leftovers of a finished worker
                except ProcessLookupError:
                    pass
                proc.wait()
        wall_s = time.perf_counter() - start
        result = json.loads(result_path.read_text()) if result_path.exists() and not killed_for else None
        return WorkerOutcome(result, proc.returncode, killed_for, _tail(stderr_path), wall_s)
