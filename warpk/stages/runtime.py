"""`stage=runtime` (M4): train PPO on the calibrated serving simulator, compare it with baselines.

    python -m warpk stage=runtime model=m4 sla=mixed

1. Load the calibration file (`runtime.calibration`, measured on the GPU; a test fixture is
   refused) and report the cost fit's error on held-out measured points.
2. Build `ServingEnv` for `hardware@runtime.served` (its cap range and clock profiles) and the `sla` regime.
3. Train PPO for `runtime.ppo_timesteps` control steps on training episodes.
4. Evaluate every policy on the same `runtime.eval_seeds` held-out seeds: static max, best static
   cap (swept on separate tuning seeds), Zeus-style power-limit optimizer, SLO-slack feedback,
   oracle static (grid with hindsight on the evaluation seeds), random, and PPO.
   With runtime.ppo_seeds=N, PPO is trained N times (seeds seed..seed+N-1), every model is
   evaluated, and a robustness table gives the verdict per training seed and over them.
5. Write runtime_results.jsonl (one line per policy and seed, then one summary line per policy)
   and runtime_results.md under the run dir, log the same to W&B, print the table.
6. Sensitivity to the MODELLED clock curve (warpk.runtime.sensitivity): the same PPO policy
   against the statics re-tuned with runtime.fixed_power_share at 0, 0.25, 0.5 (and the run's
   own), appended to runtime_results.md and summary.json. The statics' grids of every curve run
   in one spawned worker process while PPO trains (shorter with a spare core, longer on one).

Every figure is SIMULATED (measured cost fit + MODELLED cap/clock effect); the table says so.
With runtime.actuator=nvml (and runtime.nvml_opt_in=true) the PPO policy's settings are also
applied to the real GPU during its evaluation episodes and restored afterwards; the reported
numbers stay simulated.

Non-goals: M5 (stage=hrl).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from warpk.config import RunConfig
from warpk.progress import progress
from warpk.runtime import baselines
from warpk.runtime.calibration import CalibrationError, heldout_error, load_calibration
from warpk.runtime.env import ServingEnv, calibration_path, reward_weights
from warpk.runtime.evaluation import (
    METRICS,
    PolicySummary,
    across_train_seeds,
    caption,
    evaluate,
    evaluation_seeds,
    markdown_table,
    rich_table,
    summarize,
    train_seed_name,
    train_seeds_markdown,
    verdict,
)
from warpk.runtime.ppo import PPOPolicy, RandomPolicy, hyperparameters, train_ppo_seeds
from warpk.runtime.sensitivity import markdown_rows, sensitivity_rows, start_static_grids


def _slug(name: str) -> str:
    return name.lower().replace(" ", "_").replace("-", "_")


def _actuator(config: RunConfig):
    """The actuator PPO's settings go to during evaluation: None (simulated) or NVML (preflight
    checked that hardware is the simulated GPU)."""
    if config.runtime.actuator != "nvml":
        return None
    from warpk.runtime.actuators import NvmlActuator

    return NvmlActuator(opt_in=config.runtime.nvml_opt_in)


def run_runtime(config: RunConfig, run_dir: Path, log: Callable[[dict], None]) -> dict:
    """Train, evaluate, write runtime_results.{jsonl,md}; returns the summary metrics."""
    rt, sla = config.runtime, config.sla
    console = Console(width=None if Console().is_terminal else 160)
    try:
        cal = load_calibration(calibration_path(config), allow_fixture=rt.allow_fixture_calibration)
        fit_error = heldout_error(cal)
    except CalibrationError as err:
        sys.exit(f"warpk: {err}")
    gpu = rt.served
    weights = reward_weights(config)
    env = ServingEnv(rt, sla, gpu, cal, **weights)
    eval_seeds = evaluation_seeds(config)
    console.print(
        f"calibration {cal.path} ({cal.gpu}, {cal.model}); cost fit error on held-out measured points: "
        f"decode step time {fit_error.decode_time_mape:.1%}, energy {fit_error.decode_energy_mape:.1%}; "
        f"prefill time {fit_error.prefill_time_mape:.1%}, energy {fit_error.prefill_energy_mape:.1%}"
    )

    pool, grids = start_static_grids(config)  # the static baselines of every clock curve, meanwhile
    train_seeds = [config.seed + k for k in range(rt.ppo_seeds)]
    try:
        started = time.monotonic()
        with progress(console, "PPO", rt.ppo_timesteps * len(train_seeds), log) as update:
            make_env = lambda: ServingEnv(rt, sla, gpu, cal, **weights)  # noqa: E731
            models = train_ppo_seeds(
                make_env, rt.ppo_timesteps, train_seeds, rt.ppo_envs, update, hyperparameters(rt)
            )
        train_s = time.monotonic() - started
        log({"ppo/train_s": train_s, "ppo/timesteps": rt.ppo_timesteps, "ppo/train_seeds": len(train_seeds)})
        with console.status("baselines: the statics' grids"):
            actions = {share: future.result() for share, future in grids.items()}
    finally:  # a failure cancels the grids not yet started instead of waiting for them
        pool.shutdown(cancel_futures=True)
    model = models[config.seed]

    with console.status("baselines"):
        oracle_action, cap_action = actions[rt.fixed_power_share]
        oracle = baselines.StaticPolicy("oracle static", oracle_action)
        policies = [
            baselines.static_max(env),
            baselines.StaticPolicy("best static cap", cap_action),
            baselines.ZeusPowerLimit(eta=rt.zeus_eta),
            baselines.SloSlackController(),
            oracle,
            RandomPolicy(seed=config.seed),
            *(PPOPolicy(m, name=train_seed_name(seed, config.seed)) for seed, m in models.items()),
        ]
    actuator = _actuator(config)
    summaries: list[PolicySummary] = []
    per_seed: dict[str, list] = {}
    with (run_dir / "runtime_results.jsonl").open("w") as sink:
        for policy in policies:
            on_step = None
            if actuator is not None and isinstance(policy, PPOPolicy):
                on_step = actuator.apply
            if on_step is not None:
                with actuator:
                    results = evaluate(env, policy, eval_seeds, on_step)
            else:
                results = evaluate(env, policy, eval_seeds)
            setting = env.setting(policy.action).label if hasattr(policy, "action") else "adaptive"
            for r in results:
                sink.write(json.dumps({"policy": policy.name, "setting": setting, **asdict(r)}) + "\n")
            per_seed[policy.name] = results
            summary = summarize(policy.name, setting, results)
            sink.write(json.dumps({"summary": True, **summary.to_dict()}) + "\n")
            summaries.append(summary)
            log(
                {
                    f"runtime/{_slug(policy.name)}/{k}": v
                    for k, v in summary.to_dict().items()
                    if isinstance(v, int | float)
                }
            )

    title = f"M4 PPO versus baselines, sla={sla.name}"
    note = caption(sla.name, sla.ttft_p95_s, sla.e2e_p95_s, Path(cal.path).name, rt.evaluate_on)
    console.print(rich_table(summaries, title, note))
    (run_dir / "runtime_results.md").write_text(markdown_table(summaries, title, note))
    out = _summary(summaries, per_seed, fit_error, train_s)
    tuning = rt.evaluate_on == "tuning"
    saving, attainment = out["ppo_energy_saving_vs_best_static"], out["ppo_sla_attainment_minus_best_static"]
    console.print(
        f"PPO vs best static ({out['best_static_policy']}): energy saving {saving:.1%} (per seed, paired: "
        f"{out['ppo_paired_saving_mean']:.1%} ± {out['ppo_paired_saving_ci95']:.1%}), SLA attainment "
        f"{attainment:+.3f}, PPO met the SLA on {out['ppo_sla_met_seeds']}/{len(eval_seeds)} seeds -> goal "
        "(>= 10% less energy at equal or better attainment) " + ("MET" if out["ppo_goal_met"] else "NOT met")
        + (" on the TUNING episodes (runtime.evaluate_on=tuning): not a result" if tuning else "")
    )
    if len(models) > 1:
        _train_seeds_section(config, summaries, per_seed, list(models), run_dir, console, out)
    with console.status("sensitivity to the modelled clock curve"):
        rows = sensitivity_rows(config, model, actions)
    sens_title = (f"Sensitivity to the MODELLED clock curve (the same PPO policy, training seed "
                  f"{config.seed}; statics re-tuned per curve), sla={sla.name}")
    table = markdown_rows(rows, len(eval_seeds))
    console.print(f"\n{sens_title}\n{table}")
    with (run_dir / "runtime_results.md").open("a") as md:
        md.write(f"\n### {sens_title}\n\n{table}")
    for r in rows:
        for k in ("best_static_policy", "ppo_energy_saving_vs_best_static", "ppo_paired_saving_mean",
                  "ppo_sla_attainment_minus_best_static", "ppo_goal_met"):
            out[f"sensitivity/fixed_power_share_{r['fixed_power_share']:g}/{k}"] = r[k]
    console.print(f"results: {run_dir / 'runtime_results.md'}")
    return out


def _train_seeds_section(config, summaries, per_seed, train_seeds, run_dir, console, out) -> None:
    """The verdict per PPO training seed and over them, printed, appended to runtime_results.md
    and into the summary (robustness/...)."""
    verdicts = {s: verdict(summaries, per_seed, train_seed_name(s, config.seed)) for s in train_seeds}
    overall = across_train_seeds(verdicts)
    title = f"Robustness over PPO training seeds {train_seeds[0]}..{train_seeds[-1]}, sla={config.sla.name}"
    table = train_seeds_markdown(verdicts, overall, config.runtime.eval_seeds)
    console.print(f"\n{title}\n{table}")
    with (run_dir / "runtime_results.md").open("a") as md:
        md.write(f"\n### {title}\n\n{table}")
    out.update({f"robustness/{k}": v for k, v in overall.items()})
    for seed, v in verdicts.items():
        for k in ("ppo_energy_saving_vs_best_static", "ppo_sla_attainment_minus_best_static", "ppo_goal_met"):
            out[f"robustness/train_seed_{seed}/{k}"] = v[k]


def _summary(summaries: list[PolicySummary], per_seed: dict, fit_error, train_s: float) -> dict:
    out: dict = {
        "energy_source": "simulated (measured cost fit + modelled cap/clock)",
        "ppo_train_s": train_s,
    }
    for s in summaries:
        for m in METRICS:
            out[f"{_slug(s.policy)}/{m}"] = getattr(s, m)
            out[f"{_slug(s.policy)}/{m}_ci95"] = getattr(s, f"{m}_ci95")
    out.update(verdict(summaries, per_seed))
    out["fit/decode_time_heldout_mape"] = fit_error.decode_time_mape
    out["fit/decode_energy_heldout_mape"] = fit_error.decode_energy_mape
    out["fit/prefill_time_heldout_mape"] = fit_error.prefill_time_mape
    out["fit/prefill_energy_heldout_mape"] = fit_error.prefill_energy_mape
    return out
