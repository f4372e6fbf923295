"""Analysis and markdown of benchmarks/bench_energy.py: pure functions of numbers (no device).

Unit-tested on made-up data (tests/unit/test_telemetry_bench.py), so the verdicts the H200 run
prints are the ones the tests pin down.

Non-goals: no plotting, no I/O except what the caller writes.
"""

from __future__ import annotations

import statistics


def cv(values: list[float]) -> float | None:
    """Sample standard deviation / mean; None with fewer than 2 values."""
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else None


def pair_cv(values: list[float]) -> float | None:
    """CV of the means of consecutive pairs: the spread of a measurement made of two windows."""
    return cv([(a + b) / 2 for a, b in zip(values[::2], values[1::2], strict=False)])


def window_errors(energies_j: list[float], uncertainties_j: list[float], reference_j: float) -> dict:
    """Errors of per-window energies against a reference (relative), and the uncertainty's coverage.

    Returns:
        mean_abs_error, max_abs_error, mean_error, cv, mean_rel_uncertainty, and coverage: the
        fraction of windows whose |energy - reference| is within their reported uncertainty.
    """
    errors = [(e - reference_j) / reference_j for e in energies_j]
    covered = [abs(e - reference_j) <= u for e, u in zip(energies_j, uncertainties_j, strict=True)]
    return {
        "mean_abs_error": statistics.fmean(abs(x) for x in errors),
        "max_abs_error": max(abs(x) for x in errors),
        "mean_error": statistics.fmean(errors),
        "cv": cv(energies_j),
        "mean_rel_uncertainty": statistics.fmean(u / reference_j for u in uncertainties_j),
        "coverage": sum(covered) / len(covered),
    }


def square_wave_verdict(ratios_by_period: dict[float, list[float]], spread_tol: float = 0.03) -> dict:
    """Does the sensor see all of the time? Phase spread of measured/expected energy per cycle.

    A counter that integrates continuously gives the same ratio at every phase (a transient bias
    shared by all phases is allowed: it shows in `mean`); one that samples part of each update
    period gives phase-dependent ratios once the cycle is comparable to that period.

    Args:
        ratios_by_period: cycle length (s) -> measured/expected energy, one per random phase.
        spread_tol: largest population std of the ratios still called phase-independent.
    """
    periods = {}
    for period_s, ratios in sorted(ratios_by_period.items()):
        periods[f"{period_s * 1000:g} ms"] = {
            "mean": statistics.fmean(ratios), "std": statistics.pstdev(ratios),
            "min": min(ratios), "max": max(ratios), "n": len(ratios),
        }
    worst, stats = max(periods.items(), key=lambda kv: kv[1]["std"])
    continuous = stats["std"] <= spread_tol
    if continuous:
        verdict = f"accounts for all of the time: phase spread <= {spread_tol:.0%} at every cycle length"
    else:
        verdict = f"samples only part of the time: phase spread {stats['std']:.1%} at a {worst} cycle"
    return {"continuous": continuous, "spread_tol": spread_tol, "worst_period": worst,
            "worst_std": stats["std"], "periods": periods, "verdict": verdict}


def trace_schedule(total_s: float) -> list[tuple[str, float]]:
    """Idle and load phases of the recorded trace, scaled to `total_s` seconds."""
    parts = [("idle", 10), ("matmul_1ms", 15), ("idle", 5), ("square_200ms", 10), ("matmul_10us", 10),
             ("idle", 12)]
    scale = total_s / sum(s for _, s in parts)
    return [(name, s * scale) for name, s in parts]


