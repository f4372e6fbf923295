"""The trusted worker's energy phases as functions (warpk.evaluator.energy_phase) against a
simulated GPU (fake NVML counter on a fake clock) and an in-process fake candidate worker: the
candidate's energy read here while its batches run there, each batch checked (nonce, one output,
its value, its share of the timed time), a meter failure a reason and never energy, the
reference's energy from the lane's store or measured, and the record assembled from the steps'
results (warpk.evaluator.steps) also when a step failed."""

from __future__ import annotations

import pytest
from fake_gpu import FakeGpu, fake_nvml

from warpk.evaluator import energy_phase as ep
from warpk.evaluator import protocol as wire
from warpk.evaluator.checks import Verdict
from warpk.evaluator.energy import ReferenceEnergies
from warpk.evaluator.steps import Correctness, Steps, Work
from warpk.evaluator.timing_phase import Timing
from warpk.telemetry import MeterError, MeterSettings, NvmlEnergyMeter

NEW_W, NEW_S = 450.0, 0.5e-3  # the simulated candidate: 0.5 ms per call at 450 W
FAST = dict(warmup_s=0.05, calibrate_s=0.02)
REF_FIELDS = {"ref_energy_j": 0.6, "ref_energy_uncertainty_j": 0.002, "ref_avg_power_w": 300.0,
              "ref_window_s": 1.2, "idle_power_w": 90.0}


class FakeWorker:
    """The candidate's worker as the energy phase sees it (Link's methods): Go(repeat=n) runs n
    calls on the simulated GPU when its answer is awaited; `lie` changes what it answers."""

    def __init__(self, gpu: FakeGpu, seconds_per_call: float = NEW_S, lie: str = ""):
        self.gpu, self.seconds, self.lie = gpu, seconds_per_call, lie
        self.gos: list[wire.Go] = []
        self.prepared = 0

    def encode(self, calls):
        return None, [["staged"] for _ in calls]

    def prepare(self, calls):
        self.prepared += 1

    def send(self, message, fd=None):
        self.gos.append(message)
        if self.lie == "prompt":  # honest, and done before the sender's thread runs again
            self.gpu.run(message.repeat * self.seconds, NEW_W)

    def answer(self, limit_s, expect):
        go = self.gos[-1]
        if self.lie != "prompt":
            self.gpu.run(go.repeat * self.seconds * (0.1 if self.lie == "skip" else 1.0), NEW_W)
        nonce = "0" * 16 if self.lie == "nonce" else go.nonce
        outputs = [["out"], ["out"]] if self.lie == "two" else [["out"]]
        return wire.Ran("ok", None, nonce, outputs), None

    def outputs_of(self, ran, fd):
        return [[7.0 if self.lie == "wrong" else 2.0]], []

    def limit_for(self, calls):
        return 10.0


def given_for(gpu: FakeGpu, open_meter=None, call_ms: float = NEW_S * 1e3) -> ep.CandidateEnergy:
    def meter():
        return NvmlEnergyMeter(0, MeterSettings(min_window_s=0.3, repeats=1, **FAST), nvml=fake_nvml([gpu]),
                               clock=gpu.clock, sleep=gpu.sleep)

    def verify(expected, got, where):
        if expected != got:
            raise Verdict("incorrect", f"{where}: {got} != {expected}")

    return ep.CandidateEnergy(draw=lambda seed: [1.0], reference=lambda x: [2.0 * x], verify=verify,
                              call_ms=call_ms, open_meter=open_meter or meter, sync=lambda: None,
                              repeats=3, rel_uncertainty=0.0, meter_name="nvml")


def stored_reference(spent_s: float | None = 0.5) -> ep.ReferenceResult:
    store = ReferenceEnergies()
    return ep.ReferenceResult(store.store(("task", "default", 1.0), REF_FIELDS), None, spent_s)


def run(worker: FakeWorker, gpu: FakeGpu, ref: ep.ReferenceResult | None = None, **given) -> ep.EnergyResult:
    return ep.candidate_energy(worker, ref or stored_reference(), given_for(gpu, **given),
                               clock=gpu.clock, host_clock=gpu.clock)


