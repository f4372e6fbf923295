"""H200 validation of the energy meter and the sampler (issue 4, item 5). Writes JSON + markdown.

    python benchmarks/bench_energy.py --out $OUT            # all sections, < 8 min on one GPU
    python benchmarks/bench_energy.py --out $OUT --sections repeat,square

Sections (each writes its part of bench_energy.json; bench_energy.md summarises them):
  trace   >= 60 s of idle and load phases recorded through the sampler's NVML backend every
          10 ms (h200_trace.jsonl.gz + trace_schedule.json), for tests/data and the replay backend.
  repeat  CV of energy per call over 10 aligned windows at the default window (1 s) for bf16
          matmuls of ~10 us, 100 us, 1 ms, 10 ms per call; also the CV of 2-window (2 s) measurements.
  window  error of energy per call vs window length (0.1-5 s), aligned vs unaligned, against
          aligned 5 s windows; how often |error| <= the reported uncertainty (coverage).
  square  busy/idle square waves (cycle 20/50/100/200 ms, 50 % duty) at random phase against the
          counter's updates: does the counter account for all of the time? The integral of NVML's
          instantaneous power over the same windows is the positive control.
  sampler samples/s to 1 and 4 clients, daemon CPU use, and a kernel's runtime with a client
          streaming at 10 ms vs none (`python -m sampler serve` in a subprocess), SIGTERM exit.

Needs only torch (CUDA), nvidia-ml-py, grpcio, protobuf and this repository. Never changes a GPU
setting (power limit, clocks, modes). Assumes NVML index == CUDA index (no CUDA_VISIBLE_DEVICES
remapping). Everything below `gpu_rig` runs on any `Rig`, so the unit tests drive the sections
with a simulated GPU on a fake clock (tests/unit/test_telemetry_bench.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "benchmarks"):  # runs as a script where warpk is not installed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from energy_report import (  # noqa: E402
    pair_cv,
    render_markdown,
    square_wave_verdict,
    trace_schedule,
    window_errors,
)

from warpk.telemetry.meter import EnergyCounter, EnergyMeasurement, MeterSettings  # noqa: E402
from warpk.telemetry.windows import (  # noqa: E402
    measure_with_counter,
    observe_idle,
    update_time_s,
    wait_for_update,
)

SECTIONS = ("trace", "repeat", "window", "square", "sampler")
KERNEL_TARGETS_S = (10e-6, 100e-6, 1e-3, 10e-3)
WINDOW_LENGTHS_S = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
SQUARE_PERIODS_S = (0.02, 0.05, 0.1, 0.2)
MATMUL_SIZES = (64, 128, 256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384)


@dataclass
class Rig:
    """What the sections need from a device; `gpu_rig` builds the real one.

    kernel(target_s) -> (fn, seconds per call, label); busy(s) keeps the device busy about s
    seconds, then syncs; time_per_call_ms(fn, s) times fn on the device for about s seconds.
    """

    counter: EnergyCounter
    clock: Callable[[], float]
    sleep: Callable[[float], object]
    sync: Callable[[], object]
    kernel: Callable[[float], tuple[Callable[[], object], float, str]]
    busy: Callable[[float], object]
    time_per_call_ms: Callable[[Callable[[], object], float], float]
    instant_power_w: Callable[[], float | None] | None = None
    info: dict = field(default_factory=dict)


def gpu_rig(index: int) -> Rig:
    """The real rig: NVML counter of GPU `index`, bf16 matmuls of random data on cuda:`index`."""
    import pynvml
    import torch

    from warpk.telemetry.nvml import NvmlCounter, open_nvml_device

    handle = open_nvml_device(pynvml, index)
    torch.cuda.set_device(index)
    sync = torch.cuda.synchronize

    def time_per_call_ms(fn, seconds):
        fn()
        sync()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        n = 1
        while True:
            start.record()
            for _ in range(n):
                fn()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
            if ms >= seconds * 1000.0 or n >= 10_000_000:
                return ms / n
            n = max(n * 2, int(n * seconds * 1000.0 / max(ms, 1e-3) * 1.1))

    table: list[tuple[int, Callable, float]] = []

    def matmul(size):
        a, b, c = (torch.randn(size, size, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        return lambda: torch.mm(a, b, out=c)

    def kernel(target_s):
        if not table:
            for size in MATMUL_SIZES:
                fn = matmul(size)
                table.append((size, fn, time_per_call_ms(fn, 0.02) / 1000.0))
                if table[-1][2] > 3 * max(KERNEL_TARGETS_S):
                    break
        size, fn, per_call_s = min(table, key=lambda row: abs(math.log(row[2] / target_s)))
        return fn, per_call_s, f"bf16 matmul {size}^3"

    def busy(seconds):
        fn, per_call_s, _ = kernel(1e-3)
        for _ in range(max(1, round(seconds / per_call_s))):
            fn()
        sync()

    def instant_power_w():
        try:
            value = pynvml.nvmlDeviceGetFieldValues(handle, [pynvml.NVML_FI_DEV_POWER_INSTANT])[0]
        except pynvml.NVMLError:
            return None
        return value.value.uiVal / 1000.0 if value.nvmlReturn == pynvml.NVML_SUCCESS else None

    name = pynvml.nvmlDeviceGetName(handle)
    info = {"gpu": name.decode() if isinstance(name, bytes) else name, "torch": torch.__version__,
            "driver": str(pynvml.nvmlSystemGetDriverVersion()),
            "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0}
    return Rig(NvmlCounter(pynvml, handle, time.monotonic), time.monotonic, time.sleep, sync, kernel, busy,
               time_per_call_ms, instant_power_w if instant_power_w() is not None else None, info)


# --- sections ----------------------------------------------------------------------------------

def measure(rig: Rig, fn, args, **overrides) -> EnergyMeasurement:
    """Aligned (unless overridden) windows on the rig's counter; defaults from the arguments."""
    settings = MeterSettings(**{"min_window_s": args.window_s, "repeats": args.repeats, **overrides})
    return measure_with_counter(fn, rig.sync, rig.counter, settings, "nvml", rig.clock, rig.sleep)


