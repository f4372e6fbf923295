"""Running policies on fixed seeds and summarising them: mean and 95% t-interval per metric.

A policy is anything with `name`, `reset(env)` and `act(obs, info) -> action`; baselines, the PPO
wrapper and static settings all are. Every number here comes out of `ServingEnv` episodes: the
simulator's measured cost fit with the modelled cap/clock effect (docs/runtime.md).

SLA attainment: the share of an episode's requests whose TTFT and E2E are both within the `sla`
limits (`ttft_p95_s`, `e2e_p95_s`); `sla_met` (p95 of both within the limits) is what the static
searches require on every seed.

Non-goals: no training here; no tables or plotting (warpk.runtime.arms.tables).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np

from warpk.config import RunConfig
from warpk.runtime.control.seeds import episode_seeds
from warpk.runtime.serving.env import EpisodeResult, ServingEnv
from warpk.stats import t_interval

METRICS = ("energy_per_request_j", "ttft_p95_s", "e2e_p95_s", "sla_attainment", "throughput_rps")


class Policy(Protocol):
    name: str

    def reset(self, env: ServingEnv) -> None: ...

    def act(self, obs: np.ndarray, info: dict) -> np.ndarray: ...


def evaluation_seeds(config: RunConfig) -> list[int]:
    """The episodes every policy is evaluated on (warpk.runtime.control.seeds): the
    runtime.selection.eval_seeds held-out ones, never trained, tuned or selected on; with
    runtime.selection.evaluate_on=tuning the tuning ones instead (a sweep of PPO's hyper-parameters
    picks on those, so the held-out episodes stay unseen until the claim); with =validation the
    old held-out set."""
    if config.runtime.selection.evaluate_on == "tuning":
        return tuning_seeds_of(config)
    selection = config.runtime.selection
    if selection.evaluate_on == "validation":
        return episode_seeds("validation", config.seed, selection.eval_seeds)
    return episode_seeds("heldout", config.seed, selection.eval_seeds, selection.heldout_offset)


def tuning_seeds_of(config: RunConfig) -> list[int]:
    """The runtime.selection.tuning_seeds episodes the baselines' sweeps may look at."""
    return episode_seeds("tuning", config.seed, config.runtime.selection.tuning_seeds)


def run_episode(env: ServingEnv, policy: Policy, seed: int, on_step=None) -> EpisodeResult:
    """One episode on `seed`; `on_step(setting)` is called with each action's setting (actuators)."""
    obs, info = env.reset(seed=seed)
    policy.reset(env)
    while True:
        action = policy.act(obs, info)
        if on_step is not None:
            on_step(env.setting(action))
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return env.result(seed)


def evaluate(env: ServingEnv, policy: Policy, seeds: list[int], on_step=None) -> list[EpisodeResult]:
    return [run_episode(env, policy, s, on_step) for s in seeds]


