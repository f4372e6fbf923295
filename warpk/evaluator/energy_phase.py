"""The trusted worker's energy phases (evaluate.energy=nvml|sampler, GPU only), as functions of
what they need that return frozen results: the reference's energy per call (`reference_energy`:
from this lane's store, or measured before the candidate is loaded), the candidate's on the
meter read here while its calls run over there (`candidate_energy`, warpk.evaluator.energy), and
the sampler daemon's lane telemetry over the candidate's own batches and windows
(`LaneTelemetry`). A meter failure is the record's energy_error (lane_error), never a modelled
stand-in. session.Session calls them and assembles the record from their results.

Non-goals: no meters (warpk.evaluator.energy), no protocol order (session.Session.run).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from warpk.evaluator import protocol as wire
from warpk.evaluator.checks import Verdict
from warpk.evaluator.energy import (
    ENERGY_WALL_SHARE,
    ReferenceEnergies,
    ReferenceEnergy,
    RemoteLoop,
    measure_one,
)
from warpk.evaluator.link import one_line
from warpk.evaluator.roofline import floor_ms
from warpk.telemetry.lane import lane_fields

ENERGY_INPUT_SETS = 3  # fresh input sets an energy loop cycles through


@dataclass(frozen=True)
class ReferenceResult:
    """The reference's energy for this candidate: from the store or measured now (spent_s)."""

    energy: ReferenceEnergy | None
    error: str | None = None
    spent_s: float | None = None  # None: taken from the store, nothing measured


@dataclass(frozen=True)
class EnergyResult:
    """What the energy phases add to the record: measured fields, or why there are none."""

    fields: tuple[tuple[str, object], ...] = ()
    error: str | None = None
    spent_s: float | None = None
    span: tuple[float, float] | None = None  # host-monotonic, the candidate's windows

    def record(self) -> dict:
        out = dict(self.fields)
        if self.error is not None:
            out["energy_error"] = self.error
        if self.spent_s is not None:
            out["energy_s"] = self.spent_s
        return out


def meter_name(spec: wire.EnergySpec) -> str:
    return "sampler" if spec.sampler_addr else "nvml"


def open_device_meter(torch, dev, spec: wire.EnergySpec):
    """The meter `spec` asks for on the device `dev` (energy.open_meter)."""
    from warpk.evaluator.energy import open_meter

    return open_meter(torch.cuda.get_device_properties(dev.device), spec)


def measure_reference_alone(torch, dev, task, draw: Callable[[int], list], spec: wire.EnergySpec) -> dict:
    """The task's reference alone on the meter: a model of its own over ENERGY_INPUT_SETS fresh
    input sets (`draw(seed)`), the ref_ fields and idle_power_w (energy.measure_one)."""
    with torch.device(dev.device):
        torch.manual_seed(secrets.randbits(31))
        model = task.Model(*task.get_init_inputs()).to(dev.device).eval()
    sets = [draw(secrets.randbits(63)) for _ in range(ENERGY_INPUT_SETS)]
    turn = iter(range(1 << 62))
    with torch.no_grad(), open_device_meter(torch, dev, spec) as meter:
        return measure_one(meter, lambda: model(*sets[next(turn) % len(sets)]), dev.sync,
                           spec.repeats, spec.idle_window_s, spec.rel_uncertainty, prefix="ref_")


def start_lane_recorder(torch, dev, addr: str):
    """A started LaneRecorder of the sampler daemon at `addr` on this lane's GPU."""
    from warpk.evaluator.energy import nvml_index_of
    from warpk.telemetry.lane import LaneRecorder

    return LaneRecorder(addr, nvml_index_of(torch.cuda.get_device_properties(dev.device))).start()


def _failed(err: Exception, what: str) -> str:
    """The record's reason for a meter failure; a device fault is not one (it propagates)."""
    if "CUDA error" in str(err):
        raise err
    return f"{what} failed: {one_line(err)}"


def reference_energy(store: ReferenceEnergies, key: tuple, measure: Callable[[], dict],
                     meter_name: str, clock: Callable[[], float] = time.perf_counter) -> ReferenceResult:
    """The reference's energy per call from this lane's store, or `measure()` now (before the
    candidate is loaded; energy.REF_ENERGY_MAX_AGE_S). A meter failure is a reason, not energy."""
    fresh = store.fresh(key)
    if fresh is not None:
        return ReferenceResult(fresh)
    start = clock()
    try:
        fields = measure()
    except Exception as err:  # noqa: BLE001 - NVML or the meter: the record says why, no energy
        return ReferenceResult(None, _failed(err, f"{meter_name} energy measurement of the reference"))
    return ReferenceResult(store.store(key, fields), None, clock() - start)


