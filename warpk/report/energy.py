"""Energy in reports: which energy figures may be compared, and matched-runtime pairs.

Measured energy (NVML counter or the sampler) and modelled energy (a power model x measured
runtime, `energy_source=model`) are different quantities. A report compares them only when
`report.allow_modelled_energy_compare=true`, and then every energy table and figure says
"modelled". A report of modelled energy alone is allowed and labelled "modelled" too: on a CPU,
modelled energy is power x runtime, so an energy comparison there restates the runtime one.

Matched-runtime analysis (the seed's "same speed, different energy"): on each task, candidates
of an arm and of the baseline arm whose runtimes differ by at most `tolerance` (relative to the
baseline's) are paired one to one, closest first, and their energies compared.

Non-goals: no measurement; records with energy_source=none (not measured) are left out, counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from warpk.records import EvalRecord
from warpk.report.runs import ReportError, Run

MEASURED = ("nvml", "sampler")


@dataclass(frozen=True)
class EnergyPolicy:
    """Which energy sources a report uses and the label every energy figure carries."""

    sources: tuple[str, ...]  # energy_source values used; empty: no energy in the report
    label: str  # "measured" | "modelled" | "measured+modelled" | "none"

    def usable(self, record: EvalRecord) -> bool:
        return (
            record.status == "ok"
            and record.energy_source in self.sources
            and bool(record.energy_j)
            and bool(record.ref_energy_j)
        )


def energy_policy(runs: list[Run], allow_modelled_compare: bool) -> EnergyPolicy:
    """The energy sources found in `runs` and whether they may be put side by side."""
    found = sorted({r.energy_source for run in runs for r in run.records if r.energy_j is not None})
    measured = [s for s in found if s in MEASURED]
    modelled = "model" in found
    if measured and modelled and not allow_modelled_compare:
        with_model = sorted(
            {str(run.path) for run in runs if any(r.energy_source == "model" for r in run.records)}
        )
        raise ReportError(
            f"results mix measured ({'+'.join(measured)}) and modelled energy (e.g. {with_model[0]}); "
            "refusing to compare them: pass report.allow_modelled_energy_compare=true to compare and "
            "label them modelled, or narrow results= to one kind"
        )
    if measured and modelled:
        return EnergyPolicy(tuple(found), "measured+modelled")
    if modelled:
        return EnergyPolicy(("model",), "modelled")
    if measured:
        return EnergyPolicy(tuple(measured), "measured")
    return EnergyPolicy((), "none")


@dataclass(frozen=True)
class MatchedPair:
    """A candidate of `arm` and one of `baseline` on the same task, runtimes within tolerance."""

    task_id: str
    arm: str
    baseline: str
    runtime_ms: float
    baseline_runtime_ms: float
    energy_j: float
    baseline_energy_j: float
    runtime_diff: float  # (runtime - baseline) / baseline
    energy_diff: float  # (energy - baseline) / baseline
    source: tuple[tuple[str, int], ...]  # (run dir, records.jsonl line) of both candidates


def _ok_with_energy(runs: list[Run], policy: EnergyPolicy, task_id: str) -> list[tuple[EvalRecord, str, int]]:
    return [
        (r, str(run.path), line)
        for run in runs
        for line, r in enumerate(run.records, 1)
        if r.task_id == task_id and policy.usable(r) and r.runtime_ms
    ]


def matched_pairs(
    arm_runs: list[Run], base_runs: list[Run], policy: EnergyPolicy, tolerance: float
) -> list[MatchedPair]:
    """One-to-one pairs per task with |runtime - baseline| / baseline <= tolerance, closest first."""
    if not arm_runs or not base_runs:
        return []
    arm, baseline = arm_runs[0].arm, base_runs[0].arm
    tasks = sorted({r.task_id for run in arm_runs for r in run.records})
    pairs: list[MatchedPair] = []
    for task in tasks:
        mine, theirs = _ok_with_energy(arm_runs, policy, task), _ok_with_energy(base_runs, policy, task)
        options = sorted(
            (abs(a.runtime_ms - b.runtime_ms) / b.runtime_ms, i, j)
            for i, (a, _, _) in enumerate(mine)
            for j, (b, _, _) in enumerate(theirs)
        )
        used_a: set[int] = set()
        used_b: set[int] = set()
        for diff, i, j in options:
            if diff > tolerance:
                break
            if i in used_a or j in used_b:
                continue
            used_a.add(i)
            used_b.add(j)
            (a, a_dir, a_line), (b, b_dir, b_line) = mine[i], theirs[j]
            pairs.append(
                MatchedPair(
                    task_id=task,
                    arm=arm,
                    baseline=baseline,
                    runtime_ms=a.runtime_ms,
                    baseline_runtime_ms=b.runtime_ms,
                    energy_j=a.energy_j,
                    baseline_energy_j=b.energy_j,
                    runtime_diff=(a.runtime_ms - b.runtime_ms) / b.runtime_ms,
                    energy_diff=(a.energy_j - b.energy_j) / b.energy_j,
                    source=((a_dir, a_line), (b_dir, b_line)),
                )
            )
    return pairs