def section_repeat(rig: Rig, args) -> dict:
    rows = []
    for i, target_s in enumerate(args.kernels):
        fn, per_call_s, label = rig.kernel(target_s)
        m = measure(rig, fn, args, idle_window_s=0.5 if i == 0 else 0.0)
        per_window = [w.energy_per_call_j for w in m.windows]
        rows.append({"target_s": target_s, "kernel": label, "kernel_s": per_call_s, "energy_j": m.energy_j,
                     "energy_std_j": m.energy_std_j, "cv": m.energy_cv, "cv_2_windows": pair_cv(per_window),
                     "energy_uncertainty_j": m.energy_uncertainty_j, "avg_power_w": m.avg_power_w,
                     "window_s": m.window_s, "calls_per_window": m.calls_per_window,
                     "idle_power_w": m.idle_power_w, "counter_period_s": m.counter_period_s,
                     "per_window_j": per_window})
    goal = [r for r in rows if r["kernel_s"] >= 100e-6]
    met = all(r["cv_2_windows"] is not None and r["cv_2_windows"] <= 0.01 for r in goal)
    return {"rows": rows, "goal_met_2s": met,
            "goal": "CV <= 1% for kernels >= 100 us with <= 2 s of GPU time"}


def section_window(rig: Rig, args) -> dict:
    fn, per_call_s, label = rig.kernel(1e-3)
    ref = measure(rig, fn, args, min_window_s=args.reference_s, repeats=2)
    cases = []
    for aligned in (True, False):
        for length_s in args.window_lengths:
            repeats = 5 if length_s <= 1.0 else (3 if length_s <= 2.0 else 2)
            m = measure(rig, fn, args, min_window_s=length_s, repeats=repeats, aligned=aligned)
            stats = window_errors([w.energy_per_call_j for w in m.windows],
                                  [w.uncertainty_per_call_j for w in m.windows], ref.energy_j)
            cases.append({"aligned": aligned, "window_s": length_s, "repeats": repeats,
                          "measured_window_s": m.window_s, **stats})
    return {"kernel": label, "kernel_s": per_call_s, "reference_j": ref.energy_j, "cases": cases,
            "reference_uncertainty_j": ref.energy_uncertainty_j, "reference_window_s": ref.window_s}


def _poll_instant(rig: Rig, stop: threading.Event, into: list) -> None:
    while not stop.is_set():
        into.append((rig.clock(), rig.instant_power_w()))
        stop.wait(0.005)


