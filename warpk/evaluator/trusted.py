"""The trusted worker: everything that decides a verdict, in a process that never imports
candidate code.

One per lane, reused across candidates. For each MeasureRequest from the parent (with the socket
of a fresh, sandboxed untrusted worker attached) it drives the untrusted worker
(warpk.evaluator.untrusted) and the task's reference worker (the same harness with the task's
Model, warpk.evaluator.reference) through (warpk.evaluator.session.Session.run):

  0. the task's reference built and run here once per task, before any candidate code runs:
     running out of memory then is the task's (`too_big`); from the candidate's import on, the
     candidate's (it shares the device); then, once a minute per task, shape and lane, the
     reference worker timed alone, back to back, the candidate's idle harness frozen (the
     baseline, warpk.evaluator.timing_phase)
  1. load      the candidate is imported over there, the task in the reference worker -> compile_error
  2. build     Model here, in the reference worker and ModelNew over there, one seed  -> runtime_error
  3. correctness: `correctness_trials` trials on inputs drawn here from `secrets` seeds, sent
     with the Go that runs them; outputs come back as sealed bytes (or device memory copied
     here first) and are compared here with this process's reference; the first trial runs
     twice (determinism); inputs come back to be checked unmodified            -> incorrect
  4. FLOPs and minimum bytes of one reference call (torch's flop counter) for the roofline
  5. timing (warpk.evaluator.timing_phase): both sides timed by this process's clock through
     the identical round trip, the candidate frozen while the reference runs; where the
     reference was slower than its baseline, the candidate timed alone too       -> speedup
  6. energy (evaluate.energy=nvml|sampler, GPU only; warpk.evaluator.energy_phase)
  7. on a GPU, one correctness trial at each other declared shape
Every wait on a worker has a limit: compile_timeout_s for loading, otherwise run_timeout_s +
run_timeout_factor x the reference's time for the same work -> timeout. A failure of the task's
reference or of the reference worker is `harness_error` (the parent stops the run), never the
candidate's verdict, except running out of the shared GPU's memory or time after the candidate ran.

This module is the worker process: requests in, each Session's outcome mapped to a verdict
(`measure`), Measurements out.

Non-goals: no sandboxing (warpk.evaluator.sandbox), no records (warpk.evaluator.assemble).
"""

from __future__ import annotations

import os
import socket
import sys
import traceback

from warpk.evaluator import protocol as wire
from warpk.evaluator.checks import Verdict
from warpk.evaluator.devices import Device
from warpk.evaluator.energy import ReferenceEnergies
from warpk.evaluator.errors import HarnessError
from warpk.evaluator.fds import close_apart, settle
from warpk.evaluator.freeze import FreezeError
from warpk.evaluator.link import one_line
from warpk.evaluator.reference import ReferenceWorkers
from warpk.evaluator.remote import raise_open_files
from warpk.evaluator.session import Session


def measure(torch, devices: dict, request: wire.MeasureRequest, sock: socket.socket,
            energies: ReferenceEnergies | None = None,
            references: ReferenceWorkers | None = None) -> wire.Measurement:
    """One request; never raises for what the candidate does."""
    if request.device not in devices:
        devices[request.device] = Device(torch, request.device)
    torch.set_num_threads(request.settings.num_threads)
    session = None
    try:
        session = Session(torch, devices[request.device], request, sock, energies, references)
        return session.run()
    except HarnessError as err:
        return wire.Measurement("harness_error", f"evaluation failed: {err}"[:500],
                                session.phase if session else "load")
    except Verdict as verdict:
        fields = session.found.fields() if session else {}
        return wire.Measurement(verdict.status, verdict.reason, session.phase if session else None, **fields)
    except FreezeError as err:
        return wire.Measurement("crashed", f"the candidate's sandbox could not be frozen: {err}",
                                session.phase if session else None)
    except wire.PeerClosed:
        phase = session.phase if session else None
        return wire.Measurement("crashed", f"the candidate's worker died in the {phase} phase", phase)
    except wire.ProtocolError as err:
        return wire.Measurement("crashed", f"the candidate's worker broke the protocol: {err}"[:500],
                                session.phase if session else None)
    except (MemoryError, torch.cuda.OutOfMemoryError) as err:  # on the reference's side
        fields = session.found.fields() if session else {}
        phase = session.phase if session else None
        if session is None or not session.went:  # before the candidate ran anything: the task
            reason = f"the task does not fit this device's memory on the reference's side: {one_line(err)}"
            return wire.Measurement("too_big", reason[:500], phase, **fields)
        # After it ran, the candidate (which shares the GPU) may hold the memory: its failure.
        reason = f"out of memory on the reference's side after the candidate ran: {one_line(err)}"
        return wire.Measurement("runtime_error", reason[:500], phase, **fields)
    except Exception as err:  # noqa: BLE001 - this harness failed: say so
        where = "".join(traceback.format_exception_only(err)).strip()[-300:]
        if "CUDA error" in str(err):  # a device fault: the candidate's process shares the device
            return wire.Measurement("crashed", f"evaluation failed: {one_line(err)} ({where})",
                                    session.phase if session else None)
        return wire.Measurement("harness_error", f"evaluation failed: {one_line(err)} ({where})"[:500],
                                session.phase if session else None)
    finally:
        if session is not None:
            session.spare.thaw()  # not closed: its cgroup becomes its own freezer's (freeze.py)
        if session is not None and session.freezer is not None:
            session.freezer.close()
        if session is not None and session.pidfd is not None:
            os.close(session.pidfd)
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
        if session is not None:
            session.watch.lap("close")
            go = {"candidate": (session.go_watch.phases, session.go_watch.counts)}
            if session.ref_link is not None:
                go["reference"] = (session.ref_link.go_watch.phases, session.ref_link.go_watch.counts)
            session.watch.write(candidate_pid=request.candidate_pid, go=go)


def _warm_up(torch) -> None:
    """What every first reference probe paid once (steps.work_of): torch's flop counter loads
    lazily, 1.1 s on the CPU (2026-12-06), inside the lane's lock; done here, before Ready."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False):
        torch.softmax(torch.ones(2, 2), dim=-1)


def serve() -> int:
    """Answer MeasureRequests from the parent on $WARPK_PARENT_FD until it closes the socket."""
    parent = socket.socket(fileno=int(os.environ.pop("WARPK_PARENT_FD")))
    raise_open_files()  # its fd passing above what a candidate can hold in flight (remote.py)
    import torch

    _warm_up(torch)
    wire.send(parent, wire.Ready())
    devices: dict = {}
    energies = ReferenceEnergies()  # this lane's, for the run
    references = ReferenceWorkers()
    try:
        return _serve(torch, parent, devices, energies, references)
    finally:
        references.close()


def _serve(torch, parent, devices, energies, references) -> int:
    while True:
        try:
            request, fd = wire.recv(parent, (wire.MeasureRequest,), keep_fd=(wire.MeasureRequest,))
        except wire.PeerClosed:
            return 0
        if fd is None:
            wire.send(parent, wire.Measurement("crashed", "no untrusted worker socket came with the request"))
            continue
        sock = socket.socket(fileno=fd)
        try:
            result = measure(torch, devices, request, sock, energies, references)
        finally:
            close_apart(sock)  # what the worker left queued in it is freed apart (fds.py), and
            settle()  # before the lane goes on to the next candidate
        wire.send(parent, result)


if __name__ == "__main__":
    code = serve()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # nothing left to tidy: torch's own teardown took ~0.9 s of every lane's close
