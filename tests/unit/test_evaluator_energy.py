"""Measured energy in the evaluator: the worker's energy step against a simulated GPU (fake NVML
counter ticking every 100 ms on a fake clock), the CUDA -> NVML device mapping, and how records
carry each energy mode (nvml | model | none, never mixed)."""

import dataclasses
import functools
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from fake_gpu import FakeGpu, fake_nvml

from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator import EvalItem, Evaluator, energy
from warpk.evaluator import worker as worker_mod
from warpk.evaluator.sandbox import WorkerOutcome
from warpk.hardware import HardwareError, resolve_energy
from warpk.telemetry import MeterError, MeterSettings, NvmlEnergyMeter, no_sync

REF_W, REF_S = 300.0, 2e-3  # the simulated reference: 2 ms per call at 300 W
NEW_W, NEW_S = 450.0, 0.5e-3  # the simulated candidate: 0.5 ms per call at 450 W
FAST = dict(warmup_s=0.05, calibrate_s=0.02)


def covers(value, truth, uncertainty) -> bool:
    return abs(value - truth) <= uncertainty


def test_measure_pair_gives_each_side_its_simulated_energy_and_alternates_order():
    gpu = FakeGpu(idle_w=100.0, phase_s=0.0637)
    meter = NvmlEnergyMeter(0, MeterSettings(min_window_s=0.5, repeats=1, **FAST), nvml=fake_nvml([gpu]),
                            clock=gpu.clock, sleep=gpu.sleep)
    ref, new = (lambda: gpu.run(REF_S, REF_W)), (lambda: gpu.run(NEW_S, NEW_W))
    order, measure = [], meter.measure
    meter.measure = lambda fn, sync: (order.append("ref" if fn is ref else "new"), measure(fn, sync=sync))[1]
    fields = energy.measure_pair(meter, ref, new, no_sync, repeats=3, idle_window_s=0.3)
    assert order == ["ref", "new", "new", "ref", "ref", "new"]  # back to back, first alternates
    assert covers(fields["energy_j"], NEW_W * NEW_S, fields["energy_uncertainty_j"])
    assert covers(fields["ref_energy_j"], REF_W * REF_S, fields["ref_energy_uncertainty_j"])
    assert fields["energy_j"] == pytest.approx(NEW_W * NEW_S, rel=5e-3)
    assert fields["ref_energy_j"] == pytest.approx(REF_W * REF_S, rel=5e-3)
    assert fields["avg_power_w"] == pytest.approx(NEW_W, rel=5e-3)
    assert fields["ref_avg_power_w"] == pytest.approx(REF_W, rel=5e-3)
    assert fields["window_s"] >= 0.5 and fields["ref_window_s"] >= 0.5
    assert fields["idle_power_w"] == pytest.approx(100.0, rel=1e-3)  # reported, not subtracted
    assert 0 < fields["energy_uncertainty_j"] < 0.01 * fields["energy_j"]


# --- CUDA device -> NVML device -----------------------------------------------------------
def two_gpus() -> list[FakeGpu]:
    return [FakeGpu(pci_bus_id="00000000:19:00.0", uuid="GPU-aaaa"),
            FakeGpu(pci_bus_id="00000000:3B:00.0", uuid="GPU-bbbb")]


@pytest.mark.parametrize("props", [
    SimpleNamespace(pci_bus_id=0x3B, pci_domain_id=0, pci_device_id=0),  # torch's ints
    SimpleNamespace(pci_bus_id="0000:3b:00.0"),  # a ready string, 4-digit domain
    SimpleNamespace(pci_bus_id=None, uuid="bbbb"),  # no PCI id: the UUID
])
def test_cuda_device_maps_to_its_nvml_index_not_to_zero(props):
    # CUDA_VISIBLE_DEVICES=1 makes the second GPU CUDA device 0; NVML still calls it 1.
    assert energy.nvml_index_for_cuda(props, fake_nvml(two_gpus())) == 1


def test_unmappable_cuda_device_is_a_meter_error():
    with pytest.raises(MeterError, match="cannot map the CUDA device"):
        energy.nvml_index_for_cuda(SimpleNamespace(pci_bus_id=0x99, uuid="cccc"), fake_nvml(two_gpus()))


