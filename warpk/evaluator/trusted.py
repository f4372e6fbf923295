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

Non-goals: no sandboxing (warpk.evaluator.sandbox), no records (warpk.evaluator.assemble).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import socket
import statistics
import sys
import time
import traceback
import types

from warpk.evaluator import protocol as wire
from warpk.evaluator.checks import Verdict, check_correct, flatten, same_inputs
from warpk.evaluator.devices import Device
from warpk.evaluator.energy import ReferenceEnergies, ReferenceEnergy
from warpk.evaluator.speed import speed_summary
from warpk.evaluator.transport import ALIGN, Carrier, layout, tensor_bytes
from warpk.telemetry.lane import lane_fields

MAX_CALLS_PER_BATCH = 4096
# A call whose inputs + outputs exceed this is "big": no determinism re-run or returned inputs in
# correctness, and the candidate runs first, then the reference on the same inputs drawn again,
# so peak device memory stays about KernelBench's (inputs + 2 x outputs; docs/evaluator.md §3).
BIG_IO_BYTES = 1 << 30
# On a GPU, a batch that moves this much (inputs or outputs) travels in device memory.
DEVICE_MEMORY_BYTES = 256 << 20
ENERGY_INPUT_SETS = 3  # fresh input sets an energy loop cycles through
# The candidate's reported time must be >= its go->outputs wall time, less the delivery the
# reference needed for the same bytes (x OVERHEAD_FACTOR), less WALL_SLACK_MS (IPC, JSON) and
# WALL_SLACK_FRACTION of the wall: what its own clock may be short by (the residual risk).
WALL_SLACK_MS = 3.0
WALL_SLACK_FRACTION = 0.05
OVERHEAD_FACTOR = 1.5
# A contradicted batch is replaced; a lie contradicts every batch, a stalled machine only some
# (seen in CI: 11 of 17 on a freshly installed 2-core box), so a candidate gets this many
# replacements per wanted batch before it is `implausible`.
REFUSALS_PER_BATCH = 3
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


def wall_bound_ms(wall_ms: float, ref_ms: float, ref_wall_ms: float, mapping_ms: float) -> float:
    """The least time a candidate may report for a batch the trusted clock saw take `wall_ms`
    (go to outputs here): less 1.5 x the delivery the reference's batch of the same bytes needed
    (its wall less its compute) plus the calibrated mapping of a device delivery, less the slack."""
    overhead_ms = (max(ref_wall_ms - ref_ms, 0.0) + mapping_ms) * OVERHEAD_FACTOR
    return wall_ms - overhead_ms - WALL_SLACK_MS - WALL_SLACK_FRACTION * wall_ms


def fingerprint(torch, inputs: list) -> list[str]:
    """Cheap sums of a call's inputs, to check that drawing them again gives the same ones."""
    def one(x) -> str:
        if not isinstance(x, torch.Tensor):
            return repr(x)
        values = torch.view_as_real(x) if x.is_complex() else x
        return f"{tuple(x.shape)} {x.dtype} {float(values.sum(dtype=torch.float64))!r}"

    return [one(x) for x in inputs]


def check_redrawn(torch, calls: list[list], prints: list) -> None:
    """A huge task's reference runs on its inputs drawn again from the seed: they must match."""
    if [fingerprint(torch, c) for c in calls] != prints:
        raise RuntimeError("the task's get_inputs() is not a function of torch.manual_seed alone "
                           "(drawn again, its inputs differ), which a task over 1 GiB of inputs and "
                           "outputs needs")


def one_line(err: BaseException) -> str:
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text[:400]


def candidate_text(text: str | None) -> str:
    """A reason written by the candidate's process, bounded, and never passing for ours."""
    text = " ".join((text or "no reason given").split())[:600]
    return f"(from the candidate) {text}" if text.startswith(HARNESS_PREFIXES) else text


def _load_task(source: str) -> types.ModuleType:
    module = types.ModuleType("warpk_task")
    module.__file__ = "task.py"
    exec(compile(source, "task.py", "exec"), module.__dict__)  # noqa: S102 - the task is trusted
    return module


