"""benchmarks/bench_energy.py without a GPU: its analysis on made-up numbers, its sections on a
simulated GPU (fake clock), and its sampler section against a replay daemon.

The square-wave test is the point: against a counter that integrates all of the time the
verdict must be "continuous"; against Yang et al.'s part-time sensor (25 ms seen of every
100 ms) it must not be.
"""

import json
import sys
import time
from pathlib import Path

import pytest
from fake_gpu import FakeGpu, fake_nvml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import bench_energy  # noqa: E402
from energy_report import cv, pair_cv, square_wave_verdict, trace_schedule, window_errors  # noqa: E402

from warpk.telemetry.nvml import NvmlCounter  # noqa: E402


def fake_rig(gpu: FakeGpu) -> bench_energy.Rig:
    def kernel(target_s):
        return (lambda: gpu.run(target_s)), target_s, f"fake {target_s * 1e6:g} us"

    return bench_energy.Rig(counter=NvmlCounter(fake_nvml([gpu]), gpu, gpu.clock), clock=gpu.clock,
                            sleep=gpu.sleep, sync=lambda: None, kernel=kernel, busy=gpu.run,
                            time_per_call_ms=lambda fn, s: pytest.fail("not used"), info={"gpu": "fake"})


def small_args(tmp_path, *extra):
    return bench_energy.parse_args(["--out", str(tmp_path), "--budget-s", "600", "--kernels", "1e-4,1e-3",
                                    "--repeats", "4", "--window-s", "0.3", "--window-lengths", "0.15,0.25",
                                    "--reference-s", "1.0", "--square-periods", "0.05,0.1,0.2",
                                    "--phases", "6", *extra])


def test_arguments_default_to_the_full_validation():
    args = bench_energy.parse_args(["--out", "/tmp/x"])
    assert args.sections == list(bench_energy.SECTIONS) and args.budget_s == 450.0
    assert args.kernels == (10e-6, 100e-6, 1e-3, 10e-3) and args.window_lengths[0] == 0.1
    assert args.square_periods == (0.02, 0.05, 0.1, 0.2) and args.repeats == 10
    assert sum(bench_energy.estimate_s(s, args) for s in args.sections) < 450  # 8 min with margin
    with pytest.raises(SystemExit):
        bench_energy.parse_args(["--out", "/tmp/x", "--sections", "repeat,nonsense"])


def test_analysis_on_made_up_numbers():
    assert cv([2.0, 2.0, 2.0]) == 0.0 and cv([1.0]) is None
    assert pair_cv([1.0, 3.0, 1.0, 3.0]) == 0.0  # each 2-window measurement averages to 2
    e = window_errors([1.01, 0.99, 1.2], [0.02, 0.02, 0.1], reference_j=1.0)
    assert e["mean_abs_error"] == pytest.approx(0.22 / 3) and e["max_abs_error"] == pytest.approx(0.2)
    assert e["coverage"] == pytest.approx(2 / 3)
    flat = square_wave_verdict({0.1: [1.04, 1.05, 1.03], 0.2: [1.0, 1.0, 1.01]})
    assert flat["continuous"] and "all of the time" in flat["verdict"]
    aliased = square_wave_verdict({0.02: [1.0, 1.01, 0.99], 0.1: [0.5, 1.5, 1.0]})
    assert not aliased["continuous"] and aliased["worst_period"] == "100 ms"
    phases = trace_schedule(62.0)
    assert sum(s for _, s in phases) == pytest.approx(62.0)
    assert {"idle", "matmul_1ms", "square_200ms"} <= {name for name, _ in phases}