def test_open_cuda_meter_opens_the_mapped_device():
    gpus = two_gpus()
    props = SimpleNamespace(pci_bus_id=0x3B, pci_domain_id=0, pci_device_id=0)
    with energy.open_cuda_meter(props, 1.0, nvml=fake_nvml(gpus)) as meter:
        assert meter.index == 1 and meter.settings.min_window_s == 1.0 and meter.settings.repeats == 1


# --- the worker's energy step ---------------------------------------------------------------
class SimulatedOp(torch.nn.Module):
    """x * 2, which costs `seconds` at `power_w` on the simulated GPU."""

    def __init__(self, gpu: FakeGpu, seconds: float, power_w: float):
        super().__init__()
        self.gpu, self.seconds, self.power_w = gpu, seconds, power_w

    def forward(self, x):
        self.gpu.run(self.seconds, self.power_w)
        return x * 2


TASK = SimpleNamespace(get_inputs=lambda: [torch.randn(8)])
SPEC = {"mode": "nvml", "min_window_s": 0.3, "repeats": 2, "idle_window_s": 0.2}


def run_worker_energy(monkeypatch, gpu: FakeGpu, nvml, candidate=None) -> dict:
    props = SimpleNamespace(pci_bus_id=0x19, pci_domain_id=0, pci_device_id=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *_: props)
    opener = functools.partial(energy.open_cuda_meter, nvml=nvml, clock=gpu.clock, sleep=gpu.sleep)
    monkeypatch.setattr(energy, "open_cuda_meter", opener)
    dev = worker_mod.Device(torch, "cpu")
    protocol = dataclasses.asdict(EvaluateConfig())
    reference = SimulatedOp(gpu, REF_S, REF_W)
    candidate = candidate or SimulatedOp(gpu, NEW_S, NEW_W)
    return worker_mod.energy(torch, dev, TASK, reference, candidate, protocol, 0, SPEC)


def test_worker_energy_step_measures_reference_and_candidate(monkeypatch):
    gpu = FakeGpu()
    fields = run_worker_energy(monkeypatch, gpu, fake_nvml([gpu]))
    assert covers(fields["energy_j"], NEW_W * NEW_S, fields["energy_uncertainty_j"])
    assert covers(fields["ref_energy_j"], REF_W * REF_S, fields["ref_energy_uncertainty_j"])
    assert fields["idle_power_w"] == pytest.approx(gpu.idle_w, rel=1e-3)
    assert "energy_error" not in fields


def test_worker_energy_step_reports_a_failing_meter_instead_of_a_value(monkeypatch):
    gpu = FakeGpu()
    lost = fake_nvml([gpu], fail={"nvmlDeviceGetTotalEnergyConsumption": 15})  # GPU_IS_LOST
    fields = run_worker_energy(monkeypatch, gpu, lost)
    assert set(fields) == {"energy_error"}
    assert fields["energy_error"].startswith("nvml energy measurement failed: MeterError")


def test_worker_energy_step_checks_the_candidates_loop_output(monkeypatch):
    gpu = FakeGpu()

    class Stale(SimulatedOp):  # right while checked, a stale output once called many times
        calls = 0

        def forward(self, x):
            self.calls += 1
            out = super().forward(x)  # the simulated GPU stays busy either way
            return out if self.calls < 50 else torch.zeros_like(x)

    with pytest.raises(worker_mod.Verdict, match="energy-loop call") as verdict:
        run_worker_energy(monkeypatch, gpu, fake_nvml([gpu]), Stale(gpu, NEW_S, NEW_W))
    assert verdict.value.status == "incorrect"


# --- records under each mode -----------------------------------------------------------------
CPU = HardwareConfig(name="cpu", device="cpu", peak_bf16_tflops=1.0, peak_fp32_tflops=1.0,
                     mem_bandwidth_gb_s=10.0, tdp_w=30.0, idle_power_w=5.0, cores=2,
                     min_energy_window_s=0.0)
H200 = dataclasses.replace(CPU, name="h200", device="cuda", tdp_w=700.0, idle_power_w=80.0,
                           peak_bf16_tflops=989.0, mem_bandwidth_gb_s=4800.0, min_energy_window_s=1.0)
TIMED = {"status": "ok", "error": None, "device": "NVIDIA H200", "runtime_ms": 0.5, "ref_runtime_ms": 2.0,
         "flops": 0.0, "min_bytes": 0.0}
