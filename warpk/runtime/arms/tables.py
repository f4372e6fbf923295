"""The tables of the runtime stages' results: the policies' main table and its caption, `mean ±
half` cells, and the verdicts per PPO training seed.

Every number in them comes from warpk.runtime.control.evaluation's summaries of simulated
episodes; the captions say SIMULATED.

Non-goals: no episodes run and no verdict decided here (warpk.runtime.control.evaluation).
"""

from __future__ import annotations

import math

from warpk.runtime.control.evaluation import PolicySummary
from warpk.tables import Cell, Table, num, text


def plus_minus(mean: float, half: float, spec: str) -> str:
    """`mean ± half` in `spec` (the half without a sign); the mean alone when half is nan."""
    return format(mean, spec) + ("" if math.isnan(half) else " ± " + format(half, spec.lstrip("+")))


HEADERS = ["policy", "setting", "J/request", "TTFT p95 s", "E2E p95 s", "SLA attainment", "req/s", "SLA met"]


def pm(mean: float, half: float, spec: str) -> Cell:
    """A `mean ± half` cell whose value is the mean."""
    return Cell(plus_minus(mean, half, spec), None if math.isnan(mean) else float(mean))


def _row(s: PolicySummary) -> tuple[Cell, ...]:
    return (
        text(s.policy),
        text(s.setting),
        pm(s.energy_per_request_j, s.energy_per_request_j_ci95, ".1f"),
        pm(s.ttft_p95_s, s.ttft_p95_s_ci95, ".2f"),
        pm(s.e2e_p95_s, s.e2e_p95_s_ci95, ".1f"),
        pm(s.sla_attainment, s.sla_attainment_ci95, ".3f"),
        pm(s.throughput_rps, s.throughput_rps_ci95, ".2f"),
        Cell(f"{s.sla_met_seeds}/{s.n_seeds}", float(s.sla_met_seeds)),
    )


def caption(sla_name: str, ttft_s: float, e2e_s: float, calibration: str, split: str = "heldout") -> str:
    episodes = {
        "heldout": "held-out seeds",
        "tuning": "TUNING seeds (runtime.selection.evaluate_on=tuning: for choosing hyper-parameters, "
                  "not a result)",
        "validation": "VALIDATION seeds (runtime.selection.evaluate_on=validation: the held-out set until "
                      "2026-12-05, "
                      "looked at by three claims; reproduces old figures, not a new result)",
    }[split]
    return (
        f"sla={sla_name} (TTFT p95 <= {ttft_s:g} s, E2E p95 <= {e2e_s:g} s); mean ± 95% t-interval over "
        f"{episodes}. SIMULATED: measured cost fit ({calibration}) with MODELLED power-cap/clock effects."
    )


def policy_table(summaries: list[PolicySummary], title: str, note: str) -> Table:
    table = Table("runtime_policies", title, HEADERS, notes=[note])
    for s in summaries:
        table.add(*_row(s))
    return table


def train_seeds_table(verdicts: dict[int, dict], overall: dict, n_eval: int, title: str) -> Table:
    """One row per training seed and one over them (the saving and attainment of the means)."""
    table = Table("runtime_train_seeds", title, [
        "PPO training seed", "best static", "saving (means)", "paired saving", "attainment PPO - static",
        "PPO met SLA", "goal"])  # fmt: skip
    for seed, v in verdicts.items():
        table.add(
            text(str(seed)),
            text(v["best_static_policy"]),
            num(v["ppo_energy_saving_vs_best_static"], (), ".1%"),
            pm(v["ppo_paired_saving_mean"], v["ppo_paired_saving_ci95"], ".1%"),
            num(v["ppo_sla_attainment_minus_best_static"], (), "+.3f"),
            Cell(f"{v['ppo_sla_met_seeds']}/{n_eval}", float(v["ppo_sla_met_seeds"])),
            text("met" if v["ppo_goal_met"] else "not met"),
        )
    table.add(
        text(f"over {overall['train_seeds']} (mean ± 95% t)"),
        text(""),
        pm(overall["saving_mean"], overall["saving_ci95"], ".1%"),
        text(""),
        pm(overall["attainment_diff_mean"], overall["attainment_diff_ci95"], "+.3f"),
        text(""),
        text(f"met on {overall['goal_met_seeds']}/{overall['train_seeds']}"),
    )
    return table