def _square_window(rig: Rig, period_s: float, phase_s: float, wave_s: float, poll_s: float) -> dict:
    """One square wave between two idle counter updates: counter delta, busy and idle time."""
    def idle() -> None:
        rig.sleep(poll_s)

    rig.sync()
    before_a, a = wait_for_update(rig.counter, rig.counter.read(), idle, rig.clock, 5.0)
    instant: list[tuple[float, float | None]] = []
    stop = threading.Event()
    poller = None
    if rig.instant_power_w:
        poller = threading.Thread(target=_poll_instant, args=(rig, stop, instant), daemon=True)
        poller.start()
    rig.sleep(phase_s)
    start_s, busy_s = rig.clock(), 0.0
    for cycle in range(max(1, round(wave_s / period_s))):
        t0 = rig.clock()
        rig.busy(period_s / 2)
        busy_s += rig.clock() - t0
        rig.sleep(max(0.0, start_s + (cycle + 1) * period_s - rig.clock()))
    before_b, b = wait_for_update(rig.counter, rig.counter.read(), idle, rig.clock, 5.0)
    stop.set()
    if poller:
        poller.join()
    t_a, t_b = update_time_s(before_a, a), update_time_s(before_b, b)
    inside = [(t, p) for t, p in instant if t_a <= t <= t_b and p is not None]
    instant_j = sum((t2 - t1) * p1 for (t1, p1), (t2, _) in zip(inside, inside[1:], strict=False))
    return {"energy_j": b.energy_j - a.energy_j, "window_s": t_b - t_a, "busy_s": busy_s, "phase_s": phase_s,
            "instant_j": instant_j if len(inside) > 1 else None,
            "instant_span_s": inside[-1][0] - inside[0][0] if len(inside) > 1 else None}


def section_square(rig: Rig, args) -> dict:
    rng = random.Random(args.seed)
    fn, _, label = rig.kernel(1e-3)
    busy_w = measure(rig, fn, args, repeats=2).avg_power_w
    rig.sync()
    rig.sleep(1.0)  # let the power settle after the busy measurement (Hopper's 1 s averaging)
    idle_w, period = observe_idle(rig.counter, MeterSettings(idle_window_s=2.0), rig.clock, rig.sleep)
    runs, ratios, instant_ratios = [], {}, {}
    for period_s in args.square_periods:
        for _ in range(args.phases):
            phase_s = rng.uniform(0.0, max(period_s, period or 0.1))
            run = _square_window(rig, period_s, phase_s, args.wave_s, 5e-4)
            expected_j = busy_w * run["busy_s"] + idle_w * (run["window_s"] - run["busy_s"])
            run.update(period_s=period_s, expected_j=expected_j, ratio=run["energy_j"] / expected_j)
            ratios.setdefault(period_s, []).append(run["ratio"])
            if run["instant_j"]:
                expected_span_j = expected_j * run["instant_span_s"] / run["window_s"]
                run["instant_ratio"] = run["instant_j"] / expected_span_j
                instant_ratios.setdefault(period_s, []).append(run["instant_ratio"])
            runs.append(run)
    return {"busy_kernel": label, "busy_power_w": busy_w, "idle_power_w": idle_w, "counter_period_s": period,
            "counter": square_wave_verdict(ratios),
            "instant_power": square_wave_verdict(instant_ratios) if instant_ratios else None, "runs": runs}


def section_trace(rig: Rig, args, out: Path) -> dict:
    from sampler.backends import NvmlBackend
    from sampler.trace import record

    backend = NvmlBackend(gpus=[args.gpu])
    stop, path, lines = threading.Event(), out / "h200_trace.jsonl.gz", []

    def record_all():
        lines.append(record(backend, [args.gpu], 0.01, args.trace_s + 5.0, path, stop))

    recorder = threading.Thread(target=record_all, daemon=True)
    schedule, t0 = [], time.monotonic()
    recorder.start()
    try:
        small, _, _ = rig.kernel(10e-6)
        for name, seconds in trace_schedule(args.trace_s):
            begin = time.monotonic()
            while time.monotonic() - begin < seconds:
                if name == "idle":
                    rig.sleep(min(0.1, seconds))
                elif name == "matmul_1ms":
                    rig.busy(0.05)
                elif name == "square_200ms":
                    rig.busy(0.1)
                    rig.sleep(0.1)
                else:
                    for _ in range(1000):
                        small()
                    rig.sync()
            schedule.append({"phase": name, "start_s": begin - t0, "end_s": time.monotonic() - t0})
    finally:
        stop.set()
        recorder.join(timeout=10)
        backend.close()
    # Phase times are relative to t0; the trace's timestamp_s are host monotonic: t0 maps them.
    (out / "trace_schedule.json").write_text(json.dumps({"monotonic_origin_s": t0, "phases": schedule},
                                                        indent=1))
    return {"file": path.name, "readings": lines[0] if lines else None, "duration_s": time.monotonic() - t0,
            "monotonic_origin_s": t0, "schedule": schedule}