def test_sections_on_an_integrating_counter(tmp_path):
    args = small_args(tmp_path, "--sections", "repeat,window,square")
    results = bench_energy.run_sections(fake_rig(FakeGpu(idle_w=100.0, busy_w=400.0)), args, tmp_path)
    assert json.loads((tmp_path / "bench_energy.json").read_text())["sections"].keys() == {
        "repeat", "window", "square"}
    repeat = results["sections"]["repeat"]
    assert [r["energy_j"] for r in repeat["rows"]] == pytest.approx([0.04, 0.4], rel=5e-3)
    assert repeat["rows"][0]["idle_power_w"] == pytest.approx(100.0, rel=0.01) and repeat["goal_met_2s"]
    cases = {(c["aligned"], c["window_s"]): c for c in results["sections"]["window"]["cases"]}
    assert cases[(True, 0.25)]["max_abs_error"] < 0.01 < cases[(False, 0.25)]["max_abs_error"]
    assert all(c["coverage"] == 1.0 for c in cases.values())  # the uncertainty is honest both ways
    square = results["sections"]["square"]
    assert square["counter"]["continuous"], square["counter"]
    assert square["busy_power_w"] == pytest.approx(400.0, rel=0.01)
    md = (tmp_path / "bench_energy.md").read_text()
    assert "accounts for all of the time" in md and "| fake 1000 us |" in md


def test_square_waves_expose_a_part_time_sensor(tmp_path):
    args = small_args(tmp_path, "--sections", "square")
    gpu = FakeGpu(idle_w=100.0, busy_w=400.0, sensor_window_s=0.025)  # sees 25 ms of every 100 ms
    square = bench_energy.run_sections(fake_rig(gpu), args, tmp_path)["sections"]["square"]
    assert not square["counter"]["continuous"]
    assert square["counter"]["worst_period"] in ("50 ms", "100 ms")  # cycles that divide its period
    assert square["counter"]["worst_std"] > 0.2
    assert "samples only part of the time" in (tmp_path / "bench_energy.md").read_text()


def test_a_failing_section_is_recorded_and_the_rest_still_run(tmp_path):
    args = small_args(tmp_path, "--sections", "trace,repeat", "--kernels", "1e-3")
    rig = fake_rig(FakeGpu())
    rig.kernel = lambda target_s: (_ for _ in ()).throw(RuntimeError("no such kernel"))
    results = bench_energy.run_sections(rig, args, tmp_path)
    assert "error" in results["sections"]["repeat"]
    assert "error" in results["sections"]["trace"]  # no NVML on this machine
    assert "no such kernel" in (tmp_path / "bench_energy.md").read_text()


@pytest.mark.slow
def test_sampler_section_against_a_replay_daemon(tmp_path):
    trace = tmp_path / "replay.jsonl"
    trace.write_text("".join(json.dumps({"timestamp_s": 0.01 * k, "gpu": 0, "power_w": 100.0,
                                         "energy_j": float(k // 10)}) + "\n" for k in range(500)))

    def spin(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    def time_per_call_ms(fn, seconds):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            fn()
            n += 1
        return (time.perf_counter() - t0) / n * 1000.0

    rig = bench_energy.Rig(counter=None, clock=time.monotonic, sleep=time.sleep, sync=lambda: None,
                           kernel=lambda t: ((lambda: spin(t)), t, f"spin {t}"), busy=spin,
                           time_per_call_ms=time_per_call_ms, info={"gpu": "cpu"})
    args = bench_energy.parse_args(["--out", str(tmp_path), "--sections", "sampler", "--sampler-backend",
                                    "replay", "--sampler-trace", str(trace), "--sampler-s", "0.5",
                                    "--perturb-s", "0.1", "--perturb-reps", "1"])
    s = bench_energy.run_sections(rig, args, tmp_path)["sections"]["sampler"]
    assert "error" not in s, s
    one, four = s["throughput"][0], s["throughput"][1]
    assert one["samples_per_s_total"] > 200 and four["clients"] == 4
    assert four["samples_per_s_total"] > one["samples_per_s_total"]
    assert all(t["daemon_cpu_cores"] >= 0 for t in s["throughput"])
    assert s["sigterm_exit_code"] == 0 and len(s["perturbation"]) == 2
    assert "## Sampler" in (tmp_path / "bench_energy.md").read_text()
