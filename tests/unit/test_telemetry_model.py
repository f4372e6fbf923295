"""ModelMeter (energy_source "model"), measure_candidate, and the telemetry/sampler import layers."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from fake_gpu import FakeGpu, fake_nvml

from warpk.config import HardwareConfig
from warpk.telemetry import MeterSettings, NvmlEnergyMeter, modelled_energy, no_sync
from warpk.telemetry.capture import measure_candidate
from warpk.telemetry.model import ModelMeter

REPO = Path(__file__).resolve().parents[2]
CPU = HardwareConfig(name="cpu", device="cpu", peak_bf16_tflops=0.2, peak_fp32_tflops=0.2,
                     mem_bandwidth_gb_s=20, tdp_w=30.0, idle_power_w=6.0, cores=2, min_energy_window_s=0.0)
H200 = HardwareConfig(name="h200", device="cuda", peak_bf16_tflops=989.4, peak_fp32_tflops=66.9,
                      mem_bandwidth_gb_s=4800, tdp_w=700.0, idle_power_w=80.0, min_energy_window_s=1.0)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def tick(self, s: float):
        return lambda: setattr(self, "now", self.now + s)


@pytest.mark.parametrize("hardware, threads, power_w",
                         [(CPU, 1, 6.0 + 24.0 * 0.5), (CPU, 2, 30.0), (H200, 1, 700.0)])
def test_model_meter_is_modelled_power_times_timed_runtime(hardware, threads, power_w):
    clock = FakeClock()
    meter = ModelMeter(hardware, threads=threads, settings=MeterSettings(min_window_s=0.0, warmup_s=0.01),
                       clock=clock)
    m = meter.measure(clock.tick(2e-3), sync=no_sync)
    assert m.energy_source == "model"
    assert m.time_per_call_ms == pytest.approx(2.0)
    assert m.avg_power_w == pytest.approx(power_w)
    assert m.energy_j == pytest.approx(power_w * 2e-3)
    assert m.energy_j == pytest.approx(modelled_energy(hardware, 2.0, threads).energy_j)
    # A model has no window and no known error: both are "not measured", never 0.
    assert m.window_s is None and m.energy_uncertainty_j is None and m.idle_power_w is None
    assert m.energy_std_j == pytest.approx(0.0, abs=1e-12)


def test_model_meter_defaults_to_the_profile_window():
    assert ModelMeter(H200).settings.min_window_s == 1.0


def test_measure_candidate_times_trials_and_measures_energy_only_with_a_meter():
    clock = FakeClock()
    steps = iter([1e-3] * 5 + [1e-3, 3e-3] * 50)  # warmup, then alternating 1 ms / 3 ms trials
    fn = lambda: setattr(clock, "now", clock.now + next(steps))  # noqa: E731
    r = measure_candidate(fn, num_trials=25, warmup=5, clock=clock)
    assert r.num_trials == 25 and r.energy is None and r.energy_j is None
    assert r.runtime_ms == pytest.approx(1.0)  # 13 trials of 1 ms, 12 of 3 ms
    assert r.runtime_iqr_ms == pytest.approx(2.0)

    gpu = FakeGpu(busy_w=300.0)
    meter = NvmlEnergyMeter(0, MeterSettings(min_window_s=0.3, repeats=2, warmup_s=0.01, calibrate_s=0.01),
                            nvml=fake_nvml([gpu]), clock=gpu.clock, sleep=gpu.sleep)
    r = measure_candidate(lambda: gpu.run(1e-3), num_trials=5, warmup=1, meter=meter, clock=gpu.clock)
    assert r.runtime_ms == pytest.approx(1.0)
    assert r.energy_j == pytest.approx(0.3, rel=5e-3)
    with pytest.raises(ValueError, match="num_trials"):
        measure_candidate(fn, num_trials=0)


def _module_imports(path: Path) -> set[str]:
    """Top-level names imported at module level (not inside functions)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _all_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_telemetry_layer_stays_light():
    heavy = {"hydra", "omegaconf", "wandb", "trl", "peft", "transformers", "datasets", "torch"}
    for path in (REPO / "warpk" / "telemetry").glob("*.py"):
        assert not _all_imports(path) & (heavy - {"torch"}), path.name
        assert "torch" not in _module_imports(path), f"{path.name}: torch at module level (pass sync)"


def test_sampler_never_imports_warpk_or_training_libraries():
    for path in (REPO / "sampler").glob("*.py"):
        found = _all_imports(path) & {"warpk", "torch", "hydra", "omegaconf", "wandb", "trl"}
        assert not found, f"{path.name}: {found}"
    code = ("import sys, sampler.server, sampler.backends, sampler.__main__; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('warpk', 'torch')]; print(bad); "
            "sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_evaluator_import_does_not_pull_grpc():
    code = ("import sys, warpk.telemetry; "
            "sys.exit(1 if 'grpc' in sys.modules or 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=60).returncode == 0