# A sampler client in its own process (so it never shares a GIL with the timed loop): prints
# "ready" at its first message, then one JSON line {"samples", "seconds"} when its stream ends.
CLIENT = """
import json, sys, time
from warpk.telemetry.sampler_client import SamplerClient
addr, gpu, interval_ms, duration_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
metrics = [m for m in sys.argv[5].split(",") if m]
n, first = 0, None
with SamplerClient(addr) as c:
    for batch in c.stream_batches(gpus=[gpu], interval_ms=interval_ms, metrics=metrics,
                                  duration_s=duration_s, timeout_s=duration_s + 30):
        if first is None:
            first = time.monotonic()
            print("ready", flush=True)
        n += len(batch.samples)
print(json.dumps({"samples": n, "seconds": time.monotonic() - first}), flush=True)
"""


def _clients(addr: str, gpu: int, count: int, interval_ms: int, duration_s: float, metrics: str = ""):
    args = [sys.executable, "-c", CLIENT, addr, str(gpu), str(interval_ms), str(duration_s), metrics]
    procs = [subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"sampler client failed (exit {p.wait(timeout=30)})")
    return procs


def _finish(procs) -> list[dict]:
    return [json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1]) for p in procs]


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) a process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sampler_runs(rig: Rig, args, daemon: subprocess.Popen, addr: str) -> dict:
    result: dict = {"daemon": addr, "throughput": []}
    for count, interval_ms, metrics in ((1, 1, ""), (4, 1, ""), (1, 1, "energy_j"), (1, 10, "")):
        cpu0, t0 = _cpu_s(daemon.pid), time.monotonic()
        done = _finish(_clients(addr, args.gpu, count, interval_ms, args.sampler_s, metrics))
        rates = [d["samples"] / d["seconds"] for d in done]
        result["throughput"].append({
            "clients": count, "interval_ms": interval_ms, "metrics": metrics or "all",
            "samples_per_s_each": rates, "samples_per_s_total": sum(rates),
            "daemon_cpu_cores": (_cpu_s(daemon.pid) - cpu0) / (time.monotonic() - t0)})
    cpu0, t0 = _cpu_s(daemon.pid), time.monotonic()
    time.sleep(args.sampler_s)
    result["idle_daemon_cpu_cores"] = (_cpu_s(daemon.pid) - cpu0) / (time.monotonic() - t0)
    result["perturbation"] = []
    for target_s in (10e-6, 1e-3):
        fn, _, label = rig.kernel(target_s)
        off, on = [], []
        for _ in range(args.perturb_reps):
            off.append(rig.time_per_call_ms(fn, args.perturb_s))
            (client,) = _clients(addr, args.gpu, 1, 10, 3 * args.perturb_s + 10.0)
            on.append(rig.time_per_call_ms(fn, args.perturb_s))
            client.terminate()  # its count is not needed; its stream was live while we timed
            client.wait(timeout=30)
        result["perturbation"].append({
            "kernel": label, "off_ms": off, "on_ms": on,
            "change": statistics.median(on) / statistics.median(off) - 1.0,
            "spread_off": (max(off) - min(off)) / statistics.median(off)})
    single = result["throughput"][0]["samples_per_s_total"]
    result["goal_met"] = single >= 980 and all(abs(p["change"]) < 0.005 for p in result["perturbation"])
    return result


def section_sampler(rig: Rig, args) -> dict:
    cmd = [sys.executable, "-m", "sampler", "serve", "--addr", "127.0.0.1:0", "--gpus", str(args.gpu),
           "--backend", args.sampler_backend]
    if args.sampler_trace:
        cmd += ["--trace", args.sampler_trace]
    daemon = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    result: dict = {}
    try:
        line = daemon.stdout.readline()
        if " on " not in line:
            raise RuntimeError(f"the sampler did not start: {line!r}")
        result = _sampler_runs(rig, args, daemon, line.strip().split(" on ")[-1])
    except Exception as err:  # noqa: BLE001 - recorded with the shutdown outcome below
        result["error"] = f"{type(err).__name__}: {err}"
    finally:
        t0 = time.monotonic()
        daemon.send_signal(signal.SIGTERM)
        try:
            rc = daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:  # report it, and do not hide what failed before it
            daemon.kill()
            rc = f"no exit within 30 s of SIGTERM (killed); stderr: {daemon.stderr.read()[-500:]!r}"
    result.update(sigterm_exit_code=rc, shutdown_s=time.monotonic() - t0)
    return result


