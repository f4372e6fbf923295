"""The paper's breakdown tables (docs/reports.md, "Paper artifacts"), from the same rows as the rest:

    per_level             arm x task suite (bundled, KernelBench L1/L2/L3, ...): correct rate and
                          fast_1 per run, as a mean over seeds with a t-interval; speedup and
                          energy ratio as geometric means over the suite's tasks
    seed_robustness       arm x metric: every seed's value, mean, sd, coefficient of variation,
                          min, max and the t-interval's half-width
    measured_vs_modelled  the same candidate (task, source sha256) evaluated with measured energy
                          in one run and modelled energy in another: per task, the median energy
                          of each and their ratio; overall, the geometric-mean ratio and the rank
                          correlation of the energy ratios (does the model order candidates as
                          the meter does?). Only where both kinds are in the report, which needs
                          report.allow_modelled_energy_compare=true

Non-goals: no new statistics (stats.py), no figures (figures.py), no file writing.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from scipy import stats as sps

from warpk import stats
from warpk.config import ReportConfig
from warpk.records import geometric_mean
from warpk.report.energy import MEASURED, EnergyPolicy
from warpk.report.metrics import RunMetrics, TaskMetrics, arm_task_means
from warpk.report.runs import Run
from warpk.tables import Table, num, text

ROBUST_METRICS = (
    ("correct_rate", "correct rate"),
    ("fast_1", "fast_1"),
    ("geomean_speedup", "speedup (geomean)"),
    ("energy_ratio", "energy ratio ref/cand (geomean)"),
    ("pass_at_1", "pass@1"),
)


def suite_of(task_id: str) -> str:
    """'kernelbench/L2/19_x' -> 'kernelbench/L2'; 'bundled/01_softmax' -> 'bundled'."""
    parts = task_id.split("/")
    if parts[0] == "kernelbench" and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def _sources(rows: list[TaskMetrics]) -> list[tuple[str, int]]:
    return [(r.run, line) for r in rows for line in r.lines] or [(r.run, 0) for r in rows]


def _geomean_over_tasks(rows: list[TaskMetrics], metric: str, arm: str) -> tuple[float | None, list]:
    means = arm_task_means(rows, metric).get(arm, {})
    values = [v for v, _ in means.values() if v]
    found = [row for _, group in means.values() for row in group]
    return geometric_mean(values), found if values else []


def per_level(rows: list[TaskMetrics], arms: list[str], policy: EnergyPolicy, cfg: ReportConfig,
              note: str) -> Table:
    pct = f"{cfg.confidence:.0%}"
    energy = "energy ratio" + ("" if policy.label in ("measured", "none") else f" ({policy.label})")
    table = Table(
        "per_level",
        f"Per task suite (KernelBench level): rates per run, mean over seeds with a {pct} "
        "t-interval; speedup and energy ratio as geometric means over the suite's tasks",
        ["arm", "suite", "tasks", "runs", "candidates", "correct rate", "t low", "t high", "fast_1",
         "speedup (geomean)", energy],
        notes=[note],
    )
    for arm in arms:
        for suite in sorted({suite_of(r.task_id) for r in rows if r.arm == arm}):
            mine = [r for r in rows if r.arm == arm and suite_of(r.task_id) == suite]
            by_run: dict[str, list[TaskMetrics]] = defaultdict(list)
            for r in mine:
                by_run[r.run].append(r)
            correct, fast = [], []
            for group in by_run.values():
                n = sum(r.n_candidates for r in group)
                correct.append(sum(r.n_ok for r in group) / n if n else None)
                fast.append(sum(r.fast_1 * r.n_candidates for r in group) / n if n else None)
            correct = [c for c in correct if c is not None]
            t = stats.t_interval(correct, cfg.confidence)
            speedup, speedup_rows = _geomean_over_tasks(mine, "speedup", arm)
            ratio, ratio_rows = _geomean_over_tasks(mine, "energy_ratio", arm)
            src = _sources(mine)
            table.add(
                text(arm),
                text(suite),
                num(len({r.task_id for r in mine}), src, "d"),
                num(len(by_run), src, "d"),
                num(sum(r.n_candidates for r in mine), src, "d"),
                num(t.estimate, src),
                num(t.low, src),
                num(t.high, src),
                num(statistics.fmean(f for f in fast if f is not None) if fast else None, src),
                num(speedup, _sources(speedup_rows)),
                num(ratio, _sources(ratio_rows)),
            )
    return table


def seed_robustness(rows: list[RunMetrics], arms: list[str], cfg: ReportConfig, note: str) -> Table:
    pct = f"{cfg.confidence:.0%}"
    table = Table(
        "seed_robustness",
        f"Seed robustness: each seed's value, its spread, and the {pct} t-interval over seeds",
        ["arm", "metric", "seeds", "values by seed", "mean", "sd", "CV", "min", "max", "t low", "t high"],
        notes=[note, "sd and CV (= sd / arithmetic mean) are of the values by seed as shown. Speedup "
               "and energy ratio: mean and interval on the log scale, shown back as geometric (as in "
               "the summary table). One seed: no interval."],
    )
    for arm in arms:
        for metric, label in ROBUST_METRICS:
            runs = sorted((r for r in rows if r.arm == arm and getattr(r, metric) is not None),
                          key=lambda r: r.seed)
            if not runs:
                continue
            values = [getattr(r, metric) for r in runs]
            src = [(r.run, line) for r in runs for line in r.lines] or [(r.run, 0) for r in runs]
            sd = statistics.stdev(values) if len(values) > 1 else None
            ratio = metric in ("geomean_speedup", "energy_ratio")
            interval = stats.geometric_t_interval if ratio else stats.t_interval
            t = interval(values, cfg.confidence)
            mean, low, high = t.estimate, t.low, t.high
            table.add(
                text(arm),
                text(label),
                num(len(values), src, "d"),
                text(", ".join(f"{r.seed}: {v:.3f}" for r, v in zip(runs, values, strict=True))),
                num(mean, src),
                num(sd, src),
                num(sd / statistics.fmean(values) if sd is not None and any(values) else None, src),
                num(min(values), src),
                num(max(values), src),
                num(low, src),
                num(high, src),
            )
    return table


@dataclass(frozen=True)
class EnergyPair:
    """One candidate evaluated with measured energy and with modelled energy (medians over each
    side's ok records of the same task and source sha256)."""

    task_id: str
    measured_j: float
    modelled_j: float
    measured_ratio: float | None  # ref_energy_j / energy_j, measured
    modelled_ratio: float | None
    source: tuple[tuple[str, int], ...]


def energy_pairs(runs: list[Run]) -> list[EnergyPair]:
    sides: dict[tuple[str, str], dict[str, list]] = defaultdict(lambda: {"measured": [], "model": []})
    for run in runs:
        for line, r in enumerate(run.records, start=1):
            if r.status != "ok" or not r.energy_j:
                continue
            side = "measured" if r.energy_source in MEASURED else r.energy_source
            if side in ("measured", "model"):
                ratio = r.ref_energy_j / r.energy_j if r.ref_energy_j else None
                sides[(r.task_id, r.candidate_sha)][side].append((r.energy_j, ratio, str(run.path), line))
    pairs = []
    for (task, _), side in sorted(sides.items()):
        if not (side["measured"] and side["model"]):
            continue
        ratios = {k: [x[1] for x in v if x[1]] for k, v in side.items()}
        pairs.append(EnergyPair(
            task,
            statistics.median(x[0] for x in side["measured"]),
            statistics.median(x[0] for x in side["model"]),
            statistics.median(ratios["measured"]) if ratios["measured"] else None,
            statistics.median(ratios["model"]) if ratios["model"] else None,
            tuple((x[2], x[3]) for v in side.values() for x in v),
        ))
    return pairs


def _spearman(pairs: list[EnergyPair]) -> float | None:
    """Rank correlation of the measured and modelled energy ratios (ref/cand); None below 3."""
    both = [(p.measured_ratio, p.modelled_ratio) for p in pairs if p.measured_ratio and p.modelled_ratio]
    if len(both) < 3:
        return None
    rho = sps.spearmanr([m for m, _ in both], [m for _, m in both]).statistic
    return None if math.isnan(rho) else float(rho)


def measured_vs_modelled(runs: list[Run], policy: EnergyPolicy) -> Table | None:
    """None unless the report holds measured and modelled energy (the allow flag)."""
    if policy.label != "measured+modelled":
        return None
    pairs = energy_pairs(runs)
    table = Table(
        "measured_vs_modelled",
        "Measured vs MODELLED energy of the same candidates (same task and source, evaluated each way)",
        ["task", "candidates", "median measured energy_j", "median modelled energy_j",
         "modelled / measured (geomean)", "Spearman rho of ref/cand ratios"],
        notes=["Modelled = the hardware profile's power model x measured runtime. rho: do the "
               "modelled energy ratios order the candidates as the measured ones do (1 = exactly; "
               "'-' below 3 candidates). The last row pools every candidate."],
    )
    groups = [(task.split("/", 1)[-1], [p for p in pairs if p.task_id == task])
              for task in sorted({p.task_id for p in pairs})]
    if pairs:
        groups.append(("all", pairs))
    for label, mine in groups:
        src = [s for p in mine for s in p.source]
        ratio = math.exp(statistics.fmean(math.log(p.modelled_j / p.measured_j) for p in mine))
        table.add(text(label), num(len(mine), src, "d"),
                  num(statistics.median(p.measured_j for p in mine), src, ".4g"),
                  num(statistics.median(p.modelled_j for p in mine), src, ".4g"),
                  num(ratio, src), num(_spearman(mine), src))
    return table
