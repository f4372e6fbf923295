"""The report's numbers: from loaded runs to tables (each cell with its sources).

    per_seed        one row per run: the run's aggregates (metrics.RunMetrics)
    per_task        arm x task: means over the arm's seeds (the values the paired tests use)
    summary         arm x metric: mean over seeds with a t-interval, mean over tasks with a
                    bootstrap interval (ratios on the log scale, shown back as geometric means)
    per_level, seed_robustness, measured_vs_modelled    warpk.report.breakdowns
    comparisons     each arm vs the baseline arm, per metric, paired by task: Wilcoxon
                    signed-rank, rank-biserial effect size, Holm-adjusted p over every test here;
                    plus the matched-runtime energy test
    matched_runtime pairs within report.matched_runtime_tolerance, energy compared
    failure_taxonomy status x error category per arm
    runtime_*       runtime-control runs (warpk.report.runtime), when there are any

Non-goals: no file writing and no figures (warpk.stages.report does both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from warpk import stats
from warpk.config import ReportConfig
from warpk.report import breakdowns, runtime
from warpk.report.energy import EnergyPolicy, MatchedPair, matched_pairs
from warpk.report.failures import FailureRow, taxonomy
from warpk.report.metrics import RunMetrics, TaskMetrics, arm_task_means, run_metrics, task_metrics
from warpk.report.runs import REFERENCE_ARM, ReportError, Run
from warpk.tables import Cell, Table, num, text

LOG_SCALE = ("speedup", "geomean_speedup", "energy_ratio")
# (per-run metric, per-task metric, label)
COMPARED = (
    ("correct_rate", "correct_rate", "correct rate"),
    ("fast_1", "fast_1", "fast_1"),
    ("geomean_speedup", "speedup", "speedup (geomean)"),
    ("energy_ratio", "energy_ratio", "energy ratio ref/cand (geomean)"),
)


@dataclass
class Analysis:
    arms: list[str]
    baseline: str
    task_rows: list[TaskMetrics]
    run_rows: list[RunMetrics]
    pairs: list[MatchedPair]
    failures: list[FailureRow]
    tables: list[Table]
    n_tests: int
    n_significant: int


def _energy_note(policy: EnergyPolicy) -> str:
    if policy.label == "modelled":
        return "Energy is MODELLED (hardware power model x measured runtime), not measured."
    if policy.label == "measured+modelled":
        return "Energy mixes measured and MODELLED figures (report.allow_modelled_energy_compare=true)."
    if policy.label == "none":
        return "No energy was measured in these runs."
    return "Energy is measured on the device (" + "+".join(policy.sources) + ")."


def _label(metric: str, policy: EnergyPolicy) -> str:
    if "energy" in metric and policy.label not in ("measured", "none"):
        return f"{metric} ({policy.label})"
    return metric


def _run_src(rows) -> list[tuple[str, int]]:
    return [(r.run, line) for r in rows for line in r.lines]


def _log(values: list[float], metric: str) -> list[float]:
    return [math.log(v) for v in values] if metric in LOG_SCALE else values


def _back(interval: stats.Interval, metric: str) -> tuple[float | None, float | None, float | None]:
    values = (interval.estimate, interval.low, interval.high)
    if metric in LOG_SCALE:
        return tuple(None if v is None else math.exp(v) for v in values)  # type: ignore[return-value]
    return values


def analyse(runs: list[Run], policy: EnergyPolicy, cfg: ReportConfig, seed: int) -> Analysis:
    """Kernel tables over the runs with records.jsonl, runtime tables over those with
    runtime_results.jsonl (warpk.report.runtime)."""
    runtime_tables = runtime.tables(runs, cfg)
    runs = [run for run in runs if run.records]
    arms = sorted({run.arm for run in runs})
    if not runs:
        return Analysis([], "", [], [], [], [], runtime_tables, 0, 0)
    baseline = cfg.baseline_arm or (REFERENCE_ARM if REFERENCE_ARM in arms else arms[0])
    if baseline not in arms:
        raise ReportError(
            f"report.baseline_arm={baseline!r} is not an arm of these runs; allowed: {', '.join(arms)}"
        )
    task_rows = [row for run in runs for row in task_metrics(run, policy)]
    run_rows = [run_metrics(run, policy, [t for t in task_rows if t.run == str(run.path)]) for run in runs]
    note = _energy_note(policy)
    alike = sorted({run.arm for run in runs if run.summary.get("reward_energy_measured") is False})
    if alike:
        note += (f" Arm{'s' if len(alike) > 1 else ''} {', '.join(alike)} trained without measured energy "
                 "(the reward's energy terms were None), so trained like M1: differences from M1 are "
                 "seed noise, not energy-awareness.")
    tables = [_per_seed(run_rows, policy, note)]
    tables.append(_per_task(task_rows, arms, policy, note))
    tables.append(_summary(run_rows, task_rows, arms, policy, cfg, seed, note))
    tables.append(breakdowns.per_level(task_rows, arms, policy, cfg, note))
    tables.append(breakdowns.seed_robustness(run_rows, arms, cfg, note))
    measured_vs_modelled = breakdowns.measured_vs_modelled(runs, policy)
    tables += [measured_vs_modelled] if measured_vs_modelled else []
    pairs = [
        p
        for arm in arms
        if arm != baseline and policy.label != "none"
        for p in matched_pairs(
            [r for r in runs if r.arm == arm],
            [r for r in runs if r.arm == baseline],
            policy,
            cfg.matched_runtime_tolerance,
        )
    ]
    comparisons, n_tests, n_sig = _comparisons(task_rows, pairs, arms, baseline, policy, cfg, note)
    tables += [comparisons, _matched(pairs, arms, baseline, policy, cfg, note)]
    failures = taxonomy(runs)
    tables.append(_failures(failures))
    return Analysis(
        arms, baseline, task_rows, run_rows, pairs, failures, tables + runtime_tables, n_tests, n_sig
    )


def _per_seed(rows: list[RunMetrics], policy: EnergyPolicy, note: str) -> Table:
    table = Table(
        "per_seed",
        "Per run (one seed of one arm)",
        [
            "arm",
            "seed",
            "run",
            "tasks",
            "candidates",
            "compile rate",
            "correct rate",
            "fast_1",
            "speedup (geomean)",
            _label("energy ratio", policy),
            "pass@1",
        ],
        notes=[note],
    )
    for r in sorted(rows, key=lambda r: (r.arm, r.seed, r.run)):
        src = _run_src([r]) or [(r.run, 0)]
        table.add(
            text(r.arm),
            num(r.seed, [(r.run, 0)], "d"),
            text(r.run.rsplit("/", 2)[-2] + "/" + r.run.rsplit("/", 1)[-1]),
            num(r.n_tasks, src, "d"),
            num(r.n_candidates, src, "d"),
            num(r.compile_rate, src),
            num(r.correct_rate, src),
            num(r.fast_1, src),
            num(r.geomean_speedup, src),
            num(r.energy_ratio, src),
            num(r.pass_at_1, src),
        )
    return table


def _per_task(rows: list[TaskMetrics], arms: list[str], policy: EnergyPolicy, note: str) -> Table:
    table = Table(
        "per_task",
        "Per task and arm (means over the arm's seeds; ratios as geometric means)",
        ["arm", "task", "seeds", "correct rate", "fast_1", "speedup", _label("energy ratio", policy)],
        notes=[note],
    )
    means = {m: arm_task_means(rows, m) for m in ("correct_rate", "fast_1", "speedup", "energy_ratio")}
    tasks = sorted({r.task_id for r in rows})
    for arm in arms:
        for task in tasks:
            group = [r for r in rows if r.arm == arm and r.task_id == task]
            if not group:
                continue
            cells = []
            for m in ("correct_rate", "fast_1", "speedup", "energy_ratio"):
                found = means[m].get(arm, {}).get(task)
                cells.append(num(found[0], _run_src(found[1])) if found else Cell("-"))
            table.add(
                text(arm),
                text(task.split("/", 1)[-1]),
                num(len({r.seed for r in group}), _run_src(group), "d"),
                *cells,
            )
    return table


def _summary(runs, tasks, arms, policy, cfg: ReportConfig, seed: int, note: str) -> Table:
    pct = f"{cfg.confidence:.0%}"
    table = Table(
        "summary",
        f"Summary per arm: {pct} t-interval over seeds, {pct} bootstrap interval over tasks",
        [
            "arm",
            "metric",
            "seeds",
            "mean over seeds",
            "t low",
            "t high",
            "tasks",
            "mean over tasks",
            "bootstrap low",
            "bootstrap high",
        ],
        notes=[
            note,
            f"Bootstrap: {cfg.bootstrap_samples} resamples of tasks ({cfg.bootstrap_method}), "
            "speedup and energy ratio on the log scale (geometric means).",
        ],
    )
    for arm in arms:
        for run_metric, task_metric, label in COMPARED:
            per_run = [r for r in runs if r.arm == arm and getattr(r, run_metric) is not None]
            t = stats.t_interval(_log([getattr(r, run_metric) for r in per_run], run_metric), cfg.confidence)
            per_task = arm_task_means(tasks, task_metric).get(arm, {})
            values = [v for v, _ in per_task.values()]
            b = stats.bootstrap_ci(
                _log(values, task_metric), cfg.confidence, cfg.bootstrap_samples, seed, cfg.bootstrap_method
            )
            run_src = _run_src(per_run)
            task_src = _run_src([row for _, group in per_task.values() for row in group])
            table.add(
                text(arm),
                text(_label(label, policy)),
                num(len({r.seed for r in per_run}) or None, run_src, "d"),
                *(num(v, run_src) for v in _back(t, run_metric)),
                num(len(values) or None, task_src, "d"),
                *(num(v, task_src) for v in _back(b, task_metric)),
            )
    return table


def _comparisons(tasks, pairs, arms, baseline, policy, cfg: ReportConfig, note: str):
    tests = []  # (arm, label, PairedTest, sources)
    for arm in arms:
        if arm == baseline:
            continue
        for _, metric, label in COMPARED:
            means = arm_task_means(tasks, metric)
            mine, theirs = means.get(arm, {}), means.get(baseline, {})
            shared = sorted(set(mine) & set(theirs))
            x = _log([mine[t][0] for t in shared], metric)
            y = _log([theirs[t][0] for t in shared], metric)
            src = _run_src([row for t in shared for row in mine[t][1] + theirs[t][1]])
            tests.append(
                (
                    arm,
                    _label(label, policy) + (" (log)" if metric in LOG_SCALE else ""),
                    stats.wilcoxon(x, y),
                    src,
                    "tasks",
                )
            )
        mine = [p for p in pairs if p.arm == arm]
        if mine:
            test = stats.wilcoxon([p.energy_j for p in mine], [p.baseline_energy_j for p in mine])
            tests.append(
                (
                    arm,
                    _label("energy_j at matched runtime", policy),
                    test,
                    [s for p in mine for s in p.source],
                    "pairs",
                )
            )
    adjusted = stats.holm([t.p_value for _, _, t, _, _ in tests])
    n_tested = sum(t.p_value is not None for _, _, t, _, _ in tests)
    limit = stats.unreachable([t for _, _, t, _, _ in tests], cfg.alpha)
    table = Table(
        "comparisons",
        f"Paired tests vs baseline arm {baseline} "
        f"(Wilcoxon signed-rank, two-sided; Holm over the {n_tested} tests with a p-value)"
        + (f". {limit}" if limit else ""),
        [
            "arm",
            "metric",
            "paired by",
            "pairs",
            "nonzero",
            "median diff",
            "W",
            "p",
            "min p",
            "p (Holm)",
            "rank-biserial r",
            f"p (Holm) < {cfg.alpha:g}",
        ],
        notes=[note, "r > 0: the arm tends to exceed the baseline; diff = arm - baseline. "
               "min p: the smallest p the test can give with its nonzero pairs (2 / 2^n)."],
    )
    n_sig = 0
    for (arm, label, t, src, unit), p_holm in zip(tests, adjusted, strict=True):
        significant = p_holm is not None and p_holm < cfg.alpha
        n_sig += significant
        table.add(
            text(arm),
            text(label),
            text(unit),
            num(t.n_pairs, src, "d"),
            num(t.n_nonzero, src, "d"),
            num(t.median_diff, src, ".4g"),
            num(t.statistic, src, "g"),
            num(t.p_value, src, ".3g"),
            num(t.min_p, src, ".3g"),
            num(p_holm, src, ".3g"),
            num(t.rank_biserial, src),
            text("yes" if significant else ("no" if p_holm is not None else (t.reason or "-"))),
        )
    return table, n_tested, n_sig


def _matched(pairs: list[MatchedPair], arms, baseline, policy, cfg: ReportConfig, note: str) -> Table:
    table = Table(
        "matched_runtime",
        f"Matched runtime (|runtime diff| <= {cfg.matched_runtime_tolerance:.0%} "
        f"of the baseline {baseline}'s): energy compared",
        [
            "arm",
            "pairs",
            "tasks",
            "median runtime diff %",
            _label("median energy diff %", policy),
            "pairs with lower energy",
        ],
        notes=[note],
    )
    for arm in arms:
        mine = [p for p in pairs if p.arm == arm]
        if arm == baseline or not mine:
            continue
        src = [s for p in mine for s in p.source]
        table.add(
            text(arm),
            num(len(mine), src, "d"),
            num(len({p.task_id for p in mine}), src, "d"),
            num(float(np.median([p.runtime_diff for p in mine])) * 100, src, ".2f"),
            num(float(np.median([p.energy_diff for p in mine])) * 100, src, ".2f"),
            num(sum(p.energy_diff < 0 for p in mine) / len(mine), src),
        )
    return table


def _failures(rows: list[FailureRow]) -> Table:
    table = Table(
        "failure_taxonomy",
        "Failure taxonomy: failed candidates by status and error category",
        ["arm", "status", "category", "count", "share of arm's candidates", "example error"],
    )
    for r in rows:
        table.add(
            text(r.arm),
            text(r.status),
            text(r.category),
            num(r.count, r.source, "d"),
            num(r.share, r.source),
            text(r.example),
        )
    return table