def test_the_candidates_energy_is_read_here_while_its_batches_run_there():
    gpu = FakeGpu(idle_w=100.0, phase_s=0.0411)
    worker, ref = FakeWorker(gpu), stored_reference()
    result = run(worker, gpu, ref)
    record = result.record()
    assert abs(record["energy_j"] - NEW_W * NEW_S) <= record["energy_uncertainty_j"]
    assert record["energy_j"] == pytest.approx(NEW_W * NEW_S, rel=5e-3)
    assert record["ref_energy_j"] == 0.6 and record["ref_energy_id"] == ref.energy.ident
    assert ref.energy.uses == 1 and result.error is None and "energy_error" not in record
    assert worker.prepared == 1 and all(go.repeat >= 1 for go in worker.gos)  # batches of calls
    assert len({go.nonce for go in worker.gos}) == len(worker.gos)  # a fresh nonce each
    assert record["energy_s"] == pytest.approx(0.5 + (result.span[1] - result.span[0]), abs=0.2)
    assert result.span[1] - result.span[0] >= 3 * 0.3  # three windows of the meter


@pytest.mark.parametrize("lie, raised, match", [
    ("nonce", wire.ProtocolError, "does not echo"),
    ("two", Verdict, "2 outputs back"),
    ("wrong", Verdict, "last call of an energy batch"),
    ("skip", Verdict, "work was skipped"),
])
def test_a_batch_that_lies_is_the_candidates_verdict_not_energy(lie, raised, match):
    gpu = FakeGpu()
    with pytest.raises(raised, match=match):
        run(FakeWorker(gpu, lie=lie), gpu)


def test_a_batch_done_before_the_send_returned_counts_its_whole_time():
    """The worker starts when the Go arrives; this thread may get the GIL back only after the
    batch ran (an honest softmax was `implausible` on the H100 so, 2026-12-05)."""
    gpu = FakeGpu()
    record = run(FakeWorker(gpu, lie="prompt"), gpu).record()
    assert record["energy_j"] == pytest.approx(NEW_W * NEW_S, rel=5e-3)


def test_the_floor_of_energy_batches_is_fastest_against_fastest():
    # the reference's own call 0.4 ms; its round trips 3.0-3.4 ms per call: ~2.6 ms delivery
    ref_ms, new_ms = (3.0, 3.4, 3.1), (3.5, 4.9, 4.6)
    assert ep.confirmed_call_ms(ref_ms, new_ms, 0.4) == pytest.approx(0.9)  # 3.5 - 3.0 + 0.4
    # red team round 22: reference batches the candidate slowed (kernels left queued while it is
    # frozen) leave the floor where it was; paired differences went to 0
    assert ep.confirmed_call_ms((3.0, 6.4, 6.1), new_ms, 0.4) == pytest.approx(0.9)
    # ... and a reference call timed slow (a loaded core) cannot lift it above the candidate's own
    assert ep.confirmed_call_ms(ref_ms, new_ms, 9.0) == pytest.approx(3.5)
    assert ep.confirmed_call_ms((3.0,), (2.0,), 0.4) == 0.0  # noise swamps the compute: no floor
    assert ep.confirmed_call_ms((1.0, 1.1), (0.6, 0.65), 0.8) == pytest.approx(0.4)
    # red team round 23: a candidate that delivers faster in its own process than the reference's
    # harness lowers the estimate; the physical floor stays
    assert ep.confirmed_call_ms((3.0,), (2.0,), 0.4, physical_ms=0.16) == pytest.approx(0.16)
    assert ep.confirmed_call_ms(ref_ms, new_ms, 0.4, physical_ms=0.16) == pytest.approx(0.9)


def test_the_physical_floor_is_the_rooflines_and_absent_without_peaks():
    work = Work(flops=2e9, min_bytes=512 * 2**20, io_bytes=512 * 2**20)  # a 256 MiB softmax-like call
    spec = wire.EnergySpec(1.0, 3, 0.3, 0.01, None, peak_tflops=989.0, mem_bandwidth_gb_s=3350.0)
    assert ep.physical_floor_ms(work, spec) == pytest.approx(512 * 2**20 / 3350e9 * 1e3)  # bytes bound
    gemm = Work(flops=137e9, min_bytes=320 * 2**20, io_bytes=64 * 2**20)
    assert ep.physical_floor_ms(gemm, spec) == pytest.approx(137e9 / 989e12 * 1e3)  # FLOPs bound
    assert ep.physical_floor_ms(work, wire.EnergySpec(1.0, 3, 0.3)) == 0.0


