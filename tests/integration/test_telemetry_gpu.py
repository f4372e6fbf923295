"""Telemetry on a real NVIDIA GPU (skipped without one): NVML meter, EnergyCapture, sampler daemon.

Run on the GPU machine with `python -m pytest -q -m gpu tests/integration/test_telemetry_gpu.py`.
Bounds are loose on purpose (any Volta+ GPU); the H200 figures live in docs/benchmarks.md.
Nothing here changes a GPU setting.
"""

import pytest

from warpk.telemetry import MeterSettings, NvmlEnergyMeter
from warpk.telemetry.capture import EnergyCapture

pytestmark = pytest.mark.gpu
SETTINGS = MeterSettings(min_window_s=1.0, repeats=3, idle_window_s=0.5)


@pytest.fixture(scope="module")
def matmul():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    return (lambda: torch.mm(a, b)), torch.cuda.synchronize


def test_nvml_meter_on_a_matmul_loop(matmul):
    fn, sync = matmul
    with NvmlEnergyMeter(0, SETTINGS) as meter:
        m = meter.measure(fn, sync=sync)
    assert m.window_s >= 1.0 and m.repeats == 3
    assert 20.0 < m.idle_power_w < m.avg_power_w < 1200.0
    assert m.energy_j == pytest.approx(m.avg_power_w * m.time_per_call_ms / 1000.0, rel=0.02)
    assert m.energy_cv < 0.05
    assert m.energy_uncertainty_j < 0.05 * m.energy_j
    assert 0.05 < m.counter_period_s < 0.5


def test_energy_capture_around_a_workload(matmul):
    fn, sync = matmul

    def workload():  # ~2 s: the window must span many 100 ms counter updates to mean anything
        for _ in range(12000):
            fn()

    capture = EnergyCapture()
    try:
        trace = capture.capture(kernel_fn=workload, sync=sync)
    finally:
        capture.close()
    assert trace.total_joules > 0 and 20.0 < trace.avg_power_w < 1200.0
    assert trace.energy_uncertainty_j < trace.total_joules


def test_sampler_daemon_on_nvml_agrees_with_the_direct_meter(matmul):
    from sampler.backends import NvmlBackend
    from sampler.server import Daemon
    from warpk.telemetry.sampler_client import SamplerClient, SamplerEnergyMeter

    fn, sync = matmul
    daemon = Daemon(NvmlBackend(gpus=[0]), "127.0.0.1:0", default_interval_ms=10)
    try:
        with SamplerClient(daemon.address) as client:
            samples = list(client.stream(max_ticks=20, interval_ms=10, timeout_s=30))
        assert all(s.energy_j is not None and s.power_w is not None for s in samples)
        assert samples[-1].energy_j >= samples[0].energy_j
        assert all(not s.errors for s in samples), samples[-1].errors
        # direct, sampler, direct: a warming GPU draws more power over time, so the sampler's
        # figure is compared with the mean of the two direct ones around it.
        with NvmlEnergyMeter(0, SETTINGS) as meter:
            before = meter.measure(fn, sync=sync)
        with SamplerEnergyMeter(daemon.address, 0, SETTINGS) as meter:
            via_sampler = meter.measure(fn, sync=sync)
        with NvmlEnergyMeter(0, SETTINGS) as meter:
            after = meter.measure(fn, sync=sync)
        print(f"energy per call J: direct {before.energy_j:.5f}, sampler {via_sampler.energy_j:.5f}, "
              f"direct {after.energy_j:.5f}")
        assert via_sampler.energy_j == pytest.approx((before.energy_j + after.energy_j) / 2, rel=0.05)
    finally:
        daemon.stop()