# --- driver --------------------------------------------------------------------------------------

def estimate_s(section: str, args) -> float:
    """Rough seconds a section takes, for the time budget."""
    if section == "trace":
        return args.trace_s + 8
    if section == "repeat":
        return len(args.kernels) * (args.repeats * (args.window_s + 0.2) + 1.5) + 1
    if section == "window":
        reps = [5 if w <= 1 else (3 if w <= 2 else 2) for w in args.window_lengths]
        sweep_s = sum(r * (w + 0.2) for r, w in zip(reps, args.window_lengths, strict=True))
        return 2 * (args.reference_s + 0.2) + 2 * sweep_s + 3
    if section == "square":
        return len(args.square_periods) * args.phases * (args.wave_s + 0.3) + 2 * args.window_s + 4
    return 5 * (args.sampler_s + 1.5) + 2 * args.perturb_reps * (2 * args.perturb_s + 1.0) + 5


def run_sections(rig: Rig, args, out: Path) -> dict:
    """Run the chosen sections within the time budget; a failing section is recorded, not fatal."""
    started = time.monotonic()
    results: dict = {"args": {k: v for k, v in vars(args).items() if k != "out"}, "rig": rig.info,
                     "sections": {}}
    for name in args.sections:
        elapsed = time.monotonic() - started
        if elapsed + estimate_s(name, args) > args.budget_s:
            budget = f"time budget: {elapsed:.0f} of {args.budget_s:.0f} s used"
            results["sections"][name] = {"skipped": budget}
            continue
        t0 = time.monotonic()
        try:
            if name == "trace":
                results["sections"][name] = section_trace(rig, args, out)
            else:
                results["sections"][name] = globals()[f"section_{name}"](rig, args)
        except Exception as e:  # keep the other sections' results
            results["sections"][name] = {"error": f"{type(e).__name__}: {e}"}
        results["sections"][name]["seconds"] = time.monotonic() - t0
        (out / "bench_energy.json").write_text(json.dumps(results, indent=1, default=str))
    results["total_s"] = time.monotonic() - started
    (out / "bench_energy.json").write_text(json.dumps(results, indent=1, default=str))
    (out / "bench_energy.md").write_text(render_markdown(results))
    return results


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(",") if x)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="directory for the JSON, markdown and trace")
    p.add_argument("--gpu", type=int, default=0, help="NVML (= CUDA) index of the GPU")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)}")
    p.add_argument("--budget-s", type=float, default=450.0, help="skip sections that would exceed this")
    p.add_argument("--seed", type=int, default=0, help="phases of the square waves")
    p.add_argument("--window-s", type=float, default=1.0, help="default window: min_energy_window_s")
    p.add_argument("--repeats", type=int, default=10, help="windows per repeatability measurement")
    p.add_argument("--kernels", type=_floats, default=KERNEL_TARGETS_S, help="target seconds per call")
    p.add_argument("--window-lengths", type=_floats, default=WINDOW_LENGTHS_S)
    p.add_argument("--reference-s", type=float, default=5.0, help="window of the reference measurement")
    p.add_argument("--square-periods", type=_floats, default=SQUARE_PERIODS_S, help="cycle lengths, s")
    p.add_argument("--phases", type=int, default=8, help="random phases per square-wave cycle length")
    p.add_argument("--wave-s", type=float, default=1.0, help="length of each square wave")
    p.add_argument("--trace-s", type=float, default=62.0, help="length of the recorded trace")
    p.add_argument("--sampler-s", type=float, default=4.0, help="length of each throughput run")
    p.add_argument("--perturb-s", type=float, default=1.5, help="timing run of the perturbation test")
    p.add_argument("--perturb-reps", type=int, default=3, help="off/on pairs of the perturbation test")
    p.add_argument("--sampler-backend", choices=("nvml", "replay"), default="nvml")
    p.add_argument("--sampler-trace", default=None, help="trace for --sampler-backend replay (dry runs)")
    args = p.parse_args(argv)
    args.sections = [s for s in args.sections.split(",") if s]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        p.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = run_sections(gpu_rig(args.gpu), args, args.out)
    print((args.out / "bench_energy.md").read_text())
    return 1 if any("error" in body for body in results["sections"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
