"""NvmlEnergyMeter against an autospec'd pynvml whose counter ticks every 100 ms on a fake clock."""

import functools
import random

import pynvml
import pytest
from fake_gpu import FakeGpu, fake_nvml

from warpk.telemetry import EnergyMeasurement, MeterError, MeterSettings, NvmlEnergyMeter, no_sync
from warpk.telemetry.meter import CounterReading
from warpk.telemetry.windows import wait_for_update

FAST = dict(warmup_s=0.05, calibrate_s=0.02, phase_seed=1)  # the windows' random phases, fixed here


def make_meter(gpu: FakeGpu, **settings) -> NvmlEnergyMeter:
    return NvmlEnergyMeter(0, MeterSettings(**{**FAST, **settings}), nvml=fake_nvml([gpu]),
                           clock=gpu.clock, sleep=gpu.sleep)


def kernel(gpu: FakeGpu, seconds: float):
    return lambda: gpu.run(seconds)


def covers(m: EnergyMeasurement, truth_j: float) -> bool:
    return abs(m.energy_j - truth_j) <= m.energy_uncertainty_j


@pytest.mark.parametrize("call_s", [20e-6, 1e-3, 30e-3, 250e-3])
def test_aligned_windows_measure_busy_energy_per_call(call_s):
    gpu = FakeGpu(idle_w=100.0, busy_w=400.0, phase_s=0.0713)
    with make_meter(gpu, min_window_s=0.5, repeats=3) as meter:
        m = meter.measure(kernel(gpu, call_s), sync=no_sync)
    truth_j = 400.0 * call_s
    assert m.energy_source == "nvml" and m.aligned and m.repeats == 3
    assert covers(m, truth_j), (m.energy_j, truth_j, m.energy_uncertainty_j)
    assert all(w.window_s >= 0.5 for w in m.windows)
    assert m.time_per_call_ms == pytest.approx(call_s * 1000, rel=1e-6)
    if call_s <= 1e-3:  # edges located to within a chunk of 1 ms: tight
        assert m.energy_j == pytest.approx(truth_j, rel=2e-3)
        assert m.avg_power_w == pytest.approx(400.0, rel=2e-3)
        assert m.energy_uncertainty_j < 0.01 * truth_j


def test_alignment_beats_naive_windows_and_both_uncertainties_hold():
    rng = random.Random(7)
    aligned_err, naive_err = [], []
    for _ in range(12):
        for aligned, errs in ((True, aligned_err), (False, naive_err)):
            gpu = FakeGpu(phase_s=rng.uniform(1e-3, 0.1))
            gpu.sleep(rng.uniform(0, 0.1))  # random start against the ticks
            with make_meter(gpu, min_window_s=0.25, repeats=1, aligned=aligned) as meter:
                m = meter.measure(kernel(gpu, 1e-3), sync=no_sync)
            assert covers(m, 0.4), (aligned, m)
            errs.append(abs(m.energy_j - 0.4) / 0.4)
    assert max(aligned_err) < 0.005
    assert max(naive_err) > 0.1  # a 0.25 s window reads 2 or 3 updates of 100 ms


def test_short_naive_window_can_read_zero_joules_and_says_so():
    gpu = FakeGpu(phase_s=0.05)
    with make_meter(gpu, min_window_s=0.008, repeats=1, aligned=False, warmup_s=0.0) as meter:
        m = meter.measure(kernel(gpu, 1e-3), sync=no_sync)
    assert m.energy_j == 0.0  # 8 ms between two reads of a 100 ms counter (FACTS.md)
    assert m.energy_uncertainty_j >= 400.0 * 1e-3


