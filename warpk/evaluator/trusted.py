"""The trusted worker: everything that decides a verdict, in a process that never imports
candidate code.

One per lane, reused across candidates (it runs only the task's reference). For each
MeasureRequest from the parent (with the socket of a fresh, sandboxed untrusted worker attached)
it drives the untrusted worker (warpk.evaluator.untrusted) through:

  1. load      the candidate is imported over there                          -> compile_error
  2. build     Model here and ModelNew there, from one seed drawn per item    -> runtime_error
  3. correctness: `correctness_trials` trials, each on inputs drawn here from a seed made by
     `secrets` for that call (unknowable over there before the call); the outputs come back as
     bytes in a sealed memfd (on a GPU, for batches of >= DEVICE_MEMORY_BYTES, in device memory
     that is copied here first) and are compared here with the reference's; the first trial runs
     twice on the same inputs (determinism) and every trial's inputs come back to be checked
     unmodified (an honest-bug check: the candidate reports them)              -> incorrect
  4. FLOPs and minimum bytes of one reference call (torch's flop counter) for the roofline
  5. timing: one warmup batch, then `timing_batches` batches of K calls, K sized so a batch of
     the reference lasts >= batch_target_ms (and fits batch_memory_bytes), each call on its own
     fresh inputs, reference and candidate in a random order per batch (a task over BIG_IO_BYTES:
     the candidate first). The reference's time is measured here. The candidate's own CUDA-event
     (perf_counter on CPU) time is used for resolution only when it is consistent with this
     process's wall clock from sending `Go` to having copies of its outputs here:
     reported >= wall - 1.5 x (the reference's delivery overhead + on a GPU the mapping cost of a
     device delivery, calibrated before the first candidate: Carrier.calibrate_mapping) - slack,
     else `implausible`. Every timed call's output is verified.                   -> incorrect
  6. energy (evaluate.energy=nvml|sampler, GPU only): the candidate on the GPU's NVML counter
     (or the sampler daemon's stream of it, plus the lane's telemetry over the candidate's own
     batches and windows), read here while its calls run over there, beside the reference's
     energy, which this lane measured before step 1 (now or for an earlier candidate of the
     task: energy.ReferenceEnergies); a meter failure is the record's energy_error, never a
     modelled stand-in
  7. on a GPU, one correctness trial at each other declared shape (shape-specialised code)
A batch whose reported time the wall clock contradicts is not used (a stalled batch, or a lie)
and another is run in its place; more than 3 x `timing_batches` of them -> `implausible`. Speedup =
median of the per-batch reference/candidate ratios with a distribution-free 95% interval;
"faster" (records.faster) means its lower end is above 1 + records.SPEED_BIAS_MARGIN.

Every wait on the untrusted worker has a limit: compile_timeout_s for loading, otherwise
run_timeout_s + run_timeout_factor x the reference's time for the same work -> timeout.

Session lives in four modules, read in this order: this one (the protocol's order, the reference,
correctness), `link` (messages and tensors to and from the untrusted worker, the bounds on both),
`timing_phase` (step 5) and `energy_phase` (step 6).

Non-goals: no sandboxing (warpk.evaluator.sandbox), no records (warpk.evaluator.assemble).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import statistics
import sys
import time
import traceback
import types

from warpk.evaluator import protocol as wire
from warpk.evaluator.checks import Verdict, check_correct, check_redrawn, fingerprint, flatten, same_inputs
from warpk.evaluator.devices import Device
from warpk.evaluator.energy import ReferenceEnergies, ReferenceEnergy
from warpk.evaluator.energy_phase import EnergyPhases
from warpk.evaluator.link import BIG_IO_BYTES, Link, one_line
from warpk.evaluator.timing_phase import TimingPhase
from warpk.evaluator.transport import layout


def host_peak_bytes(torch, task) -> int | None:
    """A lower bound of the host bytes the protocol holds at its peak for one call of `task` on
    the CPU, from its inputs (I) and the reference's outputs (O) sized on the meta device: the
    big-task path's max(2I, I + 2O) in the workers plus the memfds that carry I and O
    (docs/evaluator.md section 3); None when the task cannot be sized that way."""
    try:
        with torch.device("meta"):
            torch.manual_seed(0)
            inputs = list(task.get_inputs())
            model = task.Model(*task.get_init_inputs())
            outputs = flatten(model(*inputs))
    except Exception:  # noqa: BLE001 - data-dependent code: not checkable without data
        return None
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    outs = [t for t in outputs if isinstance(t, torch.Tensor)]
    in_bytes = sum(t.numel() * t.element_size() for t in tensors)
    out_bytes = sum(t.numel() * t.element_size() for t in outs)
    return max(2 * in_bytes, in_bytes + 2 * out_bytes) + in_bytes + out_bytes


def available_host_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (None where there is none)."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _load_task(source: str) -> types.ModuleType:
    module = types.ModuleType("warpk_task")
    module.__file__ = "task.py"
    exec(compile(source, "task.py", "exec"), module.__dict__)  # noqa: S102 - the task is trusted
    return module


class Session(TimingPhase, EnergyPhases, Link):
    """One candidate's measurement: the reference here, the candidate behind `sock` (Link), in
    the protocol's order (`run`)."""

    def __init__(self, torch, dev: Device, request: wire.MeasureRequest, sock: socket.socket,
                 energies: ReferenceEnergies | None = None):
        super().__init__(torch, dev, request.settings, sock)
        self.request = request
        self.energies = energies if energies is not None else ReferenceEnergies()
        self.ref_energy: ReferenceEnergy | None = None
        self.ref_energy_error: str | None = None
        self.task = _load_task(request.task_source)
        self.constants = {
            k: getattr(self.task, k) for o in request.shapes.values() for k in o if hasattr(self.task, k)
        }
        self.result: dict = {"device": dev.name}
        self.confirmed_call_ms = 0.0  # per call, what the trusted clock confirmed while timing

    # --- the reference side ------------------------------------------------------------------------
    def apply_shape(self, shape: str) -> None:
        for key, value in self.constants.items():
            setattr(self.task, key, value)
        for key, value in self.request.shapes.get(shape, {}).items():
            setattr(self.task, key, value)

    def check_host_memory(self) -> None:
        """On the CPU, a task whose protocol peak cannot fit this host's available memory is
        `too_big` before anything is allocated: its inputs and the reference's outputs are sized
        on torch's meta device (no data), since a real allocation would end in the kernel's OOM
        killer, not an error. Tasks whose get_inputs or reference cannot run on meta are not
        checked here."""
        if self.dev.cuda:
            return
        need = host_peak_bytes(self.torch, self.task)
        available = available_host_bytes()
        if need is not None and available is not None and need > available:
            raise Verdict("too_big", f"the task needs about {need / 2**30:.1f} GiB of host memory in this "
                          f"protocol (inputs and outputs, both workers) and this machine has "
                          f"{available / 2**30:.1f} GiB available")

    def inputs(self, seed: int) -> list:
        torch = self.torch
        torch.manual_seed(seed)
        with torch.device(self.dev.device):
            values = self.task.get_inputs()
        return [x.to(self.dev.device) if isinstance(x, torch.Tensor) else x for x in values]

    def build(self) -> None:
        """Model here and ModelNew over there from one fresh seed."""
        torch = self.torch
        self.phase = "build"
        seed = secrets.randbits(31)
        init_args = list(self.task.get_init_inputs())
        with torch.device(self.dev.device):
            torch.manual_seed(seed)
            self.reference = self.task.Model(*init_args).to(self.dev.device).eval()
        fd, (encoded,) = self.carriers[False].encode_calls([init_args])
        try:
            self.ask(wire.Build(seed, encoded), fd, self.limit_for(1) + self.s.run_timeout_s)
        finally:
            if fd is not None:
                os.close(fd)

    def reference_batch(self, calls: list[list]) -> tuple[list, float, float]:
        """(outputs, compute ms, wall ms) of the reference, delivered the way the candidate's are:
        packed, described, and copied back out."""
        trip = self.carrier_for(len(calls)).round_trip(self.out_bytes * len(calls))
        start = time.perf_counter()
        outputs, compute_ms = self.dev.run_calls(self.reference, calls)
        flat = [flatten(out) for out in outputs]
        it = iter(trip([o for out in flat for o in out]))
        # the answer's metadata, encoded, parsed and validated as the candidate's is
        ran = wire.Ran("ok", None, [[next(it) for _ in out] for out in flat], [], compute_ms)
        wire.decode(json.loads(json.dumps(wire.to_wire(ran))), (wire.Ran,))
        wall_ms = (time.perf_counter() - start) * 1e3
        return outputs, compute_ms, wall_ms

    # --- the protocol ------------------------------------------------------------------------------
    def correctness(self) -> int:
        """The correctness trials; returns the last trial's seed (its inputs are redrawn later)."""
        torch, s = self.torch, self.s
        self.phase = "correctness"
        worst_abs = worst_rel = 0.0
        ref_times, seed = [], 0

        def reference(inputs: list):
            start = time.perf_counter()
            out = self.reference(*inputs)
            self.dev.sync()
            ref_times.append(time.perf_counter() - start)
            self.ref_call_s = max(ref_times)  # the next limit scales with the reference too
            self.size_outputs(out)
            return out

        for trial in range(s.correctness_trials):
            seed = secrets.randbits(63)
            inputs = self.inputs(seed)
            ref_out = reference(inputs) if trial == 0 else None  # the first also sizes the task
            in_bytes = layout([x for x in inputs if isinstance(x, torch.Tensor)])[1]
            # A huge task runs the candidate first and the reference after it on the same inputs
            # drawn again, so one set of outputs at a time is held (docs/evaluator.md §3).
            # Its determinism re-run and returned inputs are skipped: they cost memory.
            big = in_bytes + self.out_bytes > BIG_IO_BYTES
            if big:
                ref_out = None
                self.release()
            elif ref_out is None:
                ref_out = reference(inputs)
            repeats = 2 if trial == 0 and not big else 1
            encoded = self.encode([inputs] * repeats)
            prints = [fingerprint(torch, inputs)]
            del inputs  # the candidate's copy is packed; ours is drawn again from the seed if needed
            self.stage_encoded(*encoded)  # after the reference: its inputs reach it just before Go
            limit = self.limit_for(repeats) + (self.request.first_call_timeout_s if trial == 0 else 0.0)
            _, outs, ins, _ = self.go(repeats, limit, return_inputs=not big, poison=True, release=big)
            if big:
                self.settle()
                inputs = self.inputs(seed)
                check_redrawn(torch, [inputs], prints)
                ref_out = reference(inputs)
                del inputs
            for k, out in enumerate(outs):
                where = f"trial {trial}" + (" (the same inputs again: non-deterministic?)" if k else "")
                abs_err, rel_err = check_correct(torch, ref_out, out, s, where)
                worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
            del outs, ref_out
            if ins:
                pristine = [x for x in self.inputs(seed) if isinstance(x, torch.Tensor)]
                if any(not same_inputs(torch, got, pristine) for got in ins):
                    raise Verdict("incorrect", "the candidate modified its inputs in place")
            del ins
        self.ref_call_s = statistics.median(ref_times[1:] or ref_times)
        self.result.update(max_abs_err=worst_abs, max_rel_err=worst_rel)
        return seed

    def work_estimate(self, inputs: list) -> None:
        """FLOPs (torch's flop counter) and minimum bytes moved of one reference call."""
        torch = self.torch
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            out = self.reference(*inputs)
        outs = [o for o in flatten(out) if isinstance(o, torch.Tensor)]
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        io_bytes = sum(t.numel() * t.element_size() for t in tensors + outs)
        params = list(self.reference.parameters()) + list(self.reference.buffers())
        self.result.update(
            flops=float(counter.get_total_flops()),
            min_bytes=float(io_bytes + sum(p.numel() * p.element_size() for p in params)),
            io_bytes=float(io_bytes),
        )

    def other_shapes(self) -> None:
        """On a GPU, one correctness trial at every other declared shape."""
        if not self.dev.cuda:
            return
        for name in self.request.shapes:
            if name == self.request.shape:
                continue
            self.phase = "correctness"
            self.apply_shape(name)
            self.build()
            inputs = self.inputs(secrets.randbits(63))
            ref_out = self.reference(*inputs)
            self.size_outputs(ref_out)
            self.stage([inputs])
            del inputs
            _, (out,), _, _ = self.go(1, self.limit_for(1) + self.s.run_timeout_s)
            check_correct(self.torch, ref_out, out, self.s, f"the {name} shape")

    def run(self) -> wire.Measurement:
        torch, s = self.torch, self.s
        self.apply_shape(self.request.shape)
        self.check_host_memory()
        self.reference_energy()  # before the candidate exists on this lane
        if self.dev.cuda:  # likewise: no candidate may slow what the wall bound allows
            self.release()
            self.carriers[True].calibrate_mapping()
        start = time.perf_counter()
        self.ask(wire.Load(self.request.candidate_source, self.request.device, s.num_threads),
                 limit_s=s.compile_timeout_s)
        self.result["compile_s"] = time.perf_counter() - start
        start = time.perf_counter()
        with torch.no_grad():
            self.build()
            self.work_estimate(self.inputs(self.correctness()))
            self.result["correctness_s"] = time.perf_counter() - start
            with self.lane_telemetry():
                start = time.perf_counter()
                self.timing()
                self.result["timing_s"] = time.perf_counter() - start
                self.energy()
            self.other_shapes()
        return wire.Measurement(status="ok", **self.result)


