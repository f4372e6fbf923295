"""Measured energy in the evaluator: the trusted side's energy step against a simulated GPU (fake
NVML counter ticking every 100 ms on a fake clock, a fake untrusted worker behind a RemoteLoop),
the CUDA -> NVML device mapping, and how records carry each energy mode (nvml | model | none,
never mixed)."""

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_gpu import FakeGpu, fake_nvml

from warpk.config import ConfigError, EvaluateConfig, HardwareConfig
from warpk.evaluator import EvalItem, Evaluator, energy
from warpk.evaluator import protocol as wire
from warpk.evaluator.assemble import record_from
from warpk.evaluator.checks import Verdict
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


# --- the candidate's side: a RemoteLoop ----------------------------------------------------
class FakeRemote:
    """The untrusted worker as the trusted side sees it: Go(repeat=n) runs n candidate calls on
    the simulated GPU (here, when the answer is awaited), then a Ran comes back."""

    def __init__(self, gpu: FakeGpu, seconds_per_call: float, power_w: float):
        self.gpu, self.seconds, self.power_w = gpu, seconds_per_call, power_w
        self.batches: list[int] = []

    def send_go(self, n: int) -> None:
        self.batches.append(n)

    def receive(self, n: int):
        assert n == self.batches[-1]
        self.gpu.run(self.batches[-1] * self.seconds, self.power_w)
        return wire.Ran("ok", None, [[]], [], self.batches[-1] * self.seconds * 1e3), None


def test_remote_loop_measures_the_candidates_energy_from_outside():
    gpu = FakeGpu(idle_w=100.0, phase_s=0.0411)
    meter = NvmlEnergyMeter(0, MeterSettings(min_window_s=0.5, repeats=1, **FAST), nvml=fake_nvml([gpu]),
                            clock=gpu.clock, sleep=gpu.sleep)
    remote, checked = FakeRemote(gpu, NEW_S, NEW_W), []
    loop = energy.RemoteLoop(remote.send_go, remote.receive,
                             lambda ran, fd, calls, wall_s: checked.append((calls, wall_s)))
    loop.clock = gpu.clock
    ref = lambda: gpu.run(REF_S, REF_W)  # noqa: E731

    def sync():
        loop.sync()

    fields = energy.measure_pair(meter, ref, loop, sync, repeats=2, idle_window_s=0.3)
    assert covers(fields["energy_j"], NEW_W * NEW_S, fields["energy_uncertainty_j"])
    assert covers(fields["ref_energy_j"], REF_W * REF_S, fields["ref_energy_uncertainty_j"])
    assert remote.batches and all(n >= 1 for n in remote.batches)  # batches, not one message per call
    assert [c for c, _ in checked] == remote.batches  # every batch came back and was checked
    assert all(wall_s == pytest.approx(c * NEW_S, rel=1e-6) for c, wall_s in checked)


def test_remote_loop_check_failure_stops_the_measurement():
    gpu = FakeGpu()
    meter = NvmlEnergyMeter(0, MeterSettings(min_window_s=0.3, repeats=1, **FAST), nvml=fake_nvml([gpu]),
                            clock=gpu.clock, sleep=gpu.sleep)
    remote = FakeRemote(gpu, NEW_S, NEW_W)

    def check(ran, fd, calls, wall_s):
        raise Verdict("implausible", "an energy batch skipped work")

    loop = energy.RemoteLoop(remote.send_go, remote.receive, check)
    with pytest.raises(Verdict, match="skipped work"):
        energy.measure_pair(meter, lambda: gpu.run(REF_S, REF_W), loop, loop.sync, repeats=1, idle_window_s=0)


# --- records under each mode -----------------------------------------------------------------
CPU = HardwareConfig(name="cpu", device="cpu", peak_bf16_tflops=1.0, peak_fp32_tflops=1.0,
                     mem_bandwidth_gb_s=10.0, tdp_w=30.0, idle_power_w=5.0, cores=2,
                     min_energy_window_s=0.0)
