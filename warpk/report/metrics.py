"""Per-task metrics and per-run aggregates, computed from records.jsonl only.

Every value keeps its sources: the run dir and the records.jsonl line numbers (1-based) it was
computed from, so a table cell can name the exact records behind it.

Definitions (one run, one task, over its candidates; `ok` = status ok):
  correct_rate     n_ok / n_candidates
  compile_rate     candidates that loaded (records.COMPILED) / n_candidates
  fast_1           ok and faster beyond noise (records.faster), / n_candidates (fast_p at p=1)
  speedup          geometric mean of ok candidates' speedup (None: no ok candidate)
  energy_ratio     geometric mean of ref_energy_j / energy_j over ok candidates whose energy the
                   report's EnergyPolicy allows (None: none)
  pass@k           unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al. 2021), n candidates,
                   c ok; defined for k <= n
Per-run aggregates are `warpk.records.summarize` over the run's records (the evaluator's own
definitions) plus the suite mean of pass@k.

Non-goals: no statistics across runs (stats.py), no rendering.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from warpk.records import COMPILED, EvalRecord, faster, geometric_mean, summarize
from warpk.report.energy import EnergyPolicy
from warpk.report.runs import Run

TASK_METRICS = ("correct_rate", "compile_rate", "fast_1", "speedup", "energy_ratio")
RUN_METRICS = ("correct_rate", "compile_rate", "fast_1", "geomean_speedup", "energy_ratio", "pass_at_1")


@dataclass(frozen=True)
class TaskMetrics:
    """One task in one run."""

    run: str  # run dir
    arm: str
    seed: int
    task_id: str
    n_candidates: int
    n_ok: int
    correct_rate: float
    compile_rate: float
    fast_1: float
    speedup: float | None
    energy_ratio: float | None
    lines: tuple[int, ...] = field(repr=False)  # records.jsonl lines of this task's candidates


@dataclass(frozen=True)
class RunMetrics:
    """One run, over all its tasks."""

    run: str
    arm: str
    seed: int
    turns: int
    n_tasks: int
    n_candidates: int
    correct_rate: float | None
    compile_rate: float | None
    fast_1: float | None
    geomean_speedup: float | None
    energy_ratio: float | None
    pass_at_1: float | None
    lines: tuple[int, ...] = field(repr=False)


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Probability that at least one of k of the n candidates (c of them correct) is correct."""
    if k > n or n == 0:
        return None
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def energy_ratio(records: list[EvalRecord], policy: EnergyPolicy) -> float | None:
    return geometric_mean([r.ref_energy_j / r.energy_j for r in records if policy.usable(r)])


def task_metrics(run: Run, policy: EnergyPolicy) -> list[TaskMetrics]:
    """One row per task of `run`, in order of first appearance in records.jsonl."""
    by_task: dict[str, list[int]] = {}
    for line, record in enumerate(run.records, 1):
        by_task.setdefault(record.task_id, []).append(line)
    rows = []
    for task_id, lines in by_task.items():
        records = [run.records[i - 1] for i in lines]
        ok = [r for r in records if r.status == "ok"]
        n = len(records)
        rows.append(
            TaskMetrics(
                run=str(run.path),
                arm=run.arm,
                seed=run.seed,
                task_id=task_id,
                n_candidates=n,
                n_ok=len(ok),
                correct_rate=len(ok) / n,
                compile_rate=sum(r.status in COMPILED for r in records) / n,
                fast_1=sum(1 for r in ok if faster(r)) / n,
                speedup=geometric_mean([r.speedup for r in ok if r.speedup]),
                energy_ratio=energy_ratio(ok, policy),
                lines=tuple(lines),
            )
        )
    return rows


def run_metrics(run: Run, policy: EnergyPolicy, tasks: list[TaskMetrics]) -> RunMetrics:
    """Aggregates of one run (its `tasks` rows give pass@1)."""
    summary = summarize(list(run.records))
    passes = [pass_at_k(t.n_candidates, t.n_ok, 1) for t in tasks]
    return RunMetrics(
        run=str(run.path),
        arm=run.arm,
        seed=run.seed,
        turns=int(run.config.get("model", {}).get("turns", 1)),
        n_tasks=len(tasks),
        n_candidates=len(run.records),
        correct_rate=summary["correct_rate"],
        compile_rate=summary["compile_rate"],
        fast_1=summary["fast_1"],
        geomean_speedup=summary["geomean_speedup"],
        energy_ratio=energy_ratio(list(run.records), policy),
        pass_at_1=sum(passes) / len(passes) if passes else None,
        lines=tuple(range(1, len(run.records) + 1)),
    )


def arm_task_means(
    rows: list[TaskMetrics], metric: str
) -> dict[str, dict[str, tuple[float, list[TaskMetrics]]]]:
    """arm -> task -> (mean of `metric` over that arm's runs, the rows behind it); Nones left out."""
    grouped: dict[str, dict[str, list[TaskMetrics]]] = {}
    for row in rows:
        if getattr(row, metric) is not None:
            grouped.setdefault(row.arm, {}).setdefault(row.task_id, []).append(row)
    out: dict[str, dict[str, tuple[float, list[TaskMetrics]]]] = {}
    for arm, tasks in grouped.items():
        out[arm] = {}
        for task, group in tasks.items():
            values = [getattr(r, metric) for r in group]
            # ratios average on the log scale, rates arithmetically
            mean = (
                math.exp(sum(math.log(v) for v in values) / len(values))
                if metric in ("speedup", "energy_ratio")
                else sum(values) / len(values)
            )
            out[arm][task] = (mean, group)
    return out
