"""Traces, prefill/decode attribution, the replay meter and EnergyCapture on hand-made traces."""

import time

import pytest
from fake_gpu import FakeGpu

from warpk.telemetry import (
    EnergyTrace,
    MeterError,
    MeterSettings,
    TraceSample,
    load_trace,
    no_sync,
    write_trace,
)
from warpk.telemetry.capture import EnergyCapture
from warpk.telemetry.phases import attribute_prefill_decode
from warpk.telemetry.replay import ReplayCounter, ReplayMeter


def trace(*points, **kw) -> EnergyTrace:
    return EnergyTrace(tuple(TraceSample(t, e) for t, e in points), **kw)


def ticking_trace(power_w: float, tick_s: float, duration_s: float, sample_s: float) -> EnergyTrace:
    """A counter that updates every tick_s at constant power, sampled every sample_s."""
    gpu = FakeGpu(idle_w=power_w, tick_s=tick_s, phase_s=tick_s, energy0_j=0.0)
    samples = []
    while gpu.now <= duration_s:
        samples.append(TraceSample(gpu.now, gpu.counter_j))
        gpu.sleep(sample_s)
    return EnergyTrace(tuple(samples))


def test_prefill_and_decode_from_knots_exactly():
    # Intelligence-per-Watt's check: readings at 0, 0.5, 2.0 s, TTFT 0.5 s -> 12 J and 38 J.
    t = trace((0.0, 0.0), (0.5, 12.0), (2.0, 50.0))
    p = attribute_prefill_decode(t, [0.5, 1.0, 2.0], start_s=0.0)
    assert (p.prefill_energy_j, p.decode_energy_j) == (12.0, 38.0)
    assert (p.prefill_uncertainty_j, p.decode_uncertainty_j) == (0.0, 0.0)
    assert p.prefill_avg_power_w == pytest.approx(24.0)
    assert p.decode_avg_power_w == pytest.approx(38.0 / 1.5)
    assert p.decode_energy_per_token_j == pytest.approx(19.0)
    assert (p.prefill_s, p.decode_s, p.output_tokens) == (0.5, 1.5, 3)


def test_prefill_and_decode_interpolated_between_knots():
    t = trace((0.0, 0.0), (1.0, 100.0), (2.0, 300.0))
    p = attribute_prefill_decode(t, [0.5, 1.0, 1.5], start_s=0.25)
    assert p.prefill_energy_j == pytest.approx(25.0)  # E(0.5) - E(0.25) = 50 - 25
    assert p.decode_energy_j == pytest.approx(150.0)  # E(1.5) - E(0.5) = 200 - 50
    # Both prefill ends in one 100 J segment: the truth is in [0, 100], 25 is off by <= 75.
    assert p.prefill_uncertainty_j == pytest.approx(75.0)
    assert p.decode_uncertainty_j == pytest.approx(100.0 + 200.0)


def test_repeated_counter_values_are_not_knots():
    # 300 W, counter updates every 100 ms, sampled every 10 ms: a staircase read naively would be
    # off by up to 30 J; through the change points the interpolation is right to < 1 sample.
    t = ticking_trace(300.0, tick_s=0.1, duration_s=2.0, sample_s=0.01)
    assert len(t.knots[0]) < len(t.samples) / 5
    p = attribute_prefill_decode(t, [0.45, 0.9, 1.33], start_s=0.2)
    assert p.prefill_energy_j == pytest.approx(300.0 * 0.25, abs=300.0 * 0.01)
    assert p.decode_energy_j == pytest.approx(300.0 * 0.88, abs=300.0 * 0.01)
    assert abs(p.prefill_energy_j - 75.0) <= p.prefill_uncertainty_j


def test_power_only_trace_integrates_power():
    samples = tuple(TraceSample(t, power_w=100.0 + 100.0 * t) for t in (0.0, 0.5, 1.0, 1.5, 2.0))
    p = attribute_prefill_decode(EnergyTrace(samples), [1.0, 2.0], start_s=0.0)
    assert p.prefill_energy_j == pytest.approx(150.0)  # integral of 100 + 100 t over [0, 1]
    assert p.decode_energy_j == pytest.approx(250.0)


def test_short_phase_is_none_with_min_phase_and_bad_inputs_raise():
    t = trace((0.0, 0.0), (1.0, 100.0), (2.0, 300.0))
    p = attribute_prefill_decode(t, [0.05, 1.5], start_s=0.0, min_phase_s=0.1)
    assert p.prefill_energy_j is None and p.prefill_avg_power_w is None
    assert p.decode_energy_j is not None
    with pytest.raises(ValueError, match="outside"):
        attribute_prefill_decode(t, [0.5, 2.5], start_s=0.0)
    with pytest.raises(ValueError, match="empty"):
        attribute_prefill_decode(t, [])
    with pytest.raises(ValueError, match="ascending"):
        attribute_prefill_decode(t, [1.0, 0.5])
    with pytest.raises(ValueError, match="precedes"):
        attribute_prefill_decode(t, [0.5], start_s=0.7)