H200 = dataclasses.replace(CPU, name="h200", device="cuda", tdp_w=700.0, idle_power_w=80.0,
                           peak_bf16_tflops=989.0, mem_bandwidth_gb_s=4800.0, min_energy_window_s=1.0)
TIMED = dict(status="ok", device="NVIDIA H200", runtime_ms=0.5, ref_runtime_ms=2.0, speedup=4.0,
             speedup_low=3.9, speedup_high=4.1, flops=0.0, min_bytes=0.0)
MEASURED = {"energy_j": 0.2, "energy_uncertainty_j": 0.001, "avg_power_w": 400.0, "window_s": 1.1,
            "ref_energy_j": 0.6, "ref_energy_uncertainty_j": 0.002, "ref_avg_power_w": 300.0,
            "ref_window_s": 1.2, "idle_power_w": 90.0, "energy_s": 8.0}
BASE = dict(task_id="level1/x", candidate="c.py", candidate_sha="0" * 64, hardware="h200")


def record_for(mode: str, hardware: HardwareConfig, **measured):
    return record_from(wire.Measurement(**{**TIMED, **measured}), BASE, hardware, mode, 1)


def test_nvml_mode_records_measured_energy():
    record = record_for("nvml", H200, **MEASURED)
    assert record.energy_source == "nvml" and record.energy_error is None
    for key, value in MEASURED.items():
        assert getattr(record, key) == value


def test_failed_nvml_measurement_is_none_with_a_reason_never_modelled():
    record = record_for("nvml", H200, energy_error="nvml energy measurement failed: MeterError: GPU is lost")
    assert record.status == "ok" and record.speedup == 4.0
    assert record.energy_source == "none" and record.energy_error.startswith("nvml energy measurement failed")
    assert record.energy_j is None and record.ref_energy_j is None and record.avg_power_w is None


def test_energy_none_leaves_every_energy_field_none():
    record = record_for("none", CPU, device="cpu")
    assert record.energy_source == "none"
    assert all(getattr(record, k) is None for k in (*energy_fields(), "energy_error"))


def test_energy_model_is_the_power_model():
    record = record_for("model", CPU, device="cpu", **MEASURED)  # measured fields are not used
    assert record.energy_source == "model" and record.window_s is None and record.idle_power_w is None
    assert record.energy_j == pytest.approx(record.avg_power_w * 0.5e-3)


def energy_fields():
    return ("energy_j", "energy_uncertainty_j", "avg_power_w", "window_s", "ref_energy_j",
            "ref_energy_uncertainty_j", "ref_avg_power_w", "ref_window_s", "idle_power_w")


def test_energy_mode_is_part_of_the_result_cache_key():
    task = SimpleNamespace(task_id="level1/x", path=Path(__file__), shapes={})
    item = EvalItem(task, "class ModelNew: pass\n", "c.py")
    keys = {Evaluator(EvaluateConfig(energy=m, sandbox="process"), CPU, lanes=[""]).prepare(0, item).key
            for m in ("model", "none")}
    assert len(keys) == 2


def test_energy_modes_resolve_and_nvml_without_a_gpu_fails_with_the_reason():
    assert resolve_energy("auto", "cuda", "h200", ["NVIDIA H200"]) == "nvml"
    assert resolve_energy("auto", "cpu", "cpu") == "model"
    with pytest.raises(HardwareError, match="evaluate.energy=nvml needs a GPU profile"):
        resolve_energy("nvml", "cpu", "cpu")
    with pytest.raises(HardwareError, match="NVML finds no GPU"):
        resolve_energy("nvml", "cuda", "h200", [])


def test_results_table_says_why_energy_is_missing():
    from rich.console import Console

    from warpk.report.console import results_table
    from warpk.tables import to_rich

    record = record_for("nvml", H200, energy_error="nvml energy measurement failed: MeterError: GPU is lost")
    console = Console(width=400, record=True)
    console.print(to_rich(results_table([record], "h200")))
    assert "energy not measured: nvml energy measurement failed" in console.export_text()


