"""What a `stage=runtime` run measures and reports, once its policies exist.

- `run_policies`: every policy on the evaluation episodes, each episode and each policy's summary
  written to runtime_results.jsonl as it finishes and logged to W&B;
- `run_summary`: summary.json's metrics (every policy's means and intervals, the verdict, the cost
  fit's held-out error); `verdict_line` the one line printed under the table;
- `train_seeds_section` and `sensitivity_section`: a table each and its summary keys, for the
  robustness over PPO training seeds and over the modelled clock curve;
- `frontier_section`: every policy against the frontier of all static settings (table, keys and
  runtime_frontier.png).

Every figure is SIMULATED (warpk.runtime.serving.env); the captions say so.

Non-goals: no training (warpk.runtime.control.ppo); no printing (the stage prints).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from warpk.config import RunConfig
from warpk.runtime.arms.frontier import StaticPoint, frontier_figure, frontier_table, pareto, standing
from warpk.runtime.arms.sensitivity import sensitivity_rows, sensitivity_table
from warpk.runtime.arms.tables import train_seeds_table
from warpk.runtime.control.evaluation import (
    GOAL_RULES,
    METRICS,
    PolicySummary,
    across_train_seeds,
    evaluate,
    summarize,
    train_seed_name,
    verdict,
)
from warpk.runtime.control.policies import PPOPolicy
from warpk.runtime.serving.env import EpisodeResult, ServingEnv
from warpk.tables import Table

Section = tuple[Table, dict]  # (the table, its summary keys)


def slug(name: str) -> str:
    """A policy name as a metric key: 'M4 PPO (train seed 1000)' -> 'm4_ppo_train_seed_1000'."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def run_policies(
    env: ServingEnv, policies: list, seeds: list[int], actuator, sink: Path, log: Callable[[dict], None]
) -> tuple[list[PolicySummary], dict[str, list[EpisodeResult]]]:
    """Every policy on `seeds`; PPO policies drive `actuator` (None: simulated only) meanwhile."""
    summaries: list[PolicySummary] = []
    per_seed: dict[str, list[EpisodeResult]] = {}
    with sink.open("w") as out:
        for policy in policies:
            if actuator is not None and isinstance(policy, PPOPolicy):
                with actuator:
                    results = evaluate(env, policy, seeds, actuator.apply)
            else:
                results = evaluate(env, policy, seeds)
            setting = (env.setting(policy.action).label if hasattr(policy, "action")
                       else policy.describe(env) if hasattr(policy, "describe") else "adaptive")  # fmt: skip
            per_seed[policy.name] = results
            summary = record_episodes(out, policy.name, setting, results)
            summaries.append(summary)
            log({f"runtime/{slug(policy.name)}/{k}": v for k, v in summary.to_dict().items()
                 if isinstance(v, int | float)})  # fmt: skip
    return summaries, per_seed


def record_episodes(sink, name: str, setting: str, results: list[EpisodeResult]) -> PolicySummary:
    """One policy's episodes, then its summary line, into runtime_results.jsonl (the report reads
    the episode lines); returns the summary."""
    for r in results:
        sink.write(json.dumps({"policy": name, "setting": setting, **asdict(r)}) + "\n")
    summary = summarize(name, setting, results)
    sink.write(json.dumps({"summary": True, **summary.to_dict()}) + "\n")
    return summary


def run_summary(summaries: list[PolicySummary], per_seed: dict, fit_error, train_s: float) -> dict:
    out: dict = {
        "energy_source": "simulated (measured cost fit + modelled cap/clock)",
        "ppo_train_s": train_s,
    }
    for s in summaries:
        for m in METRICS:
            out[f"{slug(s.policy)}/{m}"] = getattr(s, m)
            out[f"{slug(s.policy)}/{m}_ci95"] = getattr(s, f"{m}_ci95")
    out.update(verdict(summaries, per_seed))
    out["fit/decode_time_heldout_mape"] = fit_error.decode_time_mape
    out["fit/decode_energy_heldout_mape"] = fit_error.decode_energy_mape
    out["fit/prefill_time_heldout_mape"] = fit_error.prefill_time_mape
    out["fit/prefill_energy_heldout_mape"] = fit_error.prefill_energy_mape
    return out