class Session:
    """One candidate's measurement: the reference here, the candidate behind `sock`."""

    def __init__(self, torch, dev: Device, request: wire.MeasureRequest, sock: socket.socket,
                 energies: ReferenceEnergies | None = None):
        self.torch, self.dev, self.request, self.sock = torch, dev, request, sock
        self.energies = energies if energies is not None else ReferenceEnergies()
        self.spans: list[tuple[float, float]] = []  # host-monotonic (start, end) of the candidate's Go's
        self.ref_energy: ReferenceEnergy | None = None
        self.ref_energy_error: str | None = None
        self.s = request.settings
        self.task = _load_task(request.task_source)
        self.constants = {
            k: getattr(self.task, k) for o in request.shapes.values() for k in o if hasattr(self.task, k)
        }
        self.result: dict = {"device": dev.name}
        self.carriers = {on: Carrier(torch, dev.device, on) for on in {False, dev.cuda}}
        self.carrier = self.carriers[False]  # the last Stage's (the next outputs come the same way)
        self.phase = "load"
        self.ref_call_s = None  # the reference's time per call, once known
        self.out_bytes = 0  # bytes of the reference's outputs of one call, once known
        self.in_bytes = 0  # bytes of one staged call's inputs
        self.out_count = self.in_count = 1  # tensors in one call's outputs / inputs, once known
        self.went = False  # whether the candidate has run any call yet
        self.confirmed_call_ms = 0.0  # per call, what the trusted clock confirmed while timing
        self.arrived = 0.0  # when the last answer of the untrusted worker was received

    # --- talking to the untrusted worker ----------------------------------------------------------
    def ask(self, message, fd: int | None = None, limit_s: float | None = None, expect=(wire.Reply,)):
        wire.send(self.sock, message, fd)
        return self.answer(limit_s, expect)

    def answer(self, limit_s: float | None = None, expect=(wire.Reply,)):
        """The untrusted worker's next reply if it is ok (else its failure as a Verdict)."""
        limit_s = limit_s if limit_s is not None else self.s.run_timeout_s
        try:
            raw, out_fd = wire.recv_raw(self.sock, timeout_s=limit_s)
        except wire.PeerTimeout as err:
            raise Verdict("timeout", f"the {self.phase} phase exceeded its limit of {limit_s:.3g} s") from err
        self.arrived = time.perf_counter()  # the answer is here; checking it is our time, not its
        if out_fd is not None and wire.Ran not in expect:
            os.close(out_fd)  # only a Ran carries bytes: a kept fd would pile up in this worker
            out_fd = None
        try:
            reply = wire.decode(raw, expect)
        except wire.ProtocolError:
            if out_fd is not None:
                os.close(out_fd)
            raise
        if reply.status != "ok":
            if out_fd is not None:
                os.close(out_fd)
            status = reply.status if reply.status in CANDIDATE_FAILURES else "runtime_error"
            raise Verdict(status, candidate_text(reply.error))
        return reply, out_fd

    def limit_for(self, calls: int) -> float:
        """The wait allowed for `calls` candidate calls: floor + factor x the reference's time."""
        ref_s = (self.ref_call_s or 0.0) * calls
        return self.s.run_timeout_s + self.s.run_timeout_factor * ref_s

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

    def stage(self, calls: list[list]) -> None:
        self.stage_encoded(*self.encode(calls))

    def carrier_for(self, calls: int) -> Carrier:
        """Host memfds, or on a GPU device memory once a batch moves DEVICE_MEMORY_BYTES or more
        either way (below that the memfd's smaller fixed cost wins, and it is what the
        reference's delivery is measured with)."""
        moved = max(self.in_bytes, self.out_bytes) * calls
        return self.carriers[self.dev.cuda and moved >= DEVICE_MEMORY_BYTES]

    def encode(self, calls: list[list]) -> tuple[int | None, list]:
        """The calls' inputs packed for the untrusted worker (our own copies may go after this)."""
        tensors = [[x for x in c if isinstance(x, self.torch.Tensor)] for c in calls]
        self.in_bytes = max(layout(t)[1] for t in tensors)
        self.in_count = max(1, max(len(t) for t in tensors))
        self.carrier = self.carrier_for(len(calls))
        return self.carrier.encode_calls(calls)

    def stage_encoded(self, fd: int | None, encoded: list) -> None:
        """Hand encoded calls to the untrusted worker (the fd is closed here)."""
        try:
            self.ask(wire.Stage(encoded, self.out_bytes * len(encoded), self.carrier.on_device), fd)
        finally:
            if fd is not None:
                os.close(fd)

    def go(self, calls: int, limit_s: float, **flags) -> tuple[wire.Ran, list[list], list[list], float]:
        """(Ran, its outputs, its reported inputs, wall ms from sending Go to having copies of
        the outputs here: device memory the candidate could still write is never believed)."""
        start, since = time.perf_counter(), time.monotonic()
        self.went = True
        ran, fd = self.ask(wire.Go(**flags), None, limit_s, expect=(wire.Ran,))
        self.spans.append((since, time.monotonic()))
        if len(ran.outputs) != calls:
            if fd is not None:
                os.close(fd)
            raise Verdict("incorrect", f"{calls} calls were run but {len(ran.outputs)} outputs came back")
        outs, ins = self.outputs_of(ran, fd)
        wall_ms = (time.perf_counter() - start) * 1e3
        self.carrier.unmap()
        return ran, outs, ins, wall_ms

    def outputs_of(self, ran: wire.Ran, fd: int | None) -> tuple[list[list], list[list]]:
        """Copies here of the candidate's outputs (and reported inputs) from what came with `ran`."""
        specs = [s for call in ran.outputs for s in call] + [s for call in ran.inputs_after for s in call]
        # In all at most 8x the bytes of the reference's outputs (a wider dtype is the verdict's
        # business, an incorrect one) plus the staged inputs, in at most as many tensors as the
        # reference's outputs and the inputs have: a candidate cannot make this process allocate
        # what it likes.
        calls = len(ran.outputs)
        allowed = (8 * max(self.out_bytes, 1) + self.in_bytes) * calls + ALIGN * (len(specs) + 1)
        most = (self.out_count + self.in_count) * calls
        try:
            if len(specs) > most:
                raise wire.ProtocolError(f"{len(specs)} tensors came back for {calls} calls; at most {most}")
            total = sum(tensor_bytes(self.torch, spec) for spec in specs)
            if total > allowed:
                raise wire.ProtocolError(f"{total} bytes of tensors came back; at most {allowed}")
        except wire.ProtocolError:
            if fd is not None:
                os.close(fd)
            raise
        tensors = iter(self.carrier.unpack(fd, specs, allowed))
        outs = [[next(tensors) for _ in call] for call in ran.outputs]
        ins = [[next(tensors) for _ in call] for call in ran.inputs_after]
        return outs, ins

    def size_outputs(self, ref_out) -> None:
        """Bytes and tensor count of one reference call's outputs: what an answer may hold."""
        flat = [o for o in flatten(ref_out) if isinstance(o, self.torch.Tensor)]
        self.out_bytes, self.out_count = layout(flat)[1], len(flat)

    def settle(self) -> None:
        """Wait until the untrusted worker has done what it does after answering (unmapping,
        giving device memory back), so none of it overlaps the reference that runs next: an
        empty Stage, which it answers only after that."""
        self.ask(wire.Stage([], 0))

    def release(self) -> None:
        """Give freed device memory back to the driver (the other process may need it)."""
        if self.dev.cuda:
            self.torch.cuda.empty_cache()

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

    def calls_per_batch(self) -> int:
        s = self.s
        by_time = math.ceil(s.batch_target_ms / 1e3 / max(self.ref_call_s, 1e-7))
        by_memory = int(s.batch_memory_bytes // max(self.result["io_bytes"], 1.0))
        return max(1, min(by_time, by_memory, MAX_CALLS_PER_BATCH))

    def timing(self) -> None:
        torch, s = self.torch, self.s
        self.phase = "timing"
        k = self.calls_per_batch()
        mapping_ms = self.carrier_for(k).mapping_ms(self.out_bytes * k)  # outputs sized by correctness
        ref_ms, new_ms, walls, refused, confirmed = [], [], [], [], []
        batch = -1
        while len(new_ms) < s.timing_batches and len(refused) <= REFUSALS_PER_BATCH * s.timing_batches:
            batch += 1  # batch 0 warms both up and is not used
            seeds = [secrets.randbits(63) for _ in range(k)]
            calls = [self.inputs(seed) for seed in seeds]
            # A huge task: the candidate first, then the reference on the same inputs drawn again
            # (one set of outputs held at a time); otherwise a random order per batch.
            big = self.result["io_bytes"] > BIG_IO_BYTES
            candidate_first = big or secrets.randbelow(2) == 1
            # The candidate gets its inputs just before its Go, never while the reference runs.
            if candidate_first:
                encoded = self.encode(calls)
                if big:
                    prints = [fingerprint(torch, c) for c in calls]
                    del calls
                self.stage_encoded(*encoded)
                ran, outs, _, wall_ms = self.go(k, self.limit_for(k), release=big)
                self.settle()  # the reference is timed next: nothing of the candidate's may overlap it
                if big:
                    calls = [self.inputs(seed) for seed in seeds]
                    check_redrawn(torch, calls, prints)
            ref_outs, r_ms, r_wall_ms = self.reference_batch(calls)
            if not candidate_first:
                self.stage_encoded(*self.encode(calls))  # no fd is held while the reference runs
                del calls
                ran, outs, _, wall_ms = self.go(k, self.limit_for(k))
            else:
                del calls
            for i, (ref_out, out) in enumerate(zip(ref_outs, outs, strict=True)):
                check_correct(torch, ref_out, out, s, f"timed call {i} of batch {batch}")
            del outs, ref_outs
            claimed = ran.compute_ms
            bound_ms = wall_bound_ms(wall_ms, r_ms, r_wall_ms, mapping_ms)
            if os.environ.get("WARPK_DEBUG_TIMING"):
                print(f"batch {batch} k={k} ref {r_ms:.3f}/{r_wall_ms:.3f} cand {claimed}/{wall_ms:.3f} "
                      f"mapping {mapping_ms:.3f} bound {bound_ms:.3f}", file=sys.stderr, flush=True)
            if not batch:
                continue
            if claimed is None or not math.isfinite(claimed) or claimed <= 0 or claimed < bound_ms:
                refused.append(f"{claimed!r} ms reported, >= {bound_ms:.4g} ms by the trusted clock")
                continue
            ref_ms.append(r_ms / k)
            new_ms.append(max(min(claimed, wall_ms), bound_ms, 1e-6) / k)  # never below what the clock saw
            walls.append(wall_ms)
            confirmed.append(min(max(bound_ms / max(claimed, 1e-9), 0.0), 1.0))
        if len(refused) > REFUSALS_PER_BATCH * s.timing_batches:
            raise Verdict(
                "implausible",
                f"in {len(refused)} of {len(refused) + len(new_ms)} timed batches of {k} calls the "
                "candidate's own clock reported less time than the trusted wall clock (go to outputs, "
                f"less delivery) allows, e.g. {refused[0]}",
            )
        self.result.update(calls_per_batch=k, batches=len(new_ms), wall_ms=statistics.median(walls),
                           clock_confirmed=statistics.median(confirmed))
        self.confirmed_call_ms = statistics.median(c * n for c, n in zip(confirmed, new_ms, strict=True))
        self.result.update(speed_summary(ref_ms, new_ms))

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

    def reference_energy(self) -> None:
        """evaluate.energy=nvml on a GPU: the reference's energy per call, from this lane's store
        or measured now, before the candidate is loaded (energy.REF_ENERGY_MAX_AGE_S)."""
        spec = self.request.energy
        if spec is None or not self.dev.cuda:
            return
        key = (hashlib.sha256(self.request.task_source.encode()).hexdigest(), self.request.shape,
               spec.min_window_s)
        self.ref_energy = self.energies.fresh(key)
        if self.ref_energy is not None:
            return
        start = time.perf_counter()
        try:
            fields = self._measure_reference(spec)
        except Exception as err:  # noqa: BLE001 - NVML or the meter: the record says why, no energy
            if "CUDA error" in str(err):
                raise
            self.ref_energy_error = (f"{self.meter_name} energy measurement of the reference failed: "
                                     f"{one_line(err)}")
            return
        finally:
            self.release()  # its model and inputs are gone: the candidate's worker gets the memory
        self.ref_energy = self.energies.store(key, fields)
        self.result["energy_s"] = time.perf_counter() - start

    def _measure_reference(self, spec: wire.EnergySpec) -> dict:
        """The reference alone on the NVML counter: a model of its own over 3 fresh input sets."""
        from warpk.evaluator.energy import measure_one, open_meter

        torch = self.torch
        with torch.device(self.dev.device):
            torch.manual_seed(secrets.randbits(31))
            reference = self.task.Model(*self.task.get_init_inputs()).to(self.dev.device).eval()
        sets = [self.inputs(secrets.randbits(63)) for _ in range(ENERGY_INPUT_SETS)]
        turn = iter(range(1 << 62))
        props = torch.cuda.get_device_properties(self.dev.device)
        with torch.no_grad(), open_meter(props, spec) as meter:
            return measure_one(meter, lambda: reference(*sets[next(turn) % len(sets)]), self.dev.sync,
                               spec.repeats, spec.idle_window_s, spec.rel_uncertainty, prefix="ref_")

    def energy(self) -> None:
        """evaluate.energy=nvml on a GPU: the candidate measured on the NVML counter, read here
        while its calls run over there (warpk.evaluator.energy), beside the reference's energy
        from `reference_energy`."""
        spec = self.request.energy
        if spec is None or not self.dev.cuda:
            return
        if self.ref_energy is None:
            self.result["energy_error"] = self.ref_energy_error or "the reference's energy was not measured"
            return
        from warpk.evaluator.energy import ENERGY_WALL_SHARE, RemoteLoop, measure_one, open_meter

        torch, s = self.torch, self.s
        self.phase = "energy"
        start = time.perf_counter()
        sets = [self.inputs(secrets.randbits(63)) for _ in range(ENERGY_INPUT_SETS)]
        ref_outs = [self.reference(*args) for args in sets]
        self.stage(sets)
        del sets

        def check(ran: wire.Ran, fd: int | None, calls: int, wall_s: float) -> None:
            if len(ran.outputs) != 1:
                if fd is not None:
                    os.close(fd)
                raise Verdict("incorrect", f"an energy batch sent {len(ran.outputs)} outputs back, not 1")
            (out,), _ = self.outputs_of(ran, fd)
            expected = ref_outs[(calls - 1) % len(ref_outs)]
            check_correct(torch, expected, out, s, "the last call of an energy batch")
            floor_ms = ENERGY_WALL_SHARE * calls * self.confirmed_call_ms
            if wall_s * 1e3 < floor_ms:
                raise Verdict("implausible", f"an energy batch of {calls} calls took {wall_s * 1e3:.3g} ms, "
                              f"less than the {floor_ms:.3g} ms its calls took while timed: work was skipped")

        remote = RemoteLoop(lambda n: wire.send(self.sock, wire.Go(repeat=n)),
                            lambda n: self.answer(self.limit_for(n), (wire.Ran,)), check)

        def sync() -> None:
            self.dev.sync()
            remote.sync()

        try:
            props = torch.cuda.get_device_properties(self.dev.device)
            since = time.monotonic()
            with open_meter(props, spec) as meter:
                fields = measure_one(meter, remote, sync, spec.repeats, 0.0, spec.rel_uncertainty)
            self.spans.append((since, time.monotonic()))
        except (Verdict, wire.ProtocolError):
            raise
        except Exception as err:  # noqa: BLE001 - NVML or the meter: the record says why, no energy
            if "CUDA error" in str(err):
                raise
            remote.sync()  # a batch may still be in flight: its answer must not meet the next step
            self.result["energy_error"] = f"{self.meter_name} energy measurement failed: {one_line(err)}"
            return
        self.ref_energy.uses += 1
        spent_s = (self.result.get("energy_s") or 0.0) + time.perf_counter() - start
        self.result.update(fields, **self.ref_energy.fields, ref_energy_id=self.ref_energy.ident,
                           energy_s=spent_s)

    @property
    def meter_name(self) -> str:
        return "sampler" if self.request.energy and self.request.energy.sampler_addr else "nvml"

    @contextlib.contextmanager
    def lane_telemetry(self):
        """evaluate.energy=sampler on a GPU: the daemon's stream of this lane's power, clocks,
        temperature and throttling while the block runs (the candidate's timing and energy),
        summarised over the candidate's own batches and windows (`spans`, not the reference's)
        into the lane_* fields; lane_error when there is none."""
        spec = self.request.energy
        recorder = None
        if spec is not None and spec.sampler_addr and self.dev.cuda:
            recorder = self.start_recorder(spec.sampler_addr)
        self.spans = []
        try:
            yield
        finally:
            if recorder is not None:
                recorder.stop()
                self.result.update(lane_fields(recorder.samples, self.spans))
                if recorder.error is not None:
                    self.result["lane_error"] = f"the sampler's stream broke: {one_line(recorder.error)}"

    def start_recorder(self, addr: str):
        """A started LaneRecorder on this lane's GPU, or None with lane_error saying why."""
        from warpk.evaluator.energy import nvml_index_of
        from warpk.telemetry.lane import LaneRecorder

        try:
            index = nvml_index_of(self.torch.cuda.get_device_properties(self.dev.device))
            return LaneRecorder(addr, index).start()
        except Exception as err:  # noqa: BLE001 - no daemon, no NVML: the record says why
            self.result["lane_error"] = f"no lane telemetry from the sampler: {one_line(err)}"
            return None

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


HARNESS_PREFIXES = ("evaluation failed", "the candidate's worker", "in ", "batch ", "an energy batch")
CANDIDATE_FAILURES = ("compile_error", "runtime_error", "crashed", "incorrect", "static_reject")


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