def test_the_results_table_says_how_many_energies_stopped_at_their_cap():
    from rich.console import Console

    from warpk.report.console import results_table
    from warpk.tables import to_rich

    met = record_for("nvml", H200, **MEASURED)
    capped = record_for("nvml", H200, **MEASURED, energy_at_cap=True)
    console = Console(width=400, record=True)
    console.print(to_rich(results_table([met, capped, met], "h200")))
    assert "1 energy figure(s) stopped at evaluate.energy_repeats" in console.export_text()
    console = Console(width=400, record=True)
    console.print(to_rich(results_table([met], "h200")))
    assert "energy_at_cap" not in console.export_text()


@pytest.mark.parametrize(("target", "rounds"), [(0.0, 5), (0.02, 2), (1e-12, 5)])
def test_measure_pair_stops_once_both_sides_reach_the_target_uncertainty(target, rounds):
    """hardware.energy_rel_uncertainty: the simulated GPU is steady, so two rounds reach 2%; an
    unreachable target, or none, runs the cap (5 rounds)."""
    gpu = FakeGpu(idle_w=100.0, phase_s=0.0637)
    meter = NvmlEnergyMeter(0, MeterSettings(min_window_s=0.5, repeats=1, **FAST), nvml=fake_nvml([gpu]),
                            clock=gpu.clock, sleep=gpu.sleep)
    ref, new = (lambda: gpu.run(REF_S, REF_W)), (lambda: gpu.run(NEW_S, NEW_W))
    calls, measure = [], meter.measure
    meter.measure = lambda fn, sync: (calls.append(fn), measure(fn, sync=sync))[1]
    fields = energy.measure_pair(meter, ref, new, no_sync, repeats=5, idle_window_s=0.3,
                                 rel_uncertainty=target)
    assert len(calls) == 2 * rounds
    assert fields["energy_windows"] == fields["ref_energy_windows"] == rounds
    if target >= 0.02:
        assert fields["energy_uncertainty_j"] <= target * fields["energy_j"]
        assert fields["ref_energy_uncertainty_j"] <= target * fields["ref_energy_j"]
    # the record says when the cap, not the target, ended the measurement
    assert fields["energy_at_cap"] is ({0.0: None, 0.02: False}.get(target, True))


# --- the reference's energy: once per task and lane, measured again on a schedule ----------------
def test_a_reference_energy_is_reused_until_it_is_old_or_used_up_and_says_how_far_it_moved():
    now = [0.0]
    store = energy.ReferenceEnergies(clock=lambda: now[0])
    key = ("task-sha", "gpu", 1.0)
    assert store.fresh(key) is None
    first = store.store(key, {"ref_energy_j": 0.500})
    assert store.fresh(key) is first and store.fresh(("other", "gpu", 1.0)) is None
    first.uses = energy.REF_ENERGY_MAX_USES
    assert store.fresh(key) is None  # used up
    second = store.store(key, {"ref_energy_j": 0.502})
    assert second.ident.endswith(f"(+0.40% from {first.ident})")
    now[0] = energy.REF_ENERGY_MAX_AGE_S + 1
    assert store.fresh(key) is None  # too old: drift must be looked for


def test_measure_one_measures_one_side_with_the_same_stopping_rule():
    gpu = FakeGpu(idle_w=100.0, phase_s=0.0637)
    meter = NvmlEnergyMeter(0, MeterSettings(min_window_s=0.5, repeats=1, **FAST), nvml=fake_nvml([gpu]),
                            clock=gpu.clock, sleep=gpu.sleep)
    fields = energy.measure_one(meter, lambda: gpu.run(REF_S, REF_W), no_sync, repeats=5,
                                idle_window_s=0.3, rel_uncertainty=0.02, prefix="ref_")
    assert set(fields) == {"ref_energy_j", "ref_energy_uncertainty_j", "ref_avg_power_w", "ref_window_s",
                           "ref_energy_windows", "ref_energy_at_cap", "idle_power_w"}
    assert fields["ref_energy_windows"] == 2 and fields["ref_energy_at_cap"] is False
    assert covers(fields["ref_energy_j"], REF_W * REF_S, fields["ref_energy_uncertainty_j"])
    assert fields["ref_energy_uncertainty_j"] <= 0.02 * fields["ref_energy_j"]
    alone = energy.measure_one(meter, lambda: gpu.run(NEW_S, NEW_W), no_sync, repeats=2, idle_window_s=0.0)
    assert "idle_power_w" not in alone and alone["energy_j"] == pytest.approx(NEW_W * NEW_S, rel=5e-3)