def test_window_spans_min_window_even_when_calls_speed_up_after_calibration():
    gpu = FakeGpu()
    calls = iter(range(10**9))
    # 2 ms calls through warmup (1 + 2 + 4) and calibration (1 + 2 + 4 + 8), then 4x faster
    fn = lambda: gpu.run(2e-3 if next(calls) < 22 else 0.5e-3)  # noqa: E731
    with make_meter(gpu, min_window_s=0.6, repeats=2, warmup_s=0.01, calibrate_s=0.01) as meter:
        m = meter.measure(fn, sync=no_sync)
    assert all(w.window_s >= 0.6 for w in m.windows)
    assert m.energy_j == pytest.approx(400.0 * 0.5e-3, rel=5e-3)


def test_idle_power_is_reported_beside_never_subtracted():
    gpu = FakeGpu(idle_w=120.0, busy_w=500.0)
    with make_meter(gpu, min_window_s=0.3, repeats=2, idle_window_s=0.5) as meter:
        m = meter.measure(kernel(gpu, 2e-3), sync=no_sync)
    assert m.idle_power_w == pytest.approx(120.0, rel=0.01)
    assert m.counter_period_s == pytest.approx(0.1, rel=0.02)
    assert m.energy_j == pytest.approx(500.0 * 2e-3, rel=3e-3)  # not (500 - 120) x 2 ms


