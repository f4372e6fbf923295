"""Sandboxed worker processes that evaluate candidates, and what became of each request.

A `WorkerProcess` is reused across candidates of one lane (torch imported and the CUDA context
made once); it is killed and replaced after any verdict that may leave it unclean (a timeout, a
crash, a raised exception, a forged answer) and between requests nothing of the previous
candidate stays importable (its module, global nn.Module hooks, cached GPU memory are dropped).

Threat model.
  Covered: a candidate that raises; crashes the interpreter (segfault, os._exit, a CUDA fault);
  hangs in the compile phase or the run phase (separate wall-clock limits, then SIGKILL to the
  whole process group, so anything it spawned dies too); spins the CPU (RLIMIT_CPU backstop);
  writes huge files (RLIMIT_FSIZE); grows host memory (RSS watchdog on every device, RLIMIT_AS on
  CPU workers: CUDA needs a huge address space, so GPU workers rely on the watchdog); forges its
  verdict (results travel on a pipe the candidate cannot name, tagged with a per-request nonce
  the worker drops before the candidate loads; a pipe with leftover output is not reused). It
  runs in a temp working dir, with a scrubbed environment (no API keys or tokens), with only the
  GPU it was given visible. The static checks (warpk.evaluator.static) refuse the imports,
  calls and attribute paths that reach files, network, processes, threads, timers, global torch
  state and the harness before it runs.
  Not covered: a determined escape through a bug in Python, torch or the CUDA driver; global
  state a static-check bypass leaves in a reused worker (tests/unit/test_sandbox.py xfail);
  children that start their own session escape the group kill (no cgroup or PID namespace);
  world-readable files and the network if the static checks are bypassed (no namespaces);
  RLIMIT_NPROC does not apply to root (fork bombs are stopped by the static checks). Run
  untrusted code inside a container or VM you can afford to lose.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import select
import shutil
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
# Verdicts after which the worker process is known to be in a clean state and is reused.
KEEP_WORKER_AFTER = ("ok", "incorrect", "compile_error", "static_reject")


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
    # A reused worker accumulates CPU time over many candidates: the CPU limit is a backstop
    # (a day), the per-phase wall-clock limits are what stop a hung candidate.
    resource.setrlimit(resource.RLIMIT_CPU, (86400, 86400))
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


class WorkerProcess:
    """One sandboxed worker that evaluates requests one at a time until it fails.

    A worker that reported a result stays alive for the next request (torch imported, CUDA
    context made); one that died, timed out or outgrew its memory is killed with its whole
    process group, and the next `submit` starts a fresh one. Call `close()` when done.
    """

    def __init__(self, limits: Limits, env: dict[str, str]):
        self.limits = limits
        self.env = env
        self.home = ""
        self.proc: subprocess.Popen | None = None
        self.jobs = 0

    def _start(self) -> None:
        self.home = tempfile.mkdtemp(prefix="warpk-worker-")
        self.stderr_path = Path(self.home, f"stderr-{self.jobs}.txt")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "warpk.evaluator.worker"],
                cwd=self.home,
                env=worker_env(self.home, self.limits.threads, self.env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,  # own process group: killpg reaches its children
                preexec_fn=lambda: _apply_limits(self.limits),
            )

    def close(self) -> None:
        """Kill the worker and everything it spawned; remove its files."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
            self.proc = None
        if self.home:
            shutil.rmtree(self.home, ignore_errors=True)

    def submit(self, request: dict) -> WorkerOutcome:
        """Evaluate one request; never raises for what the candidate does."""
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            self._start()
        if self._pending_output():  # a previous candidate wrote to the answer pipe: not reusable
            self.close()
            self._start()
        self.jobs += 1
        job = Path(self.home, f"job-{self.jobs}")
        job.mkdir()
        nonce = secrets.token_hex(16)  # the worker reads it and deletes the file before the candidate runs
        (job / "request.json").write_text(json.dumps({**request, "nonce": nonce}))
        start = time.perf_counter()
        self.proc.stdin.write(f"{job / 'request.json'}\n".encode())
        self.proc.stdin.flush()
        killed_for, answer = self._watch(job / "phase")
        wall_s = time.perf_counter() - start
        result = _parse_answer(answer, nonce) if answer and not killed_for else None
        if answer and not killed_for and result is None:
            killed_for = "the worker's answer was not its own (forged by the candidate); worker killed"
        returncode, tail = None, ""
        if killed_for or result is None:
            returncode = self.proc.poll()
            tail = _tail(self.stderr_path)
            self.close()
        elif result.get("status") not in KEEP_WORKER_AFTER:
            self.close()  # an exception or CUDA fault may have left the process unusable
        else:
            shutil.rmtree(job, ignore_errors=True)
        return WorkerOutcome(result, returncode, killed_for, tail, wall_s)

    def _pending_output(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            return False
        ready, _, _ = select.select([self.proc.stdout], [], [], 0)
        return bool(ready)

    def _watch(self, phase_file: Path) -> tuple[str | None, str]:
        """Wait for the worker's answer: (why it had to be killed or None, the answer line)."""
        phase, phase_start = "compile", time.monotonic()
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], POLL_S)
            if ready:
                answer = self.proc.stdout.readline().decode()  # "" when the worker died
                if not answer:
                    self.proc.wait()
                return None, answer
            if self.proc.poll() is not None:
                return None, ""
            if phase == "compile" and phase_file.exists() and phase_file.read_text().startswith("run"):
                phase, phase_start = "run", time.monotonic()
            limit = self.limits.compile_timeout_s if phase == "compile" else self.limits.run_timeout_s
            if time.monotonic() - phase_start > limit:
                return f"timeout: the {phase} phase exceeded its limit of {limit:g} s; worker killed", ""
            if _rss_gb(self.proc.pid) > self.limits.memory_limit_gb:
                return (
                    f"worker exceeded the host memory limit of {self.limits.memory_limit_gb:g} GB "
                    "and was killed"
                ), ""


def _parse_answer(answer: str, nonce: str) -> dict | None:
    """The worker's result if the answer line carries this request's nonce, else None."""
    try:
        message = json.loads(answer)
    except json.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.pop("nonce", None) != nonce:
        return None
    return message


def run_worker(request: dict, limits: Limits, env: dict[str, str] | None = None) -> WorkerOutcome:
    """Evaluate `request` in a fresh sandboxed worker that is closed afterwards."""
    worker = WorkerProcess(limits, env or {})
    try:
        return worker.submit(request)
    finally:
        worker.close()