def mean_ci95(values: list[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% Student-t interval, warpk.stats.t_interval); the half-width is
    nan for one value."""
    t = t_interval([float(v) for v in values], 0.95)
    if t.estimate is None:
        return math.nan, math.nan
    return t.estimate, math.nan if t.high is None else t.high - t.estimate


@dataclass(frozen=True)
class PolicySummary:
    """One policy on the evaluation seeds: mean and 95% CI half-width of every metric."""

    policy: str
    setting: str  # the static setting, or how the policy decides
    n_seeds: int
    energy_per_request_j: float
    energy_per_request_j_ci95: float
    ttft_p95_s: float
    ttft_p95_s_ci95: float
    e2e_p95_s: float
    e2e_p95_s_ci95: float
    sla_attainment: float
    sla_attainment_ci95: float
    throughput_rps: float
    throughput_rps_ci95: float
    sla_met_seeds: int  # seeds on which TTFT p95 and E2E p95 were both within the limits

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(policy: str, setting: str, results: list[EpisodeResult]) -> PolicySummary:
    values = {}
    for m in METRICS:
        mean, half = mean_ci95([getattr(r, m) for r in results])
        values[m], values[f"{m}_ci95"] = mean, half
    return PolicySummary(
        policy, setting, len(results), **values, sla_met_seeds=sum(r.sla_met for r in results)
    )


STATICS = ("static max", "best static cap", "oracle static")


PPO_NAME = "M4 PPO"  # the run's own training seed; more seeds are named by train_seed_name


def train_seed_name(seed: int, first: int) -> str:
    """The policy name of the PPO model trained with `seed` in a run whose own seed is `first`."""
    return PPO_NAME if seed == first else f"{PPO_NAME} (train seed {seed})"


# The goal (issue: runtime control a reviewer would accept), stated before the runs that test it.
GOAL_SAVING = 0.10  # where a static setting meets the SLA: this much less energy than the cheapest
INFEASIBLE_ATTAINMENT_MARGIN = 0.005  # where none does: attainment at most this below static max's
GOAL_RULES = {
    "feasible": ">= 10% less energy per request than the cheapest static setting meeting the SLA, "
                "at attainment >= its",
    "infeasible": "no static setting meets the SLA: attainment >= static max's - 0.005 at energy per "
                  "request <= 0.90 x static max's",
}


def verdict(
    summaries: list[PolicySummary], per_seed: dict[str, list[EpisodeResult]], ppo_name: str = PPO_NAME
) -> dict:
    """A PPO policy against the static baselines, by the goal (GOAL_RULES, the one home of it):
    where some static setting meets the SLA on every seed, against the cheapest of them (>= 10%
    less energy per request at attainment >= its); where none does, against static max
    (attainment >= static max's - 0.005, energy per request <= 0.90 x its). Also the saving by
    means and paired by seed (same traces: mean and 95% t-interval) and the attainment difference."""
    by_name = {s.policy: s for s in summaries}
    ppo = by_name[ppo_name]
    statics = [by_name[n] for n in STATICS if n in by_name]
    meeting = [s for s in statics if s.sla_met_seeds == s.n_seeds]
    if meeting:
        rule, best = "feasible", min(meeting, key=lambda s: s.energy_per_request_j)
    elif "static max" in by_name:
        rule, best = "infeasible", by_name["static max"]
    else:  # no static max among the baselines: the one closest to the SLA stands in for it
        rule, best = "infeasible", max(statics, key=lambda s: (s.sla_attainment, -s.energy_per_request_j))
    out: dict = {"best_static_policy": best.policy, "goal_rule": rule}
    out["ppo_energy_saving_vs_best_static"] = 1.0 - ppo.energy_per_request_j / best.energy_per_request_j
    paired = [
        1.0 - a.energy_per_request_j / b.energy_per_request_j
        for a, b in zip(per_seed[ppo.policy], per_seed[best.policy], strict=True)
    ]
    out["ppo_paired_saving_mean"], out["ppo_paired_saving_ci95"] = mean_ci95(paired)
    out["ppo_sla_attainment_minus_best_static"] = ppo.sla_attainment - best.sla_attainment
    out["ppo_sla_met_seeds"] = ppo.sla_met_seeds
    if rule == "feasible":
        met = (out["ppo_energy_saving_vs_best_static"] >= GOAL_SAVING
               and ppo.sla_attainment >= best.sla_attainment)
    else:
        met = (ppo.sla_attainment >= best.sla_attainment - INFEASIBLE_ATTAINMENT_MARGIN
               and ppo.energy_per_request_j <= (1 - GOAL_SAVING) * best.energy_per_request_j)
    out["ppo_goal_met"] = bool(met)
    return out


def across_train_seeds(verdicts: dict[int, dict]) -> dict:
    """The verdicts of PPO models trained with different seeds (same evaluation episodes), as
    one claim: the saving of the means over training seeds (mean and 95% t-interval), the
    attainment difference likewise, and on how many training seeds the goal was met. The goal
    holds over training seeds only when it holds on every one of them."""
    savings = [v["ppo_energy_saving_vs_best_static"] for v in verdicts.values()]
    attainments = [v["ppo_sla_attainment_minus_best_static"] for v in verdicts.values()]
    out: dict = {"train_seeds": len(verdicts)}
    out["saving_mean"], out["saving_ci95"] = mean_ci95(savings)
    out["attainment_diff_mean"], out["attainment_diff_ci95"] = mean_ci95(attainments)
    out["goal_met_seeds"] = sum(bool(v["ppo_goal_met"]) for v in verdicts.values())
    out["goal_met_all_seeds"] = out["goal_met_seeds"] == len(verdicts)
    return out