def test_the_reference_call_for_the_floor_is_the_fastest_of_three_on_fresh_inputs():
    import time

    waits, drawn, synced = iter([0.03, 0.002, 0.01]), [], []
    ms = ep.reference_call_ms(lambda inputs: time.sleep(next(waits)), lambda seed: drawn.append(seed) or [1],
                              lambda: synced.append(1))
    assert 2.0 <= ms < 10.0 and len(drawn) == 1 and len(synced) == 3


def test_a_meter_failure_is_a_reason_never_energy_and_a_device_fault_propagates():
    gpu = FakeGpu()

    def broken():
        raise MeterError("NVML unavailable (fake)")

    result = run(FakeWorker(gpu), gpu, open_meter=broken)
    assert result.fields == ()
    assert result.error == "nvml energy measurement failed: MeterError: NVML unavailable (fake)"
    assert result.record()["energy_s"] >= 0.5  # the reference's measurement still cost its time

    def faulted():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(RuntimeError, match="CUDA error"):
        run(FakeWorker(gpu), gpu, open_meter=faulted)


def test_without_the_references_energy_the_candidate_is_not_measured():
    gpu = FakeGpu()
    worker = FakeWorker(gpu)
    result = run(worker, gpu, ep.ReferenceResult(None, "nvml energy measurement of the reference failed: x"))
    assert result.record() == {"energy_error": "nvml energy measurement of the reference failed: x"}
    assert worker.gos == []


def test_the_references_energy_comes_from_the_store_until_it_is_stale():
    store, measured = ReferenceEnergies(), []

    def measure():
        measured.append(1)
        return dict(REF_FIELDS)

    first = ep.reference_energy(store, ("t", "default", 1.0), measure, "nvml")
    again = ep.reference_energy(store, ("t", "default", 1.0), measure, "nvml")
    assert measured == [1] and first.spent_s is not None and again.spent_s is None
    assert again.energy is first.energy

    def broken():
        raise MeterError("no counter")

    failed = ep.reference_energy(store, ("other", "default", 1.0), broken, "sampler")
    assert failed.energy is None
    assert failed.error == "sampler energy measurement of the reference failed: MeterError: no counter"


class Recorder:
    def __init__(self, error=None):
        self.samples, self.error, self.stopped = [], error, False

    def stop(self):
        self.stopped = True


def test_lane_telemetry_says_why_there_is_none():
    with ep.LaneTelemetry(None) as lane:
        pass
    assert lane.fields([]) == {}

    def no_daemon():
        raise ConnectionRefusedError("no sampler at 127.0.0.1:1")

    with ep.LaneTelemetry(no_daemon) as lane:
        pass
    assert lane.fields([]) == {"lane_error": ("no lane telemetry from the sampler: "
                                              "ConnectionRefusedError: no sampler at 127.0.0.1:1")}
    recorder = Recorder(error=OSError("stream reset"))
    with ep.LaneTelemetry(lambda: recorder) as lane:
        pass
    assert recorder.stopped
    assert lane.fields([])["lane_error"] == "the sampler's stream broke: OSError: stream reset"


def test_the_record_is_assembled_from_the_steps_that_ran():
    steps = Steps("fake device", {"compile_s": 1.0})
    steps.ref_energy = stored_reference(spent_s=2.0)
    assert steps.fields() == {"device": "fake device", "compile_s": 1.0, "energy_s": 2.0}
    steps.correct = Correctness(seed=3, max_abs_err=1e-6, max_rel_err=1e-5)
    steps.timed = Timing(4, (2.0,) * 10, (1.0,) * 10, "fake")
    fields = steps.fields()
    assert fields["max_abs_err"] == 1e-6 and fields["speedup"] == pytest.approx(2.0)
    assert "flops" not in fields and "energy_error" not in fields  # not run: not in the record
    steps.alone_ms = (1.0,) * 5  # alone the reference took half: it was slowed, not credited
    assert steps.fields()["speedup"] == pytest.approx(1.05)
    steps.energy = ep.EnergyResult(error="nvml energy measurement failed: x", spent_s=2.5)
    assert steps.fields()["energy_error"] == "nvml energy measurement failed: x"
    assert steps.fields()["energy_s"] == 2.5
    wire.Measurement(status="ok", **steps.fields())  # every field is one the protocol carries
