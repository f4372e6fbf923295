"""The trusted worker's energy phases (evaluate.energy=nvml|sampler, GPU only), a part of
session.Session: the reference's energy per call (from this lane's store, or measured before the
candidate is loaded), the candidate's on the NVML counter read here while its calls run over
there (warpk.evaluator.energy), and the sampler daemon's lane telemetry over the candidate's own
batches and windows. A meter failure is the record's energy_error (lane_error), never a
modelled stand-in.

Non-goals: no meters (warpk.evaluator.energy), no protocol order (session.Session.run).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import time

from warpk.evaluator import protocol as wire
from warpk.evaluator.checks import Verdict, check_correct
from warpk.evaluator.link import one_line
from warpk.telemetry.lane import lane_fields

ENERGY_INPUT_SETS = 3  # fresh input sets an energy loop cycles through


class EnergyPhases:
    """Session's energy phases; they use its link (stage, answer, outputs_of), its reference
    (task, inputs) and its timing (confirmed_call_ms)."""

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
        sets_fd, encoded = self.encode(sets)  # one sealed copy, sent with every energy batch
        del sets
        self.prepare(0)
        nonces: list[str] = []

        def send(n: int) -> None:
            nonces.append(secrets.token_hex(8))
            self.check_quiet()
            wire.send(self.sock, wire.Go(encoded, nonces[-1], repeat=n), sets_fd)

        def check(ran: wire.Ran, fd: int | None, calls: int, wall_s: float) -> None:
            if ran.nonce != nonces.pop(0):
                if fd is not None:
                    os.close(fd)
                raise wire.ProtocolError("an energy batch's answer does not echo its Go's nonce")
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

        remote = RemoteLoop(send, lambda n: self.answer(self.limit_for(n), (wire.Ran,)), check)

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
        finally:
            if sets_fd is not None:
                os.close(sets_fd)
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