def confirmed_call_ms(ref_ms, new_ms, ref_call_ms: float, physical_ms: float = 0.0) -> float:
    """A lower bound on the candidate's own time per call (the floor of its energy batches):
    its fastest timed batch per call less what the reference's fastest round trip adds to the
    reference's own call (`ref_call_ms`, `reference_call_ms`), never above its fastest batch,
    never below `physical_ms` (`physical_floor_ms`).

    The delivery both sides pay can be several times the compute (a 256 MiB softmax: ~2.6 ms of
    round trip for ~0.4 ms of work on the H100), so the difference of the medians wandered by
    more than the compute itself and an honest copy's energy batches fell under a quarter of it
    (H100, 2026-12-05, 3 timed batches). Fastest against fastest: a candidate can slow reference
    batches (kernels it left queued run on while it is frozen) but cannot make the reference's
    fastest batch faster, nor its own faster than it is; pairing the batches let one slowed
    reference batch take the floor to 0 (red team round 22). What it still can do: slow every
    reference batch, or deliver faster than the reference's harness does in its own process
    (round 23); either lowers the estimate, never under the physical floor."""
    fastest_new = min(new_ms)
    estimate = min(fastest_new - min(ref_ms) + ref_call_ms, fastest_new)
    return max(0.0, physical_ms, estimate)


def reference_call_ms(run_reference: Callable, draw: Callable[[int], list], sync: Callable[[], object],
                      calls: int = 3) -> float:
    """The reference's own call, timed in the trusted worker on one fresh input set, the fastest of
    `calls`; the caller holds the compile pool frozen and the candidate is still, so nothing on
    the machine can make it look slower (red team round 23: timed during correctness, a build's
    load raised it, and with it an honest candidate's floor, to `implausible`)."""
    inputs = draw(secrets.randbits(63))
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        run_reference(inputs)
        sync()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def physical_floor_ms(work, spec: wire.EnergySpec) -> float:
    """The roofline floor of one call (warpk.evaluator.roofline, the profile's best peaks from the
    spec): the least any energy batch's call can take whatever the timed batches showed; 0 where
    the spec carries no peaks. A candidate cannot move it (the reference's FLOPs and bytes)."""
    if work is None or spec.peak_tflops <= 0 or spec.mem_bandwidth_gb_s <= 0:
        return 0.0
    return floor_ms(work.flops, work.min_bytes, spec.peak_tflops, spec.mem_bandwidth_gb_s)


class Remote(Protocol):
    """What the candidate's energy needs of its worker (warpk.evaluator.link.Link; a fake in tests)."""

    def encode(self, calls: list[list]) -> tuple[int | None, list]: ...
    def prepare(self, calls: int) -> None: ...
    def send(self, message, fd: int | None) -> None: ...
    def answer(self, limit_s: float, expect: tuple) -> tuple: ...
    def outputs_of(self, ran: wire.Ran, fd: int | None) -> tuple[list[list], list[list]]: ...
    def limit_for(self, calls: int) -> float: ...


@dataclass(frozen=True)
class CandidateEnergy:
    """What the candidate's energy phase is given.

    Attributes:
        draw: one call's inputs from a seed (Session.inputs).
        reference: the task's Model here, for the outputs each batch's last call is checked with.
        verify: verify(expected, got, where) raises Verdict on a mismatch.
        call_ms: the candidate's time per call as the trusted clock confirmed it while timed
            (`confirmed_call_ms`); each energy batch must take ENERGY_WALL_SHARE of that per call.
        open_meter: a context manager of the meter (energy.open_meter on the device).
        sync: the device's synchronize.
        repeats, rel_uncertainty: the windows' cap and target (warpk.evaluator.energy.measure_one).
        meter_name: nvml | sampler, for the reasons.
    """

    draw: Callable[[int], list]
    reference: Callable
    verify: Callable[[object, object, str], object]
    call_ms: float
    open_meter: Callable[[], contextlib.AbstractContextManager]
    sync: Callable[[], object]
    repeats: int
    rel_uncertainty: float
    meter_name: str


