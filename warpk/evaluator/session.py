"""One candidate's measurement in the trusted worker (warpk.evaluator.trusted runs it): the
protocol's steps in order (`Session.run`; the list is in trusted.py's docstring), the reference
here and in the reference worker, the candidate behind its socket.

Session lives in six modules, read in this order: this one (the protocol's order, the reference,
correctness), `before` (the reference probed and timed alone before any candidate code runs),
`link` (messages and tensors to and from a worker, the bounds on both), `timing_phase` (the timed
batches, a function of two sides), `energy_phase` (functions of what they need) and `steps` (each
step's frozen result and the record assembled from them).

Non-goals: no verdict mapping of exceptions (trusted.measure), no sandboxing, no records.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
import socket
import statistics
import time
import types

from warpk.evaluator import before
from warpk.evaluator import energy_phase as ep
from warpk.evaluator import protocol as wire
from warpk.evaluator import timing_phase as tp
from warpk.evaluator.checks import Verdict, check_correct, check_redrawn, fingerprint, same_inputs
from warpk.evaluator.devices import Device
from warpk.evaluator.energy import ReferenceEnergies
from warpk.evaluator.errors import HarnessError
from warpk.evaluator.freeze import Freezer, NoFreeze, still_or_gone
from warpk.evaluator.hostmem import check_host_memory
from warpk.evaluator.link import BIG_IO_BYTES, Link, one_line
from warpk.evaluator.pool_gate import PoolGate
from warpk.evaluator.profile import Stopwatch
from warpk.evaluator.reference import GuardedSide, ReferenceWorkers, out_of_memory, reference_failures
from warpk.evaluator.remote import check_readable, check_takeable, open_pidfd, wait_worker_pid
from warpk.evaluator.steps import Correctness, Steps, work_of
from warpk.evaluator.transport import layout


def _load_task(source: str) -> types.ModuleType:
    module = types.ModuleType("warpk_task")
    module.__file__ = "task.py"
    exec(compile(source, "task.py", "exec"), module.__dict__)  # noqa: S102 - the task is trusted
    return module


class Session(Link):
    """One candidate's measurement: the reference here and in the reference worker, the
    candidate behind `sock` (Link), in the protocol's order (`run`). Each step returns a frozen
    result, kept in `found` (steps.Steps), which makes the record (also after a failure)."""

    def __init__(self, torch, dev: Device, request: wire.MeasureRequest, sock: socket.socket,
                 energies: ReferenceEnergies | None = None, references: ReferenceWorkers | None = None):
        super().__init__(torch, dev, request.settings, sock)
        self.request = request
        self.energies = energies if energies is not None else ReferenceEnergies()
        self.references = references if references is not None else ReferenceWorkers()
        try:
            self.task = _load_task(request.task_source)
        except Exception as err:  # noqa: BLE001 - the task file is ours to get right
            raise HarnessError(f"the task's source does not load: {one_line(err)}") from err
        self.constants = {
            k: getattr(self.task, k) for o in request.shapes.values() for k in o if hasattr(self.task, k)
        }
        self.pool = PoolGate.from_env()  # the run's compile pool, frozen while this lane times
        self.found = Steps(dev.name)  # each step's result (steps.py), the record made from them
        self.ref_link: Link | None = None
        self.baseline: tp.Baseline | None = None  # the reference alone, before the candidate ran
        self.freezer: Freezer | None = None
        self.watch = Stopwatch("trusted")  # WARPK_PROFILE only (benchmarks/profile_evaluator.py)
        # the lane's next worker, importing torch meanwhile: still while anything is timed
        self.spare = Freezer(request.spare_pid) if request.spare_pid else NoFreeze()

    # --- the reference side ------------------------------------------------------------------------
    def apply_shape(self, shape: str) -> None:
        for key, value in self.constants.items():
            setattr(self.task, key, value)
        for key, value in self.request.shapes.get(shape, {}).items():
            setattr(self.task, key, value)

    def check_host_memory(self) -> None:
        if not self.dev.cuda:
            check_host_memory(self.torch, self.task)

    def inputs(self, seed: int) -> list:
        torch = self.torch
        if self.dev.cuda:
            torch.manual_seed(seed)
        else:  # the CPU generator alone: manual_seed also queues a CUDA seeding, with a stack trace
            torch.default_generator.manual_seed(seed)
        with torch.device(self.dev.device):
            values = self.task.get_inputs()
        # a lazy conjugate or negative view resolved: its raw bytes, which the workers get, are
        # not its values (the reference here would see the values, the workers the bytes)
        return [x.to(self.dev.device).resolve_conj().resolve_neg() if isinstance(x, torch.Tensor) else x
                for x in values]

    def build(self, with_reference_worker: bool = False, phase: str = "build") -> None:
        """Model here (and in the reference worker) and ModelNew over there from one fresh seed."""
        self.phase = phase
        seed = secrets.randbits(31)
        init_args = list(self.task.get_init_inputs())
        self.reference = self.make_reference(seed, init_args)
        if with_reference_worker:
            self.build_reference_worker(seed, init_args)
        fd, (encoded,) = self.carriers[False].encode_calls([init_args])
        try:
            limit_s = self.limit_for(1) + self.s.run_timeout_s + self.request.first_call_timeout_s
            self.ask(wire.Build(seed, encoded), fd, limit_s)
        finally:
            if fd is not None:
                os.close(fd)

    def build_reference_worker(self, seed: int, init_args: list) -> None:
        fd, (encoded,) = self.carriers[False].encode_calls([init_args])
        try:
            with self.reference_side("build"):
                self.ref_link.ask(wire.Build(seed, encoded), fd, self.s.compile_timeout_s)
        finally:
            if fd is not None:
                os.close(fd)

    def make_reference(self, seed: int, init_args: list):
        """The task's Model under `seed`, here; its own failure is the harness's."""
        torch = self.torch
        try:
            with torch.device(self.dev.device):
                torch.manual_seed(seed)
                return self.task.Model(*init_args).to(self.dev.device).eval()
        except (MemoryError, torch.cuda.OutOfMemoryError):
            raise
        except Exception as err:  # noqa: BLE001 - the task's Model: ours
            self.candidate_starved(err)
            raise HarnessError(f"the task's Model(...) cannot be built: {one_line(err)}") from err

    def candidate_starved(self, err: Exception) -> None:
        """Once the candidate (which shares the device) has run, the reference running out of
        device memory, however the library says it, is the candidate's verdict, not ours."""
        if self.went and out_of_memory(str(err)):
            raise Verdict("runtime_error", f"out of memory on the reference's side after the candidate "
                          f"ran: {one_line(err)}"[:500]) from err

    def run_reference(self, inputs: list):
        """The reference's outputs here (correctness); its own failure is the harness's."""
        try:
            return self.reference(*inputs)
        except (MemoryError, self.torch.cuda.OutOfMemoryError):
            raise
        except Exception as err:  # noqa: BLE001 - the task's forward: ours
            self.candidate_starved(err)
            raise HarnessError(f"the task's reference raised {one_line(err)}") from err

    def reference_side(self, what: str):
        """Failures of the reference worker are the harness's (reference.reference_failures)."""
        return reference_failures(self.references, self.went, what)

    # --- the protocol ------------------------------------------------------------------------------
    def correctness(self) -> Correctness:
        """The correctness trials; the last trial's seed is kept (its inputs are redrawn later)."""
        torch, s = self.torch, self.s
        self.phase = "correctness"
        worst_abs = worst_rel = 0.0
        ref_times, seed = [], 0

        def reference(inputs: list):
            start = time.perf_counter()
            out = self.run_reference(inputs)
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
            prints = [fingerprint(torch, inputs)]
            calls = [inputs] * repeats
            del inputs  # the candidate's copy is packed; ours is drawn again from the seed if needed
            limit = self.limit_for(repeats) + (self.request.first_call_timeout_s if trial == 0 else 0.0)
            # on a GPU the worker works on a device copy: it reports its inputs (an honest-bug
            # check); on the CPU it works on our memfd in place and the link checks it (link.py)
            _, outs, ins, _ = self.go(calls, limit, consume=big, return_inputs=not big and self.dev.cuda,
                                      poison=True, release=big)
            del calls
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
        return Correctness(seed, worst_abs, worst_rel)

    def verify(self, ref_out, out, where: str) -> None:
        check_correct(self.torch, ref_out, out, self.s, where)

    def timing(self, io_bytes: float) -> tp.Timing:
        """Both sides through the same round trip on this process's clock (timing_phase), K from
        the baseline where there is one; the candidate timed alone too where the reference was
        slower interleaved than in the baseline."""
        s, base = self.s, self.baseline
        self.phase = "timing"
        ref = self.ref_link
        ref.phase = "timing"
        ref.ref_call_s, ref.out_bytes, ref.out_count = self.ref_call_s, self.out_bytes, self.out_count
        k = base.k if base else tp.calls_per_batch(self.ref_call_s, io_bytes, s.batch_target_ms,
                                                  s.batch_memory_bytes)
        big = io_bytes > BIG_IO_BYTES
        self.clean_ref_ms = self.ref_call_s * 1e3  # the energy floor's (energy_phase.reference_call_ms)
        with self.pool.hold():  # no compile sandbox runs meanwhile (pool_gate)
            if self.request.energy is not None and self.dev.cuda and not big:
                self.clean_ref_ms = ep.reference_call_ms(self.run_reference, self.inputs, self.dev.sync)
            guarded = GuardedSide(ref, self.reference_side)
            timed = tp.time_batches(self, guarded, self.freezer, self.inputs, self.verify, k,
                                    s.timing_batches, big, self.torch)
            if base and tp.stale(timed, base.ms):
                self.references.alone.drop((self.request.task_source, self.request.shape))
            if big or not base or not tp.slowed(timed, base.ms):
                return timed
            # the outputs kept until the reference worker checks them: a quarter of a batch's memory
            new_alone, kept = tp.candidate_alone(self, self.inputs, k, len(base.ms), k * self.out_bytes,
                                                 s.batch_memory_bytes / 4)
            tp.check_alone(guarded, self.inputs, k, kept, self.verify)
            # diagnostic only (records: ref_alone_after_runtime_ms): the reference alone again,
            # the candidate frozen, so drift since the baseline shows; it decides nothing
            after = tp.reference_alone(guarded, self.inputs, k, len(base.ms))
            return dataclasses.replace(timed, new_alone_ms=new_alone, ref_alone_after_ms=after)

    def other_shapes(self) -> None:
        """On a GPU, one correctness trial at every other declared shape."""
        if not self.dev.cuda:
            return
        for name in self.request.shapes:
            if name == self.request.shape:
                continue
            # its own phase: a death after timing is never measured again (lane.RETRY_PHASES)
            self.phase = "other shapes"
            self.apply_shape(name)
            self.build(phase="other shapes")
            inputs = self.inputs(secrets.randbits(63))
            ref_out = self.run_reference(inputs)
            self.size_outputs(ref_out)
            calls = [inputs]
            del inputs
            _, (out,), _, _ = self.go(calls, self.limit_for(1) + self.s.run_timeout_s, consume=True)
            self.verify(ref_out, out, f"the {name} shape")

    def start_reference_worker(self) -> None:
        """The reference worker for this task (started now, or kept from its last candidate)."""
        worker = self.references.for_request(self.request)
        if worker.pid is None and self.request.candidate_pid:
            self.references.discard()
            raise HarnessError("the reference worker's sandbox never started the interpreter")
        self.ref_link = Link(self.torch, self.dev, self.s, worker.sock, worker.freezer, worker.pid,
                             worker.pidfd)
        if self.request.candidate_pid and not self.ref_link.remote:
            check_takeable(worker.pidfd)
        self.ref_link.phase = "load"
        self.ref_worker = worker

    # --- energy (evaluate.energy=nvml|sampler, GPU only; warpk.evaluator.energy_phase) ------------
    def reference_energy(self) -> ep.ReferenceResult | None:
        """The reference's energy per call from this lane's store, or measured now, before the
        candidate is loaded: a model of its own over fresh input sets, alone on the meter."""
        spec = self.request.energy
        if spec is None or not self.dev.cuda:
            return None
        key = (hashlib.sha256(self.request.task_source.encode()).hexdigest(), self.request.shape,
               spec.min_window_s)

        def measure() -> dict:
            try:
                return ep.measure_reference_alone(self.torch, self.dev, self.task, self.inputs, spec)
            finally:
                self.release()  # its model and inputs are gone: the candidate's worker gets the memory

        return ep.reference_energy(self.energies, key, measure, ep.meter_name(spec))

    def energy(self) -> ep.EnergyResult | None:
        """The candidate on the meter read here while its calls run over there, beside the
        reference's energy from `reference_energy`."""
        spec = self.request.energy
        if spec is None or not self.dev.cuda:
            return None
        self.phase = "energy"
        timed = self.found.timed
        floor_ms = ep.confirmed_call_ms(timed.ref_ms, timed.new_ms, self.clean_ref_ms,
                                        ep.physical_floor_ms(self.found.work, spec))
        given = ep.CandidateEnergy(
            draw=self.inputs, reference=self.reference, call_ms=floor_ms,
            verify=self.verify,
            open_meter=lambda: ep.open_device_meter(self.torch, self.dev, spec), sync=self.dev.sync,
            repeats=spec.repeats, rel_uncertainty=spec.rel_uncertainty, meter_name=ep.meter_name(spec))
        result = ep.candidate_energy(self, self.found.ref_energy or ep.ReferenceResult(None), given)
        if result.span is not None:
            self.spans.append(result.span)
        return result

    def lane_recorder(self):
        return ep.start_lane_recorder(self.torch, self.dev, self.request.energy.sampler_addr)

    def run(self) -> wire.Measurement:
        torch, s, lap = self.torch, self.s, self.watch.lap
        self.apply_shape(self.request.shape)
        self.check_host_memory()
        if self.request.energy is not None:  # before the candidate exists on this lane
            self.spare = still_or_gone(self.spare)
            self.found.ref_energy = self.reference_energy()
            self.spare.thaw()
        before.probe_reference(self)
        self.release()
        lap("reference probe")
        self.start_reference_worker()  # loads the task while the candidate loads
        lap("reference worker start")
        # The candidate's sandbox goes into a cgroup of its own while it is still our idle
        # harness, so everything it ever spawns is inside (warpk.evaluator.freeze).
        self.freezer = NoFreeze()
        if self.request.candidate_pid:
            self.pid = wait_worker_pid(self.request.candidate_pid)  # the sandbox is complete from here
            if self.pid is None:
                raise HarnessError("the candidate's sandbox never started the worker's interpreter")
            self.freezer = self.still = Freezer(self.request.candidate_pid)  # link.py: frozen from
            #                                                   each answer to our next message
            self.pidfd = open_pidfd(self.pid)  # closed by trusted.measure
            if self.remote:
                check_readable(self.pid)
            else:
                check_takeable(self.pidfd)
        lap("candidate interpreter and freezer")
        self.freezer.freeze()  # our idle harness, still while the reference is timed alone
        self.baseline = before.reference_baseline(self)
        lap("reference baseline")
        start = time.perf_counter()
        self.phase = "load"
        self.went = True  # its code runs from its import on: memory the device lacks is its doing
        self.ask(wire.Load(self.request.candidate_source, self.request.device, s.num_threads),
                 limit_s=s.compile_timeout_s)
        self.found.seconds["compile_s"] = time.perf_counter() - start
        lap("candidate load (its torch import too)")
        try:
            self.ref_worker.wait_loaded(s.compile_timeout_s)
        except RuntimeError as err:
            self.references.discard()
            raise HarnessError(str(err)) from err
        lap("reference load wait")
        start = time.perf_counter()
        with torch.no_grad():
            self.build(with_reference_worker=True)
            lap("build")
            self.found.correct = self.correctness()
            self.found.work = work_of(self.torch, self.reference, self.run_reference,
                                      self.inputs(self.found.correct.seed))
            self.found.seconds["correctness_s"] = time.perf_counter() - start
            lap("correctness")
            self.spare = still_or_gone(self.spare)  # thawed by trusted.measure after this candidate
            sampler = self.request.energy is not None and self.request.energy.sampler_addr and self.dev.cuda
            self.spans = []  # the candidate's batches and windows, for the lane's telemetry
            lane = ep.LaneTelemetry(self.lane_recorder if sampler else None)
            try:
                with lane:
                    start = time.perf_counter()
                    self.found.timed = self.timing(self.found.work.io_bytes)
                    self.found.seconds["timing_s"] = time.perf_counter() - start
                    lap("timing")
                    self.found.energy = self.energy()
                    lap("energy")
            finally:
                self.found.lane = lane.fields(self.spans)
            self.other_shapes()
            lap("other shapes")
            self.found.alone_ms = self.baseline.ms if self.baseline else ()
        return wire.Measurement(status="ok", **self.found.fields())
