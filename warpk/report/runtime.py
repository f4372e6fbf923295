"""Runtime-control runs (stage=runtime, M4): policies x SLA regimes from runtime_results.jsonl.

stage=runtime writes one line per (policy, held-out episode seed) and one summary line per
policy; the report reads the episode lines only and recomputes everything:

    runtime_policies   arm x regime (sla.name) x policy: energy per request (mean over the
                       arm's runs, t-interval over runs), SLA attainment, TTFT and E2E p95
    runtime_tests      PPO vs every other policy, energy per request paired by (run, episode
                       seed): Wilcoxon signed-rank, rank-biserial r, Holm over the table

All of it is SIMULATED (a measured cost fit with modelled power-cap/clock effects,
docs/runtime.md); a run whose calibration was a test fixture is labelled FIXTURE.

Non-goals: no simulation; the summary lines of the file are not used (recomputed here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warpk import stats
from warpk.config import ReportConfig
from warpk.report.runs import Run
from warpk.tables import Table, num, text

RESULTS_FILE = "runtime_results.jsonl"
PPO = "M4 PPO"  # the learned policy's name in runtime_results.jsonl (warpk.runtime.control.ppo)


@dataclass(frozen=True)
class Episode:
    run: str
    arm: str
    regime: str
    policy: str
    seed: int  # the held-out episode seed
    line: int  # in runtime_results.jsonl, 1-based
    energy_per_request_j: float
    sla_attainment: float
    ttft_p95_s: float
    e2e_p95_s: float

    @property
    def source(self) -> tuple[str, int]:
        return (f"{self.run}/{RESULTS_FILE}", self.line)


def episodes(runs: list[Run]) -> list[Episode]:
    out = []
    for run in runs:
        regime = str(run.config.get("sla", {}).get("name", "?"))
        for line, row in enumerate(run.runtime_results, 1):
            if row.get("summary"):
                continue
            out.append(
                Episode(
                    str(run.path),
                    run.arm,
                    regime,
                    row["policy"],
                    int(row["seed"]),
                    line,
                    float(row["energy_per_request_j"]),
                    float(row["sla_attainment"]),
                    float(row["ttft_p95_s"]),
                    float(row["e2e_p95_s"]),
                )
            )
    return out


def label(runs: list[Run]) -> str:
    fixture = any(
        r.config.get("runtime", {}).get("allow_fixture_calibration") for r in runs if r.runtime_results
    )
    base = "SIMULATED: measured cost fit with MODELLED power-cap/clock effects (docs/runtime.md)."
    return base + (
        " Some runs used a FIXTURE calibration (tests only), not a measurement." if fixture else ""
    )


def groups(eps: list[Episode]) -> dict[tuple[str, str, str], list[Episode]]:
    out: dict[tuple[str, str, str], list[Episode]] = {}
    for e in eps:
        out.setdefault((e.arm, e.regime, e.policy), []).append(e)
    return out


def run_means(group: list[Episode], metric: str) -> list[float]:
    """One value per run: the mean of `metric` over that run's evaluation episodes."""
    by_run: dict[str, list[float]] = {}
    for e in group:
        by_run.setdefault(e.run, []).append(getattr(e, metric))
    return [float(np.mean(v)) for _, v in sorted(by_run.items())]


def tables(runs: list[Run], cfg: ReportConfig) -> list[Table]:
    eps = episodes(runs)
    if not eps:
        return []
    note = label(runs)
    policies = Table(
        "runtime_policies",
        f"Runtime control per SLA regime: energy per request, {cfg.confidence:.0%} t-interval over runs",
        [
            "arm",
            "regime",
            "policy",
            "runs",
            "episodes",
            "energy/request J (simulated)",
            "t low",
            "t high",
            "SLA attainment",
            "TTFT p95 s",
            "E2E p95 s",
        ],
        notes=[note],
    )
    for (arm, regime, policy), group in sorted(groups(eps).items()):
        src = [e.source for e in group]
        t = stats.t_interval(run_means(group, "energy_per_request_j"), cfg.confidence)
        policies.add(
            text(arm),
            text(regime),
            text(policy),
            num(t.n, src, "d"),
            num(len(group), src, "d"),
            num(t.estimate, src, ".1f"),
            num(t.low, src, ".1f"),
            num(t.high, src, ".1f"),
            num(np.mean([e.sla_attainment for e in group]), src),
            num(np.mean([e.ttft_p95_s for e in group]), src),
            num(np.mean([e.e2e_p95_s for e in group]), src, ".2f"),
        )
    return [policies, _tests(eps, cfg, note)]


def _tests(eps: list[Episode], cfg: ReportConfig, note: str) -> Table:
    found = groups(eps)
    tests = []
    for (arm, regime, policy), group in sorted(found.items()):
        ppo = found.get((arm, regime, PPO))
        if policy == PPO or not ppo:
            continue
        theirs = {(e.run, e.seed): e for e in group}
        pairs = [(e, theirs[(e.run, e.seed)]) for e in ppo if (e.run, e.seed) in theirs]
        test = stats.wilcoxon(
            [a.energy_per_request_j for a, _ in pairs], [b.energy_per_request_j for _, b in pairs]
        )
        tests.append((arm, regime, policy, test, [s for a, b in pairs for s in (a.source, b.source)]))
    adjusted = stats.holm([t.p_value for *_, t, _ in tests])
    limit = stats.unreachable([t for *_, t, _ in tests], cfg.alpha)
    table = Table(
        "runtime_tests",
        "PPO vs each policy: energy per request paired by (run, episode seed), Wilcoxon signed-rank, "
        f"Holm over the {sum(t.p_value is not None for *_, t, _ in tests)} tests with a p-value"
        + (f". {limit}" if limit else ""),
        [
            "arm",
            "regime",
            "vs policy",
            "pairs",
            "median diff J",
            "p",
            "min p",
            "p (Holm)",
            "rank-biserial r",
            f"p (Holm) < {cfg.alpha:g}",
        ],
        notes=[note, "diff = PPO - policy; r < 0: PPO tends to use less energy per request."],
    )
    for (arm, regime, policy, t, src), p_holm in zip(tests, adjusted, strict=True):
        verdict = (
            "yes" if p_holm is not None and p_holm < cfg.alpha else ("no" if p_holm is not None else t.reason)
        )
        table.add(
            text(arm),
            text(regime),
            text(policy),
            num(t.n_pairs, src, "d"),
            num(t.median_diff, src, ".4g"),
            num(t.p_value, src, ".3g"),
            num(t.min_p, src, ".3g"),
            num(p_holm, src, ".3g"),
            num(t.rank_biserial, src),
            text(verdict or "-"),
        )
    return table