def candidate_energy(remote: Remote, ref: ReferenceResult, given: CandidateEnergy,
                     clock: Callable[[], float] = time.perf_counter,
                     host_clock: Callable[[], float] = time.monotonic) -> EnergyResult:
    """The candidate's energy per call on the meter read here while its batches run over there
    (Go(repeat=n) over ENERGY_INPUT_SETS staged input sets), beside the reference's. Every batch
    echoes its nonce, sends back its last call's output (checked) and lasts its calls' share of
    the timed time (else `implausible`); a meter failure is the record's energy_error."""
    if ref.energy is None:
        return EnergyResult(error=ref.error or "the reference's energy was not measured", spent_s=ref.spent_s)
    start = clock()
    sets = [given.draw(secrets.randbits(63)) for _ in range(ENERGY_INPUT_SETS)]
    ref_outs = [given.reference(*args) for args in sets]
    sets_fd, encoded = remote.encode(sets)  # one sealed copy, sent with every energy batch
    del sets
    nonces: list[str] = []

    def send(n: int) -> None:
        nonces.append(secrets.token_hex(8))
        remote.send(wire.Go(encoded, nonces[-1], repeat=n), sets_fd)

    def check(ran: wire.Ran, fd: int | None, calls: int, wall_s: float) -> None:
        nonce = nonces.pop(0)
        if ran.nonce != nonce or len(ran.outputs) != 1:
            if fd is not None:
                os.close(fd)
            if ran.nonce != nonce:
                raise wire.ProtocolError("an energy batch's answer does not echo its Go's nonce")
            raise Verdict("incorrect", f"an energy batch sent {len(ran.outputs)} outputs back, not 1")
        (out,), _ = remote.outputs_of(ran, fd)
        given.verify(ref_outs[(calls - 1) % len(ref_outs)], out, "the last call of an energy batch")
        floor_ms = ENERGY_WALL_SHARE * calls * given.call_ms
        if wall_s * 1e3 < floor_ms:
            raise Verdict("implausible", f"an energy batch of {calls} calls took {wall_s * 1e3:.3g} ms, "
                          f"less than the {floor_ms:.3g} ms its calls took while timed: work was skipped")

    loop = RemoteLoop(send, lambda n: remote.answer(remote.limit_for(n), (wire.Ran,)), check)
    loop.clock = clock

    def sync() -> None:
        given.sync()
        loop.sync()

    try:
        remote.prepare(0)
        since = host_clock()
        try:
            with given.open_meter() as meter:
                fields = measure_one(meter, loop, sync, given.repeats, 0.0, given.rel_uncertainty)
        except (Verdict, wire.ProtocolError):
            raise
        except Exception as err:  # noqa: BLE001 - NVML or the meter: the record says why, no energy
            reason = _failed(err, f"{given.meter_name} energy measurement")
            loop.sync()  # a batch may still be in flight: its answer must not meet the next step
            return EnergyResult(error=reason, spent_s=(ref.spent_s or 0.0) + clock() - start)
        span = (since, host_clock())
    finally:
        if sets_fd is not None:
            os.close(sets_fd)
    ref.energy.uses += 1
    measured = {**fields, **ref.energy.fields, "ref_energy_id": ref.energy.ident}
    return EnergyResult(tuple(measured.items()), None, (ref.spent_s or 0.0) + clock() - start, span)


class LaneTelemetry:
    """evaluate.energy=sampler on a GPU: the daemon's stream of this lane's power, clocks,
    temperature and throttling while the block runs (the candidate's timing and energy),
    summarised over the candidate's own batches and windows (`fields(spans)`, not the
    reference's) into the lane_* fields; lane_error when there is none.

    Args:
        start: starts and returns a LaneRecorder (warpk.telemetry.lane), or None: no telemetry.
    """

    def __init__(self, start: Callable[[], object] | None):
        self.start, self.recorder, self.error = start, None, None

    def __enter__(self) -> LaneTelemetry:
        if self.start is not None:
            try:
                self.recorder = self.start()
            except Exception as err:  # noqa: BLE001 - no daemon, no NVML: the record says why
                self.error = f"no lane telemetry from the sampler: {one_line(err)}"
        return self

    def __exit__(self, *exc) -> None:
        if self.recorder is not None:
            self.recorder.stop()
            if self.recorder.error is not None:
                self.error = f"the sampler's stream broke: {one_line(self.recorder.error)}"

    def fields(self, spans: list[tuple[float, float]]) -> dict:
        out = lane_fields(self.recorder.samples, spans) if self.recorder is not None else {}
        return {**out, "lane_error": self.error} if self.error is not None else out
