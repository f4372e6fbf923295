"""`stage=runtime` (M4): train PPO on the calibrated serving simulator, compare it with baselines.

    python -m warpk stage=runtime model=m4 sla=mixed

1. Load `runtime.calibration` (measured on the GPU; a test fixture is refused), report the cost
   fit's error on held-out measured points; build `ServingEnv` for `hardware@runtime.served`.
2. Train PPO for `runtime.ppo.timesteps` control steps on training episodes; keep its best
   checkpoint on `runtime.selection.select_episodes` selection episodes (warpk.runtime.control.selection).
3. Evaluate every policy on the same `runtime.selection.eval_seeds` held-out seeds: static max, best static
   cap (swept on separate tuning seeds), Zeus-style power-limit optimizer, SLO-slack feedback,
   oracle static (grid with hindsight on the evaluation seeds), the best calm rule, random, PPO.
   runtime.ppo.seeds=N: N PPO models (seeds seed, seed+1000, ...), the verdict per seed and over them.
4. Write runtime_results.jsonl (per policy: its seeds, then its summary) and .md; log and print them.
5. Every policy against the frontier of all static settings on the same episodes: a table and
   runtime_frontier.png (warpk.runtime.arms.frontier).
6. Sensitivity to the MODELLED clock curve (warpk.runtime.arms.sensitivity): the same PPO policy
   against statics re-tuned at runtime.fixed_power_share 0, 0.25, 0.5 (and the run's own), in
   runtime_results.md and summary.json; their grids run in a spawned worker while PPO trains.

Every figure is SIMULATED (measured cost fit + MODELLED cap/clock effect); the table says so.
With runtime.actuator.kind=nvml (and runtime.actuator.nvml_opt_in=true) PPO's settings also go to the real GPU
during its evaluation episodes and are restored afterwards; the numbers stay simulated.

Non-goals: M5 (stage=hrl).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from warpk.config import RunConfig
from warpk.progress import progress
from warpk.runtime.arms import results
from warpk.runtime.arms.sensitivity import start_static_grids
from warpk.runtime.arms.tables import caption, policy_table
from warpk.runtime.control import baselines
from warpk.runtime.control.evaluation import evaluation_seeds, train_seed_name
from warpk.runtime.control.policies import PPOPolicy, RandomPolicy
from warpk.runtime.control.ppo import train_for_run, train_seeds_of
from warpk.runtime.control.selection import selection_summary
from warpk.runtime.serving.actuators import actuator_for
from warpk.runtime.serving.calibration import heldout_error
from warpk.runtime.serving.env import ServingEnv, reward_weights, served_calibration
from warpk.tables import to_markdown, to_rich


def run_runtime(config: RunConfig, run_dir: Path, log: Callable[[dict], None]) -> dict:
    """Train, evaluate, write runtime_results.{jsonl,md}; returns the summary metrics."""
    rt, sla = config.runtime, config.sla
    console = Console(width=None if Console().is_terminal else 160)
    cal = served_calibration(config)  # CalibrationError: one line, exit 2 (warpk.__main__)
    fit_error = heldout_error(cal)
    weights = reward_weights(config)
    env = ServingEnv(rt, sla, rt.served, cal, **weights)
    eval_seeds = evaluation_seeds(config)
    console.print(
        f"calibration {cal.path} ({cal.gpu}, {cal.model}); cost fit error on held-out measured points: "
        f"decode step time {fit_error.decode_time_mape:.1%}, energy {fit_error.decode_energy_mape:.1%}; "
        f"prefill time {fit_error.prefill_time_mape:.1%}, energy {fit_error.prefill_energy_mape:.1%}"
    )

    pool, grids, calm = start_static_grids(config)  # the static baselines and the calm rule, meanwhile
    train_seeds = train_seeds_of(config)
    try:
        started = time.monotonic()
        with progress(console, "PPO", rt.ppo.timesteps * len(train_seeds), log) as update:
            models = train_for_run(config, lambda: ServingEnv(rt, sla, rt.served, cal, **weights), update)
        train_s = time.monotonic() - started
        normalized = all(PPOPolicy(m).scale is not None for m in models.values())  # as trained, not as asked
        note, selected = selection_summary(models)
        log({"ppo/train_s": train_s, "ppo/timesteps": rt.ppo.timesteps, "ppo/train_seeds": len(train_seeds),
             "ppo/normalized": normalized, **selected})  # fmt: skip
        console.print(note)
        with console.status("baselines: the statics' grids"):
            actions = {share: future.result() for share, future in grids.items()}
            calm_rule = baselines.CalmRule(*calm.result())
    finally:  # a failure cancels the grids not yet started instead of waiting for them
        pool.shutdown(cancel_futures=True)

    grid = actions[rt.fixed_power_share]
    oracle_action, cap_action = grid.oracle, grid.cap
    policies = [
        baselines.static_max(env),
        baselines.StaticPolicy("best static cap", cap_action),
        baselines.ZeusPowerLimit(eta=rt.zeus_eta),
        baselines.SloSlackController(),
        baselines.StaticPolicy("oracle static", oracle_action),
        calm_rule,
        RandomPolicy(seed=config.seed),
        *(PPOPolicy(m, name=train_seed_name(seed, config.seed)) for seed, m in models.items()),
    ]
    with console.status("evaluating every policy"):
        summaries, per_seed = results.run_policies(
            env, policies, eval_seeds, actuator_for(config.runtime), run_dir / "runtime_results.jsonl", log
        )
    note = caption(sla.name, sla.ttft_p95_s, sla.e2e_p95_s, Path(cal.path).name, rt.selection.evaluate_on)
    table = policy_table(summaries, f"M4 PPO versus baselines, sla={sla.name}", note)
    console.print(to_rich(table))
    console.print(f"best calm rule (chosen on the tuning episodes): {calm_rule.describe(env)}")
    (run_dir / "runtime_results.md").write_text(to_markdown(table))
    out = results.run_summary(summaries, per_seed, fit_error, train_s)
    n_eval, split = len(eval_seeds), "" if rt.selection.evaluate_on == "heldout" else rt.selection.evaluate_on
    console.print(results.verdict_line(out, n_eval, split))

    sections = [results.frontier_section(summaries, grid.static_points, sla.name, run_dir)]
    if len(models) > 1:
        sections.append(results.train_seeds_section(config, summaries, per_seed, train_seeds, n_eval))
    with console.status("sensitivity to the modelled clock curve"):
        sections.append(results.sensitivity_section(config, models[config.seed], actions, n_eval))
    for section, keys in sections:
        console.print(to_rich(section))
        with (run_dir / "runtime_results.md").open("a") as md:
            md.write("\n" + to_markdown(section))
        out.update(keys)
    console.print(f"results: {run_dir / 'runtime_results.md'}")
    return out