MEASURED = {"energy_j": 0.2, "energy_uncertainty_j": 0.001, "avg_power_w": 400.0, "window_s": 1.1,
            "ref_energy_j": 0.6, "ref_energy_uncertainty_j": 0.002, "ref_avg_power_w": 300.0,
            "ref_window_s": 1.2, "idle_power_w": 90.0, "energy_s": 8.0}


class FixedWorker:
    def __init__(self, result: dict):
        self.result, self.requests = result, []

    def submit(self, request: dict) -> WorkerOutcome:
        self.requests.append(request)
        return WorkerOutcome(self.result, 0, None, "", 1.0)


def record_for(monkeypatch, mode: str, hardware: HardwareConfig, result: dict):
    if mode == "nvml":  # no GPU here: the stage-start check is tested separately
        monkeypatch.setattr("warpk.evaluator.resolve_energy", lambda *_: "nvml")
    evaluator = Evaluator(EvaluateConfig(energy=mode, result_cache=False), hardware, lanes=["0"])
    task = SimpleNamespace(task_id="level1/x", path=Path(__file__), shapes={})
    worker = FixedWorker(result)
    record = evaluator.measure(EvalItem(task, "class ModelNew: pass\n", "c.py"), worker)
    return record, worker.requests[0]


def test_nvml_mode_records_measured_energy_and_sends_the_window(monkeypatch):
    record, request = record_for(monkeypatch, "nvml", H200, {**TIMED, **MEASURED})
    assert request["energy"] == {"mode": "nvml", "min_window_s": 1.0, "repeats": 3, "idle_window_s": 0.3}
    assert record.energy_source == "nvml" and record.energy_error is None
    for key, value in MEASURED.items():
        assert getattr(record, key) == value


def test_failed_nvml_measurement_is_none_with_a_reason_never_modelled(monkeypatch):
    result = {**TIMED, "energy_error": "nvml energy measurement failed: MeterError: GPU is lost"}
    record, _ = record_for(monkeypatch, "nvml", H200, result)
    assert record.status == "ok" and record.speedup == 4.0
    assert record.energy_source == "none" and record.energy_error == result["energy_error"]
    assert record.energy_j is None and record.ref_energy_j is None and record.avg_power_w is None


def test_energy_none_leaves_every_energy_field_none(monkeypatch):
    record, request = record_for(monkeypatch, "none", CPU, {**TIMED, "device": "cpu"})
    assert request["energy"]["mode"] == "none" and record.energy_source == "none"
    assert all(getattr(record, k) is None for k in (*energy_fields(), "energy_error"))


def test_energy_model_is_the_power_model(monkeypatch):
    record, _ = record_for(monkeypatch, "model", CPU, {**TIMED, **MEASURED, "device": "cpu"})
    assert record.energy_source == "model" and record.window_s is None and record.idle_power_w is None
    assert record.energy_j == pytest.approx(record.avg_power_w * 0.5e-3)


def energy_fields():
    return ("energy_j", "energy_uncertainty_j", "avg_power_w", "window_s", "ref_energy_j",
            "ref_energy_uncertainty_j", "ref_avg_power_w", "ref_window_s", "idle_power_w")


def test_energy_mode_is_part_of_the_result_cache_key():
    task = SimpleNamespace(task_id="level1/x", path=Path(__file__), shapes={})
    item = EvalItem(task, "class ModelNew: pass\n", "c.py")
    keys = {Evaluator(EvaluateConfig(energy=m), CPU, lanes=[""]).result_key(item) for m in ("model", "none")}
    assert len(keys) == 2


def test_energy_modes_resolve_and_nvml_without_a_gpu_fails_with_the_reason():
    assert resolve_energy("auto", "cuda", "h200", ["NVIDIA H200"]) == "nvml"
    assert resolve_energy("auto", "cpu", "cpu") == "model"
    with pytest.raises(HardwareError, match="evaluate.energy=nvml needs a GPU profile"):
        resolve_energy("nvml", "cpu", "cpu")
    with pytest.raises(HardwareError, match="NVML finds no GPU"):
        resolve_energy("nvml", "cuda", "h200", [])


def test_results_table_says_why_energy_is_missing(monkeypatch):
    from rich.console import Console

    from warpk.stages.evaluate import results_table

    result = {**TIMED, "energy_error": "nvml energy measurement failed: MeterError: GPU is lost"}
    record, _ = record_for(monkeypatch, "nvml", H200, result)
    console = Console(width=400, record=True)
    console.print(results_table([record], "h200"))
    assert "energy not measured: nvml energy measurement failed" in console.export_text()
