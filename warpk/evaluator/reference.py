"""The reference worker: the task's `Model` in the candidates' own harness, timed the same way.

Evaluator v3 times both sides on the trusted worker's clock through the identical round trip
(`Go` with the inputs, outputs copied back). So the reference runs in the very harness the
candidate runs in (warpk.evaluator.untrusted, started by warpk.evaluator.sandbox in the same
sandbox, with the same environment and limits), loaded with the task's source plus
`ModelNew = Model`: trusted code in a process of its own. Its transport, mapping and launch
costs are the candidate's, and cancel in the ratio.

The trusted worker owns it: one per lane, kept across candidates (each candidate's `Build`
rebuilds its model under that candidate's seed) and sent the next task's `Load` when the task
changes (starting an interpreter with torch and a CUDA context costs seconds a task). It never
sees candidate code.

Non-goals: no timing (warpk.evaluator.timing_phase), no verdicts.
"""

from __future__ import annotations

import contextlib
import os

from warpk.evaluator import protocol as wire
from warpk.evaluator.checks import Verdict
from warpk.evaluator.errors import HarnessError
from warpk.evaluator.freeze import FreezeError, Freezer
from warpk.evaluator.remote import open_pidfd, wait_worker_pid
from warpk.evaluator.sandbox import Limits, UntrustedProcess
from warpk.evaluator.timing_phase import AloneTimes

# The reference worker's load (a fresh interpreter, torch, the task) is our code's: the candidate's
# compile limit bounds it only from here up (a test's 4 s limit did not hold on one core shared
# with a worker started ahead importing torch: a harness failure, 2026-12-07).
LOAD_FLOOR_S = 60.0


@contextlib.contextmanager
def reference_failures(references: ReferenceWorkers, candidate_ran: bool, what: str):
    """Failures of the reference worker are the harness's, except running out of the GPU's memory
    or time once the candidate (which shares the GPU) has run: those are its."""
    try:
        yield
    except FreezeError as err:
        references.discard()
        raise HarnessError(f"the reference worker could not be frozen in {what}: {err}") from err
    except (Verdict, wire.ProtocolError) as err:
        references.discard()
        status = getattr(err, "status", "crashed")
        reason = getattr(err, "reason", str(err))
        if candidate_ran and (status == "timeout" or out_of_memory(reason) or starved_handle(reason)):
            raise Verdict(status if status == "timeout" else "runtime_error",
                          f"the reference worker failed in {what} after the candidate ran "
                          f"(it shares the device): {reason}"[:500]) from err
        raise HarnessError(f"the reference worker failed in {what}: {status}: {reason}"[:500]) from err


def out_of_memory(text: str) -> bool:
    """An error text that says the device ran out of memory (torch's, cuBLAS's, cuDNN's, and
    cudashare.DeviceOutOfMemory's, which says "out of memory")."""
    return any(m in text for m in ("out of memory", "ALLOC_FAILED", "CUDNN_STATUS_ALLOC", "OutOfMemory"))


def starved_handle(text: str, device_short=None) -> bool:
    """A cuBLAS/cuDNN handle the reference worker creates at its first forward (in timing) that
    failed as NOT_INITIALIZED while the device is short of memory now (the candidate, frozen,
    still holds what it took): the candidate's doing (red team round 20). With memory free, the
    same text is a broken install, the harness's (round 21)."""
    if "CUBLAS_STATUS_NOT_INITIALIZED" not in text and "CUDNN_STATUS_NOT_INITIALIZED" not in text:
        return False
    return (device_short or _device_short)()


def _device_short() -> bool:
    """Under a tenth of this process's GPU memory free at this moment."""
    try:
        import torch

        free, total = torch.cuda.mem_get_info()
    except Exception:  # noqa: BLE001 - no device to ask: not shown to be short
        return False
    return free < 0.1 * total


def reference_source(task_source: str, overrides: dict) -> str:
    """The task's module with a shape's constants set and its Model exported as ModelNew."""
    lines = [task_source, ""]
    lines += [f"{name} = {value!r}" for name, value in overrides.items()]
    lines += ["ModelNew = Model", ""]
    return "\n".join(lines)


def worker_key(request: wire.MeasureRequest) -> tuple:
    """How a reference worker was started (a worker can load another task; not be restarted)."""
    return (request.device, request.gpu, request.settings.num_threads, request.sandbox,
            request.memory_limit_gb, tuple(request.cores))


