"""One measuring lane (a GPU, or the CPU), seen from the parent process.

A lane owns a trusted worker (warpk.evaluator.trusted, reused across candidates; it never
imports candidate code) and starts one sandboxed untrusted worker per candidate
(warpk.evaluator.sandbox), the next one ahead while the current candidate is measured (it
imports torch meanwhile and has seen no candidate yet). The parent hands the untrusted
worker's socket to the trusted worker with the MeasureRequest and waits, watching the untrusted
worker's memory and a backstop deadline; whatever happens, the untrusted worker is killed
afterwards and its host folder, if it has one, removed (warpk.evaluator.hostside).

Every wait here has a time limit (sends too: the kernel's send timeout), so nothing a candidate
does can hold the lane. What is not the candidate's doing is raised as HarnessFailure
(warpk.evaluator.errors), never returned as its verdict: the trusted worker dying or not taking
a request, and its "harness_error" answer (the task's reference failed before any candidate
code ran).

`compile_candidate` builds a CUDA candidate in a sandboxed worker with no GPU (the compile pool
runs these on CPU cores while the lanes measure).

Non-goals: no measurement logic (the trusted worker), no records (warpk.evaluator.assemble).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from warpk.evaluator import protocol as wire
from warpk.evaluator.errors import HARNESS_ERROR, HarnessFailure
from warpk.evaluator.identity import own_folder
from warpk.evaluator.lane_lock import LaneLock
from warpk.evaluator.profile import Stopwatch
from warpk.evaluator.sandbox import Limits, UntrustedProcess
from warpk.evaluator.trusted_process import TrustedProcess, send_timeout

POLL_S = 0.05
BACKSTOP_GRACE_S = 60.0  # beyond the trusted worker's own limits before the parent steps in
ANSWER_TIMEOUT_S = 60.0  # the rest of an answer, once its first byte is there
SPARE_READY_TIMEOUT_S = 120.0  # the next worker's: past this it is replaced by a fresh one
READY_ENV = "WARPK_SAY_READY"  # a next worker started off the lane's cores says Ready once imported
RETRY_PHASES = ("load", "build", "correctness")  # a budget kill here is measured again


@dataclass(frozen=True)
class Outcome:
    """A measurement (or the parent's verdict when the trusted side could not give one)."""

    measurement: wire.Measurement
    wall_s: float
    sandbox: str


def _memory_verdict(limit_gb: float) -> wire.Measurement:
    return wire.Measurement(
        "crashed", f"the candidate's worker exceeded the host memory limit of {limit_gb:g} GB and was killed"
    )


def _how(code: int, via_bwrap: bool) -> str:
    """'exit code N' or 'killed by SIGNAME' for a process's return code."""
    # bwrap reports a child killed by signal N as exit code 128 + N
    signum = -code if code < 0 else code - 128 if via_bwrap and code > 128 else None
    try:
        return f"killed by {signal.Signals(signum).name}" if signum else f"exit code {code}"
    except ValueError:  # a real-time signal has no name
        return f"killed by signal {signum}"


def _killed(worker: UntrustedProcess) -> bool:
    """Whether the worker itself ended by SIGKILL (the OOM killer's signal), not by its own exit."""
    code = worker.proc.returncode
    return code == -signal.SIGKILL or worker.mode == "bwrap" and code == 128 + signal.SIGKILL


def _death(worker: UntrustedProcess) -> str:
    """How the untrusted worker ended, for a crash's reason: its exit code or signal, last line."""
    code = worker.proc.returncode
    if code is None:
        return ""
    tail = worker.stderr_tail()
    cause = worker.group.oom_cause()
    if cause is not None:
        why = (f"over its memory limit of {worker.group.memory_bytes / 1e9:.3g} GB (with tmpfs and memfds)"
               if cause == "own" else "by the host's memory budget for all sandboxes together, not "
               "over its own limit (the memory was other sandboxes')")
        tail = f"{why}; {tail}" if tail else why
    return f" ({_how(code, worker.mode == 'bwrap')}{': ' + tail if tail else ''})"


class Lane:
    def __init__(self, gpu: str | None, sandbox: str, limits: Limits, env: dict[str, str],
                 free_cores: tuple[int, ...] = ()):
        """`free_cores`: the cores no lane times on (the dispatcher's), where this lane's trusted
        worker and next worker run; where there are none, every core but this lane's."""
        self.gpu, self.sandbox, self.limits = gpu, sandbox, limits
        self.env = {**env, "CUDA_VISIBLE_DEVICES": gpu or ""}
        others = free_cores or tuple(sorted(set(os.sched_getaffinity(0)) - set(limits.cores)))
        self.trusted = TrustedProcess(self.env, limits.threads, others if limits.cores else ())
        self.machine_lock = LaneLock(limits.cores, gpu)  # other runs' lanes on our cores or GPU wait
        # Started ahead, importing torch while the current candidate loads and is checked; the
        # trusted worker freezes it while anything is timed (on 2 cores its import, left running,
        # stretched honest batches 10x). It imports on the trusted worker's cores, not the
        # candidate's, and moves to the lane's before it gets a candidate (it has run none yet).
        self.spare: UntrustedProcess | None = None
        self.spare_limits = dataclasses.replace(limits, cores=others) if limits.cores and others else limits
        self.spare_ready = False  # its Ready came (read here, so the trusted worker never sees it)
        # Left running through the timing, even on cores apart from the lane's, its import saved
        # 16% of a CPU run's wall and scattered copies' speedups 1.5x as much (2 cores, 2026-12-06,
        # benchmarks/bench_spare_thawed.py): so frozen.
        self.freeze_spare = True

    def close(self) -> None:
        self.trusted.close()
        self._drop_spare()

    def _drop_spare(self) -> None:
        if self.spare is not None:
            self.spare.close()
            self.spare = None
        self.spare_ready = False

    def _says_ready(self) -> bool:
        """Whether the next worker imports off the lane's cores (and says Ready when it is done)."""
        return self.spare_limits is not self.limits

    def _new_spare(self) -> UntrustedProcess:
        self.spare_ready = False
        env = self._untrusted_env(None)
        if self._says_ready():
            env[READY_ENV] = "1"
        return UntrustedProcess(self.sandbox, None, self.spare_limits, env, None, self.gpu)

    def _wait_spare(self) -> None:
        """Until the next worker's Ready, where it says one: torch imported before it moves to the
        lane's cores. One that dies or takes too long is replaced by a fresh worker later."""
        if self.spare is None or self.spare_ready or not self._says_ready():
            return
        try:
            wire.recv(self.spare.sock, (wire.Ready,), SPARE_READY_TIMEOUT_S)
            self.spare_ready = True
        except (OSError, wire.ProtocolError):
            self._drop_spare()

    def _worker(self, build_dir: Path | None) -> UntrustedProcess:
        """A fresh untrusted worker for one candidate: the spare started during the previous
        measurement when it fits (no build dir to mount), else a new one. Then a new spare."""
        worker = None
        if self.spare is not None and self.spare.proc.poll() is not None:  # it died waiting
            self._drop_spare()
        if build_dir is None:
            self._wait_spare()  # read already, unless this is a measurement's second try
        if build_dir is None and self.spare is not None:
            worker, self.spare, self.spare_ready = self.spare, None, False
            if self.spare_limits is not self.limits and not worker.group.set_cores(self.limits.cores):
                worker.close()  # it cannot move to the lane's cores: a fresh one born there
                worker = None
        if worker is None:
            if build_dir is not None:
                own_folder(build_dir, self.sandbox)  # made here (nobody's where it drops), never read here
            env = self._untrusted_env(build_dir)
            worker = UntrustedProcess(self.sandbox, None, self.limits, env, build_dir, self.gpu)
        if build_dir is None and self.spare is None:
            self.spare = self._new_spare()
        return worker

    def measure(self, request: wire.MeasureRequest, build_dir: Path | None, backstop_s: float) -> Outcome:
        """The candidate's outcome; HarnessFailure where the trusted side failed, not the candidate.
        A candidate the kernel killed for the budget over all sandboxes (SIGKILL, others' memory,
        not its own limit: red team round 16) before any timed batch is measured once more
        before its crash counts (not later: no second draw of the timing, round 18). No other
        run on this machine measures on our cores or GPU meanwhile (lane_lock; the backstop
        starts once we hold them). A new trusted worker and the first candidate's worker start,
        and the trusted worker imports torch, before that: off the lane's cores, as a compile
        pool's sandboxes do, and not inside another run's wait."""
        self._start_ahead(build_dir)
        with self.machine_lock.held():
            outcome, budget_killed = self._measure_once(request, build_dir, backstop_s)
            if budget_killed:
                outcome, _ = self._measure_once(request, build_dir, backstop_s)
        return outcome

    def _start_ahead(self, build_dir: Path | None) -> None:
        """The trusted worker started (again, where it died) and ready; where the lane has cores of
        its own, the next candidate's worker started on the others and its torch imported."""
        if not self.trusted.alive():
            self.trusted.close()
            self._drop_spare()  # a trusted worker that died mid-measurement may have left it frozen
            self.trusted.start()
        if build_dir is None and self.spare is None and self._says_ready():
            self.spare = self._new_spare()
        self.trusted.wait_ready()
        if build_dir is None:
            self._wait_spare()

    def _measure_once(self, request: wire.MeasureRequest, build_dir: Path | None,
                      backstop_s: float) -> tuple[Outcome, bool]:
        start = time.perf_counter()
        watch = Stopwatch("lane")  # WARPK_PROFILE only (benchmarks/profile_evaluator.py)
        if not self.trusted.alive():  # it died since (a budget kill's second measurement)
            self._start_ahead(build_dir)
        worker = self._worker(build_dir)
        watch.lap("spawn")
        try:
            # the trusted worker starts the reference worker in the same sandbox, with the same
            # limits, and freezes the candidate's (rooted at its pid) while the reference runs
            request = dataclasses.replace(request, sandbox=self.sandbox, gpu=self.gpu,
                                          memory_limit_gb=self.limits.memory_limit_gb,
                                          cores=list(self.limits.cores),
                                          candidate_pid=worker.proc.pid,
                                          spare_pid=self.spare.proc.pid if self.spare and self.freeze_spare
                                          else None)
            try:
                wire.send(self.trusted.sock, request, worker.sock.fileno())
            except (OSError, wire.ProtocolError) as err:
                why = f"the trusted worker did not take the request ({type(err).__name__}: {err})"
                self.trusted.close()
                raise HarnessFailure(why) from err
            worker.sock.close()  # the trusted worker holds its own copy now
            measurement = self._wait(worker, backstop_s)
            watch.lap("measurement")
            if measurement.status == HARNESS_ERROR:
                raise HarnessFailure(measurement.error or "the trusted worker reported a harness error")
            budget_killed = False
            if measurement.status == "crashed":
                try:
                    worker.proc.wait(timeout=2)  # it is dying: say how
                    why = f"{measurement.error}{_death(worker)}"
                    measurement = dataclasses.replace(measurement, error=why)
                    budget_killed = (_killed(worker) and measurement.phase in RETRY_PHASES
                                     and worker.group.oom_cause() == "budget")
                except subprocess.TimeoutExpired:
                    pass
        finally:
            worker.close()
            watch.lap("close")
            watch.write(candidate_pid=worker.proc.pid, spare_pid=self.spare.proc.pid if self.spare else None,
                        candidate_sha=hashlib.sha256(request.candidate_source.encode()).hexdigest())
        return Outcome(measurement, time.perf_counter() - start, self.sandbox), budget_killed

    def _untrusted_env(self, build_dir: Path | None) -> dict[str, str]:
        env = dict(self.env)
        if build_dir is not None:
            env["TORCH_EXTENSIONS_DIR"] = str(build_dir)
        return env

    def _wait(self, worker: UntrustedProcess, backstop_s: float) -> wire.Measurement:
        """The trusted worker's answer; the parent's own verdict on memory or a stuck lane."""
        deadline = time.monotonic() + backstop_s + BACKSTOP_GRACE_S
        killed_for = None
        answer_ready = select.poll()  # not select(): a busy trainer's fds exceed select's 1024
        answer_ready.register(self.trusted.sock, select.POLLIN)
        while True:
            if answer_ready.poll(POLL_S * 1000):  # an answer, or the trusted worker is gone
                try:
                    answer, _ = wire.recv(self.trusted.sock, wire.TRUSTED_REPLIES, ANSWER_TIMEOUT_S)
                except wire.ProtocolError as err:
                    try:
                        code = self.trusted.proc.wait(timeout=2)
                    except subprocess.TimeoutExpired:
                        code = None
                    words = self.trusted.last_words()
                    self.trusted.close()
                    how = "still running" if code is None else _how(code, via_bwrap=False)
                    raise HarnessFailure(f"the trusted worker failed ({err}; {how}"
                                         f"{': ' + words if words else ''})") from err
                if worker.guard_verdict:  # killed for the host's file table (warpk.evaluator.filetable)
                    return wire.Measurement("crashed", worker.guard_verdict)
                return killed_for or answer
            if killed_for is None and worker.proc.poll() is None:
                if worker.rss_gb() > self.limits.memory_limit_gb:
                    killed_for = _memory_verdict(self.limits.memory_limit_gb)
                    worker.kill()
            if time.monotonic() > deadline:
                worker.kill()
                self.trusted.close()  # stuck itself: a fresh one next time
                self._drop_spare()  # it may have frozen the spare and never thawed it (round 18)
                why = f"the evaluation exceeded its backstop of {backstop_s:.0f} s"
                return wire.Measurement("timeout", why)


def compile_candidate(source: str, build_dir: Path, limits: Limits, env: dict[str, str], sandbox: str,
                      timeout_s: float, device: str) -> tuple[wire.Reply | None, str]:
    """Build a CUDA candidate (GPU hidden): (the worker's Reply or None if it died, its last line)."""
    own_folder(build_dir, sandbox)  # made here (nobody's where it drops), never read here
    env = {**env, "CUDA_VISIBLE_DEVICES": "", "TORCH_EXTENSIONS_DIR": str(build_dir)}
    worker = UntrustedProcess(sandbox, None, limits, env, build_dir, None, pool=True)
    try:
        send_timeout(worker.sock, timeout_s)  # it reads the Load once torch is imported
        wire.send(worker.sock, wire.Load(source, device, limits.threads, compile_only=True))
        reply, _ = wire.recv(worker.sock, (wire.Reply,), timeout_s=timeout_s)
        return reply, ""
    except (OSError, wire.ProtocolError):
        worker.kill()
        return None, worker.stderr_tail()
    finally:
        worker.close()