def measure(torch, devices: dict, request: wire.MeasureRequest, sock: socket.socket,
            energies: ReferenceEnergies | None = None) -> wire.Measurement:
    """One request; never raises for what the candidate does."""
    if request.device not in devices:
        devices[request.device] = Device(torch, request.device)
    torch.set_num_threads(request.settings.num_threads)
    session = None
    try:
        session = Session(torch, devices[request.device], request, sock, energies)
        return session.run()
    except Verdict as verdict:
        fields = session.result if session else {}
        return wire.Measurement(verdict.status, verdict.reason, session.phase if session else None, **fields)
    except wire.PeerClosed:
        phase = session.phase if session else None
        return wire.Measurement("crashed", f"the candidate's worker died in the {phase} phase", phase)
    except wire.ProtocolError as err:
        return wire.Measurement("crashed", f"the candidate's worker broke the protocol: {err}"[:500],
                                session.phase if session else None)
    except (MemoryError, torch.cuda.OutOfMemoryError) as err:  # on the reference's side
        fields = session.result if session else {}
        phase = session.phase if session else None
        if session is None or not session.went:  # before the candidate ran anything: the task
            reason = f"the task does not fit this device's memory on the reference's side: {one_line(err)}"
            return wire.Measurement("too_big", reason[:500], phase, **fields)
        # After it ran, the candidate (which shares the GPU) may hold the memory: its failure.
        reason = f"out of memory on the reference's side after the candidate ran: {one_line(err)}"
        return wire.Measurement("runtime_error", reason[:500], phase, **fields)
    except Exception as err:  # noqa: BLE001 - the task or this harness failed: say so
        where = "".join(traceback.format_exception_only(err)).strip()[-300:]
        status = "crashed" if "CUDA error" in str(err) else "runtime_error"
        return wire.Measurement(status, f"evaluation failed: {one_line(err)} ({where})",
                                session.phase if session else None)
    finally:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()


def serve() -> int:
    """Answer MeasureRequests from the parent on $WARPK_PARENT_FD until it closes the socket."""
    parent = socket.socket(fileno=int(os.environ.pop("WARPK_PARENT_FD")))
    import torch

    devices: dict = {}
    energies = ReferenceEnergies()  # this lane's, for the run
    while True:
        try:
            request, fd = wire.recv(parent, (wire.MeasureRequest,))
        except wire.PeerClosed:
            return 0
        if fd is None:
            wire.send(parent, wire.Measurement("crashed", "no untrusted worker socket came with the request"))
            continue
        sock = socket.socket(fileno=fd)
        try:
            result = measure(torch, devices, request, sock, energies)
        finally:
            sock.close()
        wire.send(parent, result)


if __name__ == "__main__":
    sys.exit(serve())