def test_spread_over_repeats_enters_the_uncertainty():
    gpu = FakeGpu()
    calls = iter(range(10**9))
    # power alternates between windows' worth of calls: 300 W, then 500 W ...
    fn = lambda: gpu.run(1e-3, 300.0 if (next(calls) // 1500) % 2 else 500.0)  # noqa: E731
    with make_meter(gpu, min_window_s=1.0, repeats=4) as meter:
        m = meter.measure(fn, sync=no_sync)
    assert m.energy_std_j > 0.02 * m.energy_j
    assert m.energy_cv == pytest.approx(m.energy_std_j / m.energy_j)
    edges = sum(w.uncertainty_per_call_j for w in m.windows) / m.repeats
    assert m.energy_uncertainty_j == pytest.approx(edges + m.energy_std_j / 2)


def test_a_frozen_counter_fails_loudly_within_the_timeout():
    gpu = FakeGpu(tick_s=1000.0, phase_s=999.0)
    with make_meter(gpu, min_window_s=0.1, timeout_s=0.5) as meter:
        with pytest.raises(MeterError, match="did not change in 0.5 s"):
            meter.measure(kernel(gpu, 1e-3), sync=no_sync)
    assert gpu.now < 3.0


def test_counter_going_backwards_is_an_error():
    readings = iter([CounterReading(10.0, 1.0), CounterReading(9.0, 1.1)])

    class Counter:
        def read(self):
            return next(readings)

    with pytest.raises(MeterError, match="backwards"):
        wait_for_update(Counter(), CounterReading(10.0, 0.9), lambda: None, lambda: 0.0, 1.0)


def test_sync_is_called_so_async_work_is_inside_the_window():
    gpu = FakeGpu()
    pending = []
    fn = lambda: pending.append(1e-3)  # noqa: E731 - "launch": nothing runs until sync

    def sync():
        while pending:
            gpu.run(pending.pop())

    with make_meter(gpu, min_window_s=0.3, repeats=2) as meter:
        m = meter.measure(fn, sync=sync)
    assert m.energy_j == pytest.approx(0.4, rel=5e-3)


def test_no_nvml_library_is_a_clear_error():
    nvml = fake_nvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(MeterError, match="NVML unavailable"):
        NvmlEnergyMeter(0, nvml=nvml)


def test_gpu_without_energy_counter_is_refused_and_nvml_released():
    no_counter = {"nvmlDeviceGetTotalEnergyConsumption": pynvml.NVML_ERROR_NOT_SUPPORTED}
    nvml = fake_nvml([FakeGpu()], fail=no_counter)
    with pytest.raises(MeterError, match="no usable energy counter"):
        NvmlEnergyMeter(0, nvml=nvml)
    nvml.nvmlShutdown.assert_called_once()


def test_unknown_index_and_closed_meter():
    gpu = FakeGpu()
    with pytest.raises(MeterError, match="GPU index 3 unknown"):
        NvmlEnergyMeter(3, nvml=fake_nvml([gpu]))
    nvml = fake_nvml([gpu])
    meter = NvmlEnergyMeter(0, nvml=nvml, clock=gpu.clock, sleep=gpu.sleep)
    meter.close()
    meter.close()
    nvml.nvmlShutdown.assert_called_once()
    with pytest.raises(MeterError, match="closed"):
        meter.measure(kernel(gpu, 1e-3), sync=no_sync)


def test_settings_reject_nonsense_and_follow_the_hardware_profile():
    with pytest.raises(ValueError, match="repeats"):
        MeterSettings(repeats=0)
    with pytest.raises(ValueError, match="chunk_s"):
        MeterSettings(chunk_s=0.0)

    class H200:
        min_energy_window_s = 1.0

    assert MeterSettings.for_hardware(H200(), repeats=5) == MeterSettings(min_window_s=1.0, repeats=5)


@pytest.mark.parametrize("min_window_s", [0.1, 0.25, 1.0])
def test_slow_counter_reads_do_not_inflate_energy_per_call(min_window_s):
    # On the H200 a counter read takes ~3.7 ms. Syncing before each edge read left the device idle
    # meanwhile, and counting calls as window / (average time per call, slow edges included) read
    # +55 % at 0.1 s there. Queued work now runs while the host waits on NVML.
    rng = random.Random(3)
    for _ in range(4):
        gpu = FakeGpu(idle_w=100.0, busy_w=700.0, phase_s=rng.uniform(1e-3, 0.1), read_cost_s=3.7e-3)
        gpu.sleep(rng.uniform(0, 0.1))
        with make_meter(gpu, min_window_s=min_window_s, repeats=3) as meter:
            m = meter.measure(functools.partial(gpu.launch, 1.5e-3), sync=gpu.sync)
        truth_j = 700.0 * 1.5e-3
        assert covers(m, truth_j), (m.energy_j, truth_j, m.energy_uncertainty_j)
        # unbiased (mean error over 20 phases < 0.2 % at every length); the spread is the edges'
        rel = {0.1: 0.04, 0.25: 0.015, 1.0: 0.0075}[min_window_s]
        assert m.energy_j == pytest.approx(truth_j, rel=rel)
        assert m.time_per_call_ms == pytest.approx(1.5, rel=1e-6)  # the body's rate, no edges
        assert m.avg_power_w == pytest.approx(700.0, rel=rel)  # no idle gaps inside the window
        assert all(w.window_s >= min_window_s for w in m.windows)


@pytest.mark.parametrize("cycle_s", [0.01, 0.02])
def test_random_window_phases_turn_a_part_time_counters_aliasing_into_stated_uncertainty(cycle_s):
    # The H200's counter samples part of the time (the square-wave test, docs/energy.md). A
    # workload with a cycle then meets the sampling at one phase in every window of a fixed
    # phase: all windows read the same wrong value and the stated uncertainty covers nothing.
    def measure(random_phase: bool):
        gpu = FakeGpu(idle_w=80.0, phase_s=0.0371, sensor_window_s=0.025)  # samples 25 ms of 100
        meter = make_meter(gpu, min_window_s=0.5, repeats=8, random_phase=random_phase)
        return meter.measure(lambda: (gpu.run(cycle_s / 2, 600.0), gpu.run(cycle_s / 2, 100.0)), sync=no_sync)

    truth_j = 350.0 * cycle_s
    fixed = measure(random_phase=False)
    assert len({round(w.energy_per_call_j, 9) for w in fixed.windows}) == 1  # no spread to show it
    assert not covers(fixed, truth_j)
    jittered = measure(random_phase=True)
    assert covers(jittered, truth_j)
    assert jittered.energy_std_j > 0.02 * truth_j  # the aliasing is now spread across windows