LANE = {"lane_samples": 120, "lane_span_s": 1.2, "lane_power_source": "power_instant_w",
        "lane_power_mean_w": 410.0, "lane_power_max_w": 655.0, "lane_sm_clock_mean_mhz": 1950.0,
        "lane_sm_clock_min_mhz": 1755, "lane_temperature_max_c": 61, "lane_throttle_reasons": 4}


def test_sampler_mode_records_its_energy_and_the_lanes_telemetry():
    record = record_for("sampler", H200, **MEASURED, **LANE)
    assert record.energy_source == "sampler" and record.energy_j == MEASURED["energy_j"]
    for key, value in LANE.items():
        assert getattr(record, key) == value


def test_a_failed_sampler_measurement_keeps_the_telemetry_and_says_why():
    why = "sampler energy measurement failed: MeterError: x"
    record = record_for("sampler", H200, energy_error=why, **LANE)
    assert record.energy_source == "none" and record.energy_j is None
    assert record.energy_error.startswith("sampler energy") and record.lane_power_max_w == 655.0


def test_nvml_mode_has_no_lane_telemetry_unless_measured():
    record = record_for("nvml", H200, **MEASURED)
    assert all(getattr(record, k) is None for k in LANE)


def test_auto_on_a_gpu_takes_the_sampler_only_when_a_daemon_serves_every_gpu():
    asked = []

    def serves(addr, gpus):
        asked.append((addr, gpus))
        return None

    names = ["NVIDIA H200", "NVIDIA H200"]
    assert resolve_energy("auto", "cuda", "h200", names, "127.0.0.1:7", serves) == "sampler"
    assert asked == [("127.0.0.1:7", 2)]
    assert resolve_energy("auto", "cuda", "h200", names, "127.0.0.1:7", lambda a, n: "no daemon") == "nvml"
    assert resolve_energy("auto", "cuda", "h200", names, "", serves) == "nvml"
    assert resolve_energy("auto", "cpu", "cpu", None, "127.0.0.1:7", serves) == "model"


def test_sampler_mode_is_refused_before_anything_runs_when_it_cannot_measure():
    with pytest.raises(HardwareError, match="evaluate.energy=sampler needs a GPU profile"):
        resolve_energy("sampler", "cpu", "cpu", None, "127.0.0.1:7")
    gpu = ["NVIDIA H200"]
    start = r"no daemon here; start `python -m sampler serve --addr 127.0.0.1:7`"
    with pytest.raises(HardwareError, match=start):
        resolve_energy("sampler", "cuda", "h200", gpu, "127.0.0.1:7", lambda a, n: "no daemon here")
    assert resolve_energy("sampler", "cuda", "h200", gpu, "127.0.0.1:7", lambda a, n: None) == "sampler"


def test_the_energy_spec_names_the_daemon_only_in_sampler_mode():
    from warpk.evaluator.dispatch import Dispatcher

    for mode, addr in (("sampler", "127.0.0.1:7"), ("nvml", None)):
        protocol = EvaluateConfig(sandbox="process", sampler_addr="127.0.0.1:7")
        evaluator = SimpleNamespace(energy=mode, protocol=protocol, hardware=H200, lanes=["0"])
        assert Dispatcher(evaluator).energy_spec.sampler_addr == addr


@pytest.mark.parametrize("addr", ["10.0.0.5:50052", "127.0.0.1", "localhost:0", "localhost:port", ""])
def test_a_sampler_address_off_this_host_or_without_a_port_is_refused(addr):
    with pytest.raises(ConfigError, match="evaluate.sampler_addr"):
        EvaluateConfig(sampler_addr=addr)


def test_loopback_sampler_addresses_are_accepted():
    for addr in ("127.0.0.1:50052", "localhost:1", "[::1]:50052"):
        EvaluateConfig(sampler_addr=addr)
