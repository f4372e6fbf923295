"""evaluate.energy end to end: refused at stage start where it cannot work, off when asked, and
(on a GPU) measured on NVML for both reference and candidate."""

import json

import pytest
import yaml

from tests.conftest import REPO, run_warpk
from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator import EvalItem, Evaluator
from warpk.tasks import BUNDLED_ROOT, load_task_file

SOFTMAX = BUNDLED_ROOT / "problems" / "01_softmax.py"
TORCH_SOLUTION = BUNDLED_ROOT / "solutions" / "01_softmax" / "torch_fused.py"


def test_energy_nvml_without_a_gpu_fails_at_stage_start_with_the_reason(tmp_path):
    result = run_warpk("evaluate.energy=nvml", "hardware=cpu", "logger=disabled",
                       f"hydra.run.dir={tmp_path}", timeout=120)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("warpk:")]
    assert lines == [
        "warpk: evaluate.energy=nvml needs a GPU profile, but hardware=cpu runs on the CPU; "
        "use evaluate.energy=model or none, or a GPU hardware profile"
    ], result.stderr
    assert not (tmp_path / "records.jsonl").exists()  # refused before any candidate ran


@pytest.mark.parametrize("override, message", [
    ("evaluate.energy=sampler",
     "warpk: evaluate.energy=sampler needs a GPU profile, but hardware=cpu runs on the CPU"),
    ("evaluate.sampler_addr=10.1.2.3:50052",
     "warpk: bad config: evaluate.sampler_addr='10.1.2.3:50052' must be host:port on this machine"),
])
def test_the_sampler_is_refused_before_anything_runs_where_it_cannot_measure(tmp_path, override, message):
    result = run_warpk(override, "hardware=cpu", "logger=disabled", f"hydra.run.dir={tmp_path}", timeout=120)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "records.jsonl").exists()


@pytest.mark.slow
def test_energy_none_records_no_energy(tmp_path):
    result = run_warpk("evaluate.energy=none", "hardware=cpu", "logger=disabled", "evaluate.timing_batches=3",
                       "evaluate.result_cache=false", f"evaluate.task_file={SOFTMAX}",
                       f"evaluate.candidate_files=[{TORCH_SOLUTION}]", f"hydra.run.dir={tmp_path}",
                       timeout=300)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["ok"]
    assert records[0]["energy_source"] == "none"
    assert records[0]["energy_j"] is None and records[0]["ref_energy_j"] is None
    assert records[0]["avg_power_w"] is None and records[0]["energy_error"] is None
    assert records[0]["speedup"] is not None


def _hardware(name: str) -> HardwareConfig:
    raw = yaml.safe_load((REPO / "conf" / "hardware" / f"{name}.yaml").read_text())
    raw.pop("clock_profiles", None)
    return HardwareConfig(**raw)


@pytest.mark.gpu
def test_h200_softmax_records_nvml_energy_for_reference_and_candidate():
    task = load_task_file(SOFTMAX, "bundled")
    paths = sorted((BUNDLED_ROOT / "solutions" / "01_softmax").glob("*.py"))
    items = [EvalItem(task, p.read_text(), p.name) for p in paths]
    protocol = EvaluateConfig(energy="nvml", timing_batches=3, result_cache=False)
    records = Evaluator(protocol, _hardware("h200")).evaluate_many(items)
    ok = [r for r in records if r.status == "ok"]
    assert ok, [(r.candidate, r.status, r.error) for r in records]
    for r in ok:
        assert r.energy_source == "nvml" and r.energy_error is None, (r.candidate, r.energy_error)
        assert 0 < r.avg_power_w < 1000 and 0 < r.ref_avg_power_w < 1000
        assert 0 < r.energy_j and 0 < r.ref_energy_j
        assert r.energy_uncertainty_j < 0.1 * r.energy_j and r.ref_energy_uncertainty_j < 0.1 * r.ref_energy_j
        assert r.window_s >= 1.0 and r.ref_window_s >= 1.0  # hardware.min_energy_window_s
        assert r.idle_power_w is not None and 0 < r.idle_power_w < r.avg_power_w
        assert 0 < r.energy_s < 60


@pytest.mark.gpu
def test_every_cuda_lane_maps_to_its_own_nvml_device():
    """With CUDA_DEVICE_ORDER=PCI_BUS_ID, CUDA_VISIBLE_DEVICES=i is NVML device i: the mapping
    from the worker's CUDA device 0 (real torch properties) must find i, not 0."""
    import os
    import subprocess
    import sys

    from warpk.hardware import detect_gpu_names

    code = ("import pynvml, torch; from warpk.evaluator.energy import nvml_index_for_cuda; "
            "pynvml.nvmlInit(); print(nvml_index_for_cuda(torch.cuda.get_device_properties(0), pynvml))")
    for i in range(len(detect_gpu_names())):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(i), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == str(i), out.stderr


@pytest.mark.gpu
def test_h200_softmax_energy_from_the_sampler_daemon_with_the_lanes_telemetry():
    """evaluate.energy=sampler: the trusted worker's energy windows come from a daemon reading
    NVML beside the run, and each ok record carries the lane's power, clocks and temperature."""
    from sampler.backends import NvmlBackend
    from sampler.server import Daemon

    daemon = Daemon(NvmlBackend(), "127.0.0.1:0", default_interval_ms=10)
    try:
        task = load_task_file(SOFTMAX, "bundled")
        items = [EvalItem(task, TORCH_SOLUTION.read_text(), TORCH_SOLUTION.name)]
        protocol = EvaluateConfig(energy="sampler", sampler_addr=daemon.address, timing_batches=3,
                                  result_cache=False)
        (record,) = Evaluator(protocol, _hardware("h200")).evaluate_many(items)
    finally:
        daemon.stop()
    assert record.status == "ok", record.error
    assert record.energy_source == "sampler" and record.energy_error is None, record.energy_error
    assert record.energy_j > 0 and record.ref_energy_j > 0
    assert record.lane_error is None and record.lane_samples > 10
    assert 50 < record.lane_power_mean_w <= record.lane_power_max_w < 1000
    assert record.lane_sm_clock_mean_mhz > 0 and record.lane_temperature_max_c > 0