def verdict_line(out: dict, n_eval: int, tuning: bool | str) -> str:
    """`tuning`: True or the split (runtime.selection.evaluate_on) when the episodes are not held-out."""
    saving, attainment = out["ppo_energy_saving_vs_best_static"], out["ppo_sla_attainment_minus_best_static"]
    return (
        f"PPO vs best static ({out['best_static_policy']}): energy saving {saving:.1%} (per seed, paired: "
        f"{out['ppo_paired_saving_mean']:.1%} ± {out['ppo_paired_saving_ci95']:.1%}), SLA attainment "
        f"{attainment:+.3f}, PPO met the SLA on {out['ppo_sla_met_seeds']}/{n_eval} seeds -> goal "
        f"({GOAL_RULES[out.get('goal_rule', 'feasible')]}) " + ("MET" if out["ppo_goal_met"] else "NOT met")
        + {"tuning": " on the TUNING episodes (runtime.selection.evaluate_on=tuning): not a result",
           "validation": " on the VALIDATION episodes (runtime.selection.evaluate_on=validation): "
                         "not a new result",
           }.get(tuning if isinstance(tuning, str) else ("tuning" if tuning else ""), "")
    )


def train_seeds_section(
    config: RunConfig, summaries: list[PolicySummary], per_seed: dict, train_seeds: list[int], n_eval: int
) -> Section:
    """The verdict per PPO training seed and over them (robustness/... keys)."""
    verdicts = {s: verdict(summaries, per_seed, train_seed_name(s, config.seed)) for s in train_seeds}
    overall = across_train_seeds(verdicts)
    title = f"Robustness over PPO training seeds {', '.join(map(str, train_seeds))}, sla={config.sla.name}"
    keys = {f"robustness/{k}": v for k, v in overall.items()}
    for seed, v in verdicts.items():
        for k in ("ppo_energy_saving_vs_best_static", "ppo_sla_attainment_minus_best_static", "ppo_goal_met"):
            keys[f"robustness/train_seed_{seed}/{k}"] = v[k]
    return train_seeds_table(verdicts, overall, n_eval, title), keys


def sensitivity_section(config: RunConfig, model, actions: dict, n_eval: int) -> Section:
    """The run's own PPO policy against the statics re-tuned per modelled clock curve
    (sensitivity/fixed_power_share_<share>/... keys)."""
    rows = sensitivity_rows(config, model, actions)
    title = (f"Sensitivity to the MODELLED clock curve (the same PPO policy, training seed "
             f"{config.seed}; statics re-tuned per curve), sla={config.sla.name}")  # fmt: skip
    keys = {}
    for r in rows:
        for k in ("best_static_policy", "ppo_energy_saving_vs_best_static", "ppo_paired_saving_mean",
                  "ppo_sla_attainment_minus_best_static", "ppo_goal_met"):  # fmt: skip
            keys[f"sensitivity/fixed_power_share_{r['fixed_power_share']:g}/{k}"] = r[k]
    return sensitivity_table(rows, n_eval, title), keys


def frontier_section(
    summaries: list[PolicySummary], statics: tuple[StaticPoint, ...], sla_name: str, run_dir: Path
) -> Section:
    """Every policy of the main table against the frontier of all static settings on the same
    episodes (frontier/<policy>/... keys), and the figure (run_dir/runtime_frontier.png)."""
    front = pareto(list(statics))
    standings = [standing(s.policy, s.sla_attainment, s.energy_per_request_j, front) for s in summaries]
    title = f"Against the frontier of all {len(statics)} static settings (held-out means), sla={sla_name}"
    keys: dict = {"frontier/static_settings": len(statics), "frontier/points": len(front)}
    for st in standings:
        keys[f"frontier/{slug(st.policy)}/energy_share"] = st.energy_share
        keys[f"frontier/{slug(st.policy)}/beaten_by_a_static"] = st.dominated_by is not None
    frontier_figure(list(statics), standings, f"{title}; SIMULATED", run_dir / "runtime_frontier.png")
    return frontier_table(standings, front, title), keys