def test_workload_interval_gives_total_joules_and_avg_power():
    t = trace((0.0, 1000.0), (1.0, 1100.0), (2.0, 1300.0), start_s=0.5, end_s=1.5)
    assert t.total_joules == pytest.approx(150.0)
    assert t.avg_power_w == pytest.approx(150.0)
    assert t.energy_uncertainty_j == pytest.approx(100.0 + 200.0)  # ends in the 100 J and 200 J segments
    with pytest.raises(ValueError, match="never changed"):
        trace((0.0, 5.0), (1.0, 5.0)).total_joules  # noqa: B018


def test_trace_file_round_trip_gz(tmp_path):
    samples = [TraceSample(0.1 * i, 10.0 * i, 100.0, gpu=1) for i in range(20)]
    path = tmp_path / "t.jsonl.gz"
    write_trace(path, samples)
    assert load_trace(path, gpu=1) == tuple(samples)
    with pytest.raises(ValueError, match="no readings of gpu 0"):
        load_trace(path, gpu=0)


def test_warpk_reads_traces_with_the_samplers_reader(tmp_path):
    """One reader of the format: a trace whose clock goes backwards, or a line without `gpu`, is
    refused by load_trace exactly as by the sampler's replay backend (sampler.trace.read_rows)."""
    from sampler.trace import TraceFormatError

    backwards = tmp_path / "backwards.jsonl"
    backwards.write_text('{"timestamp_s": 2.0, "gpu": 0, "energy_j": 1.0}\n'
                         '{"timestamp_s": 1.0, "gpu": 0, "energy_j": 2.0}\n')
    with pytest.raises(TraceFormatError, match="timestamp_s goes backwards for gpu 0"):
        load_trace(backwards)
    no_gpu = tmp_path / "no_gpu.jsonl"
    no_gpu.write_text('{"timestamp_s": 1.0, "energy_j": 1.0}\n')
    with pytest.raises(TraceFormatError, match="need timestamp_s and gpu"):
        load_trace(no_gpu)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def step_trace(tmp_path):
    """100 ms updates: 200 W for 3 s, then 500 W for 3 s."""
    samples, energy = [], 0.0
    for k in range(61):
        samples.append(TraceSample(0.1 * k, energy))
        energy += (200.0 if k < 30 else 500.0) * 0.1
    path = tmp_path / "step.jsonl"
    write_trace(path, samples)
    return path


def test_replay_meter_measures_the_recorded_power(tmp_path):
    clock = FakeClock()
    settings = MeterSettings(min_window_s=0.5, repeats=2, warmup_s=0.05, calibrate_s=0.02)
    meter = ReplayMeter(step_trace(tmp_path), settings=settings, clock=clock, sleep=clock.sleep)
    fn = lambda: clock.sleep(1e-3)  # noqa: E731 - each call takes 1 ms of fake time
    first = meter.measure(fn, sync=no_sync)
    assert first.energy_source == "replay"
    assert first.avg_power_w == pytest.approx(200.0, rel=5e-3)
    assert first.energy_j == pytest.approx(0.2, rel=5e-3)
    clock.now = 3.5  # into the 500 W part of the recording
    second = meter.measure(fn, sync=no_sync)
    assert second.avg_power_w == pytest.approx(500.0, rel=5e-3)


def test_replay_counter_loops_monotonically(tmp_path):
    clock = FakeClock()
    counter = ReplayCounter(load_trace(step_trace(tmp_path)), clock)
    e0 = counter.read().energy_j
    clock.now = 6.0 + 0.05  # one full loop of the 6 s trace later
    assert counter.read().energy_j == pytest.approx(e0 + 200.0 * 3 + 500.0 * 3)
    with pytest.raises(MeterError, match="energy_j"):
        ReplayCounter([TraceSample(0.0, power_w=1.0), TraceSample(1.0, power_w=1.0)])


def test_energy_capture_encloses_the_workload(tmp_path):
    # A live replay (real time) of a 250 W counter updating every 10 ms; the workload sleeps 0.2 s.
    samples = [TraceSample(0.01 * k, 2.5 * k) for k in range(1000)]
    capture = EnergyCapture(counter=ReplayCounter(samples), interval_s=0.002)
    t = capture.capture(kernel_fn=lambda: time.sleep(0.2))
    assert t.samples[0].timestamp_s <= t.start_s < t.end_s <= t.samples[-1].timestamp_s
    assert t.duration_s == pytest.approx(0.2, abs=0.05)
    assert abs(t.total_joules - 250.0 * t.duration_s) <= t.energy_uncertainty_j + 1.0
    assert t.avg_power_w == pytest.approx(250.0, rel=0.1)


def test_energy_capture_reports_a_dead_counter():
    class Broken:
        def read(self):
            raise OSError("device gone")

    with pytest.raises(MeterError, match="device gone"):
        EnergyCapture(counter=Broken(), timeout_s=1.0).capture(kernel_fn=lambda: None)