def _f(x, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


def _repeat(r: dict) -> list[str]:
    lines = ["## Repeatability (aligned windows at the default length)", "",
             "| kernel | s/call | energy/call J | CV per window | CV of 2-window measurement | "
             "uncertainty J | avg W | window s |", "|---|---|---|---|---|---|---|---|"]
    for row in r["rows"]:
        lines.append(f"| {row['kernel']} | {_f(row['kernel_s'])} | {_f(row['energy_j'], '.4g')} | "
                     f"{_f(row['cv'], '.2%')} | {_f(row['cv_2_windows'], '.2%')} | "
                     f"{_f(row['energy_uncertainty_j'])} | {_f(row['avg_power_w'], '.0f')} | "
                     f"{_f(row['window_s'], '.2f')} |")
    first = r["rows"][0]
    return lines + ["", f"Idle power observed: {_f(first['idle_power_w'], '.1f')} W; counter update period "
                    f"{_f(first['counter_period_s'], '.3f')} s. Goal ({r['goal']}): "
                    f"{'met' if r['goal_met_2s'] else 'NOT met'}.", ""]


def _window(w: dict) -> list[str]:
    lines = ["## Error vs window length", "",
             f"Kernel {w['kernel']}; reference {_f(w['reference_j'], '.5g')} J per call (aligned, "
             f"{_f(w['reference_window_s'], '.1f')} s windows).", "",
             "| aligned | window s | mean abs error | max abs error | CV | mean rel. uncertainty "
             "| coverage |", "|---|---|---|---|---|---|---|"]
    for c in w["cases"]:
        lines.append(f"| {c['aligned']} | {c['window_s']} | {_f(c['mean_abs_error'], '.2%')} | "
                     f"{_f(c['max_abs_error'], '.2%')} | {_f(c['cv'], '.2%')} | "
                     f"{_f(c['mean_rel_uncertainty'], '.2%')} | {_f(c['coverage'], '.0%')} |")
    return lines + [""]


def _square(q: dict) -> list[str]:
    lines = ["## Square waves at random phase", "",
             f"Busy {_f(q['busy_power_w'], '.0f')} W, idle {_f(q['idle_power_w'], '.0f')} W. "
             f"**The energy counter {q['counter']['verdict']}.**", ""]
    control = q.get("instant_power") or {}
    if control:
        lines += [f"Control, the integral of NVML instantaneous power: it {control['verdict']}.", ""]
    lines += ["| cycle | counter mean ratio | counter phase std | instant-power phase std |",
              "|---|---|---|---|"]
    for period, stats in q["counter"]["periods"].items():
        inst = control.get("periods", {}).get(period, {})
        lines.append(f"| {period} | {_f(stats['mean'], '.3f')} | {_f(stats['std'], '.2%')} | "
                     f"{_f(inst.get('std'), '.2%')} |")
    return lines + [""]


def _sampler(s: dict) -> list[str]:
    lines = ["## Sampler", "", "| clients | interval ms | metrics | samples/s total | daemon CPU cores |",
             "|---|---|---|---|---|"]
    for t in s["throughput"]:
        lines.append(f"| {t['clients']} | {t['interval_ms']} | {t['metrics']} | "
                     f"{_f(t['samples_per_s_total'], '.0f')} | {_f(t['daemon_cpu_cores'], '.3f')} |")
    lines += ["", f"Idle daemon: {_f(s.get('idle_daemon_cpu_cores'), '.4f')} cores. SIGTERM: exit code "
              f"{s.get('sigterm_exit_code')} after {_f(s.get('shutdown_s'), '.2f')} s.", "",
              "| kernel | runtime change with a 10 ms stream | run-to-run spread (off) |", "|---|---|---|"]
    for p in s.get("perturbation", []):
        lines.append(f"| {p['kernel']} | {_f(p['change'], '+.2%')} | {_f(p['spread_off'], '.2%')} |")
    return lines + ["", "Goal (>= 1000 samples/s to a client, < 0.5 % runtime change): "
                    f"{'met' if s.get('goal_met') else 'NOT met'}.", ""]


def render_markdown(results: dict) -> str:
    """The human summary of bench_energy.json."""
    lines = ["# Energy meter validation", "", f"Device: {results['rig']}", "",
             f"Total time: {_f(results.get('total_s'), '.0f')} s", ""]
    sections = results["sections"]
    for name, body in sections.items():
        if "skipped" in body or "error" in body:
            lines += [f"## {name}", "", f"**{body.get('skipped') or body.get('error')}**", ""]
    renderers = {"repeat": ("rows", _repeat), "window": ("cases", _window), "square": ("counter", _square),
                 "sampler": ("throughput", _sampler)}
    for name, (key, render) in renderers.items():
        if key in sections.get(name, {}):
            lines += render(sections[name])
    trace = sections.get("trace", {})
    if "schedule" in trace:
        lines += ["## Recorded trace", "", f"{trace['file']}: {trace['readings']} readings over "
                  f"{_f(trace['duration_s'], '.0f')} s; phases in trace_schedule.json.", ""]
    return "\n".join(lines)