def source_of(request: wire.MeasureRequest) -> str:
    return reference_source(request.task_source, request.shapes.get(request.shape, {}))


class ReferenceWorker:
    """A started reference worker; `Load` is sent at once and answered by `wait_loaded`."""

    def __init__(self, request: wire.MeasureRequest):
        self.key = worker_key(request)
        limits = Limits(request.memory_limit_gb, request.settings.num_threads,  # as the candidate's
                        address_space_limit=request.device == "cpu", cores=tuple(request.cores))
        env = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "MAX_JOBS": "4"}
        # its working dir as the candidate's: a tmpfs in its sandbox, or a host folder it removes
        self.process = UntrustedProcess(request.sandbox, None, limits, env, None, request.gpu,
                                        role="reference")
        self.sock = self.process.sock
        # frozen from each answer to the next message, as the candidate's (warpk.evaluator.link)
        self.pidfd = None
        try:
            self.pid = wait_worker_pid(self.process.proc.pid)  # the sandbox is complete from here
            self.pidfd = open_pidfd(self.pid)  # its output fds are taken through it (remote.take_fd)
            self.freezer = Freezer(self.process.proc.pid)
            self.loaded: wire.Reply | None = None
            self.load(request)
        except BaseException:
            if self.pidfd is not None:
                os.close(self.pidfd)
            self.process.close()
            if hasattr(self, "freezer"):
                self.freezer.close()
            raise

    def load(self, request: wire.MeasureRequest) -> None:
        """Send the task's Load (answered by `wait_loaded`): at start, and for each new task. An
        answer still owed (the last candidate failed to load before it was read) is read first,
        so replies never fall a step behind."""
        if self.loaded is None and getattr(self, "source", None) is not None:
            try:
                self.wait_loaded(request.settings.compile_timeout_s)
            except RuntimeError:
                pass  # it could not load the last task: it has exited, and is replaced
        self.source = source_of(request)
        self.loaded = None
        self.freezer.thaw()  # frozen since its last answer
        wire.send(self.sock, wire.Load(self.source, request.device, request.settings.num_threads))

    def wait_loaded(self, limit_s: float) -> None:
        """Its answer to Load; RuntimeError (a harness failure) if the task does not load there."""
        if self.loaded is not None:
            return
        try:
            reply, _ = wire.recv(self.sock, (wire.Reply,), timeout_s=max(limit_s, LOAD_FLOOR_S))
        except wire.ProtocolError as err:
            raise RuntimeError(f"the reference worker did not load the task ({err}; "
                               f"{self.process.stderr_tail() or 'no output'})") from err
        if reply.status != "ok":
            raise RuntimeError(f"the reference worker could not load the task: {reply.error}")
        self.loaded = reply

    def alive(self) -> bool:
        return self.process.proc.poll() is None

    def close(self) -> None:
        self.freezer.thaw()
        self.process.close()  # killed and reaped first: its cgroup is empty, removed at once
        self.freezer.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class ReferenceWorkers:
    """The trusted worker's current reference worker, replaced when the task changes."""

    def __init__(self):
        self.current: ReferenceWorker | None = None
        # (task source, shape) run here before a candidate -> its pace: (median call s, slowest call s,
        # I/O bytes of a call, output bytes, output tensors)
        self.probed: dict[tuple[str, str], tuple[float, float, float, int, int]] = {}
        self.alone = AloneTimes()  # (task source, shape) -> the reference timed alone lately

    def for_request(self, request: wire.MeasureRequest) -> ReferenceWorker:
        key = worker_key(request)
        if self.current is not None and (self.current.key != key or not self.current.alive()):
            self.close()
        if self.current is not None and self.current.source != source_of(request):
            self.current.load(request)  # the next task in the same process: no new interpreter
            if not self.current.alive():
                self.close()
        if self.current is None:
            self.current = ReferenceWorker(request)
        return self.current

    def discard(self) -> None:
        """After a failure on its side: the next request starts a fresh one."""
        self.close()

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None


class GuardedSide:
    """The reference worker's link as the timing sees it: its failures, and only its, go through
    `guard` (Session.reference_side); the candidate's stay the candidate's."""

    def __init__(self, link, guard):
        self.link, self.guard = link, guard

    def go(self, calls: list[list], limit_s: float, **flags):
        with self.guard("timing"):
            return self.link.go(calls, limit_s, **flags)

    def settle(self) -> None:
        with self.guard("timing"):
            self.link.settle()

    def limit_for(self, calls: int) -> float:
        return self.link.limit_for(calls)
