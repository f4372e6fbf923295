"""How much of M4's result rests on the MODELLED clock curve (issue #15 item 2).

The cap/clock effect is modelled, not measured (warpk.runtime.serving.calibration): `runtime.
fixed_power_share` is the share of the dynamic power that does not scale with the SM clock. The
run's trained PPO policy is evaluated again on the held-out seeds with that share at 0, 0.25 and
0.5, against static max and the static baselines re-tuned on each curve (the best cap on the
tuning seeds, the oracle on the evaluation seeds, as in the main table). The policy is not
retrained: the question is whether what it learned still beats the statics if the curve is
wrong, not what it would learn on another curve.

The static grids are the cost (~14 s a curve on one core), so `start_static_grids` runs them in
one worker process while PPO trains; `sensitivity_rows` collects them afterwards.

Non-goals: no retraining per curve; no other modelled constants (e.g. the decode rho).
"""

from __future__ import annotations

import ctypes
import dataclasses
import multiprocessing
import os
import signal
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

from warpk.config import RunConfig
from warpk.runtime.arms.frontier import StaticPoint, points
from warpk.runtime.arms.tables import pm
from warpk.runtime.control import baselines
from warpk.runtime.control.evaluation import evaluate, evaluation_seeds, summarize, tuning_seeds_of, verdict
from warpk.runtime.control.policies import PPOPolicy
from warpk.runtime.serving.calibration import load_calibration
from warpk.runtime.serving.env import ServingEnv, calibration_path, reward_weights
from warpk.tables import Cell, Table, num, text

SHARES = (0.0, 0.25, 0.5)
Action = tuple[int, int, int]


def shares_of(config: RunConfig) -> list[float]:
    """SHARES and the run's own share."""
    return sorted({*SHARES, config.runtime.fixed_power_share})


def env_at(config: RunConfig, share: float) -> ServingEnv:
    rt = dataclasses.replace(config.runtime, fixed_power_share=share)
    cal = load_calibration(calibration_path(config), allow_fixture=rt.allow_fixture_calibration)
    return ServingEnv(rt, config.sla, rt.served, cal, **reward_weights(config))


@dataclass(frozen=True)
class StaticGrid:
    """The static baselines' settings on one curve, and every grid setting's point there (the
    evaluation episodes' means, for warpk.runtime.arms.frontier)."""

    oracle: Action
    cap: Action
    static_points: tuple[StaticPoint, ...]


def static_actions(config: RunConfig, share: float) -> StaticGrid:
    """The oracle static and best static cap settings on the curve with this share, and the grid."""
    env = env_at(config, share)
    oracle, results = baselines.oracle_static(env, evaluation_seeds(config))
    cap = baselines.best_static_cap(env, tuning_seeds_of(config))
    labels = {a: env.setting(a).label for a in results}
    return StaticGrid(oracle.action, cap.action, tuple(points(labels, results)))


def calm_rule(config: RunConfig) -> tuple[int, Action, float]:
    """The best calm rule's (max_running, slow setting, max_age) on the run's own curve, chosen on
    the tuning episodes (warpk.runtime.control.baselines.best_calm_rule)."""
    rule = baselines.best_calm_rule(env_at(config, config.runtime.fixed_power_share), tuning_seeds_of(config))
    return rule.max_running, rule.slow, rule.max_age


def start_static_grids(config: RunConfig) -> tuple[ProcessPoolExecutor, dict[float, Future], Future]:
    """The static settings of every curve and the best calm rule, computed in one spawned worker
    while the caller works."""
    pool = grid_pool()
    grids = {share: pool.submit(static_actions, config, share) for share in shares_of(config)}
    return pool, grids, pool.submit(calm_rule, config)


def grid_pool() -> ProcessPoolExecutor:
    """One spawned worker that ends with this process (`die_with`)."""
    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=die_with, initargs=(os.getpid(),))


PR_SET_PDEATHSIG = 1


def die_with(parent_pid: int) -> None:
    """The grid worker ends when the run's process does, however it ends: a run killed with
    SIGTERM left it computing, then waiting, for 19 minutes (2026-12-07). Linux only; elsewhere
    the worker ends when it next finds its queue closed."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the run ended before the signal was asked for
        os._exit(0)


def sensitivity_rows(config: RunConfig, model, actions: dict[float, StaticGrid]) -> list[dict]:
    """One row per curve: the best static baseline there, PPO against it (warpk.runtime.control.evaluation
    .verdict), and both policies' energy and attainment."""
    rows = []
    seeds = evaluation_seeds(config)
    for share in shares_of(config):
        env = env_at(config, share)
        oracle, cap = actions[share].oracle, actions[share].cap
        policies = [
            baselines.static_max(env),
            baselines.StaticPolicy("best static cap", cap),
            baselines.StaticPolicy("oracle static", oracle),
            PPOPolicy(model),
        ]
        per_seed = {p.name: evaluate(env, p, seeds) for p in policies}
        summaries = [summarize(name, "", results) for name, results in per_seed.items()]
        v = verdict(summaries, per_seed)
        by_name = {s.policy: s for s in summaries}
        best, ppo = by_name[v["best_static_policy"]], by_name["M4 PPO"]
        action = {p.name: getattr(p, "action", None) for p in policies}[best.policy]
        rows.append({
            "fixed_power_share": share,
            "best_static": f"{best.policy} {env.setting(action).label}",
            "static_j": best.energy_per_request_j,
            "ppo_j": ppo.energy_per_request_j,
            "static_attainment": best.sla_attainment,
            "ppo_attainment": ppo.sla_attainment,
            **v,
        })  # fmt: skip
    return rows


def sensitivity_table(rows: list[dict], n_seeds: int, title: str) -> Table:
    """The rows as a table; the goal is decided on the saving of the means, as in the main verdict
    (>= 10% at equal or better attainment)."""
    table = Table("runtime_sensitivity", title, [
        "fixed_power_share", "best static", "static J/request", "PPO J/request", "saving (means)",
        "paired saving", "attainment PPO / static", "PPO met SLA", "goal"])  # fmt: skip
    for r in rows:
        table.add(
            num(r["fixed_power_share"], (), "g"),
            text(r["best_static"]),
            num(r["static_j"], (), ".1f"),
            num(r["ppo_j"], (), ".1f"),
            num(r["ppo_energy_saving_vs_best_static"], (), ".1%"),
            pm(r["ppo_paired_saving_mean"], r["ppo_paired_saving_ci95"], ".1%"),
            text(f"{r['ppo_attainment']:.3f} / {r['static_attainment']:.3f}"),
            Cell(f"{r['ppo_sla_met_seeds']}/{n_seeds}", float(r["ppo_sla_met_seeds"])),
            text("met" if r["ppo_goal_met"] else "not met"),
        )
    return table
