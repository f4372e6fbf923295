"""`stage=hrl` (M5): GRPO kernel rounds and PPO runtime rounds; kernels change the serving cost model.

    python -m warpk stage=hrl model=m5 policy=tiny                       # ~3 min on a 2-core CPU
    python -m warpk stage=hrl model=m5 runtime.hrl.kernel_records=docs/data/h200_bundled_suite_records.jsonl

Rounds r = 1 .. runtime.hrl.rounds:
  1. GRPO round (runtime.hrl.grpo): the kernel policy trains `runtime.hrl.grpo_steps` more steps
     (warpk.trainers.grpo, resumed from <run_dir>/grpo), then writes k samples for every bundled
     task of a served op class; they are evaluated (<run_dir>/grpo/round<r>_records.jsonl).
  2. Deployment: per op class, the fastest correct candidate so far (policy rounds and
     runtime.hrl.kernel_records) beating the reference (warpk.runtime.arms.hrl); only records measured on
     the served GPU (hardware@runtime.served) count. Amdahl over MODELLED op-class shares gives the cost
     model's multipliers; the M5 env takes them.
  3. PPO round: the M5 controller trains `runtime.hrl.ppo_timesteps` more steps on that env.
Joint fine-tuning: a last PPO round of `runtime.hrl.joint_timesteps` on the final cost model (all
kernels found, every round's). M4 alone: the same PPO, seed and steps on the unchanged env.
Both are evaluated on the held-out seeds of stage=runtime; the gain is paired by seed (95% t).

Writes runtime_results.jsonl (stage=runtime's format: policies "M4 PPO", "M5 PPO (kernel-updated
env)" and static max on both envs), hrl_kernels.json and hrl_results.md. Every serving number is
SIMULATED; op-class shares and the task-to-served-op transfer are MODELLED.

Non-goals: the GRPO reward does not see the serving env (the coupling is kernels -> env); no
NVML actuator here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from warpk.config import RunConfig
from warpk.progress import progress
from warpk.records import EvalRecord
from warpk.runtime.arms import hrl
from warpk.runtime.arms.hrl_results import M4, M5, gain_table, hrl_summary, kernel_table, markdown
from warpk.runtime.arms.hrl_rounds import alternate, file_records
from warpk.runtime.arms.results import record_episodes
from warpk.runtime.arms.tables import caption
from warpk.runtime.control import baselines
from warpk.runtime.control.evaluation import evaluate, evaluation_seeds
from warpk.runtime.control.policies import PPOPolicy
from warpk.runtime.control.ppo import hyperparameters, new_ppo
from warpk.runtime.serving.calibration import CalibrationError
from warpk.runtime.serving.env import ServingEnv, reward_weights, served_calibration
from warpk.tables import to_rich


def run_hrl(config: RunConfig, run_dir: Path, log: Callable[[dict], None]) -> dict:
    """M5 rounds, M4 alone with the same PPO budget, the gain table; returns the summary metrics."""
    rt, sla = config.runtime, config.sla
    run_dir = Path(run_dir)
    console = Console(width=None if Console().is_terminal else 160)
    cal = served_calibration(config)  # CalibrationError: one line, exit 2 (warpk.__main__)
    if "Qwen2.5-7B" not in cal.model:
        raise CalibrationError(
            f"stage=hrl models op-class shares of Qwen2.5-7B; the calibration is of {cal.model}"
        )
    gpu = rt.served
    shares = hrl.phase_shares(rt, gpu)
    from_file, notes = file_records(config)
    sources: dict[str, list[EvalRecord]] = {"records file": from_file} if from_file else {}
    weights = reward_weights(config)
    m4_env, m5_env = ServingEnv(rt, sla, gpu, cal, **weights), ServingEnv(rt, sla, gpu, cal, **weights)
    hyper = hyperparameters(rt)
    m4_model, m5_model = new_ppo(m4_env, config.seed, hyper=hyper), new_ppo(m5_env, config.seed, hyper=hyper)
    total = 2 * (rt.hrl.rounds * rt.hrl.ppo_timesteps + rt.hrl.joint_timesteps)  # M5's and M4's
    with progress(console, "M5 rounds (PPO steps of M5 and M4)", total, log, key="hrl_rounds") as update:
        kernels, scale, policy_ok = alternate(
            config, run_dir, (m5_env, m5_model, m4_model), shares, sources, notes, log, update, console.print
        )
    hrl.write_kernels(run_dir / "hrl_kernels.json", kernels, scale, shares)

    seeds = evaluation_seeds(config)
    runs = [
        (M4, m4_env, PPOPolicy(m4_model, name=M4), "adaptive"),
        (M5, m5_env, PPOPolicy(m5_model, name=M5), "adaptive"),
    ]
    static = baselines.static_max(m4_env)
    label = m4_env.setting(static.action).label
    runs += [
        ("static max", m4_env, static, label),
        ("static max (kernel-updated env)", m5_env, static, label),
    ]
    per_seed, summaries = {}, {}
    with (
        console.status("evaluating on the held-out seeds"),
        (run_dir / "runtime_results.jsonl").open("w") as sink,
    ):
        for name, env, policy, setting in runs:
            per_seed[name] = evaluate(env, policy, seeds)
            summaries[name] = record_episodes(sink, name, setting, per_seed[name])

    out = hrl_summary(per_seed, summaries, scale, kernels, sources, policy_ok)
    out["hrl/ppo_timesteps_each"] = rt.hrl.rounds * rt.hrl.ppo_timesteps + rt.hrl.joint_timesteps
    log({k: v for k, v in out.items() if isinstance(v, int | float) and not isinstance(v, bool)})
    note = caption(sla.name, sla.ttft_p95_s, sla.e2e_p95_s, Path(cal.path).name, rt.selection.evaluate_on)
    kernel_t, gain_t = kernel_table(kernels, shares, scale), gain_table(summaries, out)
    console.print(to_rich(kernel_t))
    for n in notes:
        console.print(f"[yellow]{n}[/yellow]")
    console.print(out["kernel_source"])
    console.print(to_rich(gain_t))
    console.print(note)
    (run_dir / "hrl_results.md").write_text(markdown(kernel_t, gain_t, [*notes, out["kernel_source"], note]))
    console.print(f"results: {run_dir / 'hrl_results.md'}")
    return out
