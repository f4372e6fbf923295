"""M5's rounds (docs/runtime.md section 8): `alternate` runs them, from the parts here: the kernel
policy's GRPO round, the kernels a records file adds, and a PPO round that continues a model.

Non-goals: no reporting (warpk.runtime.arms.hrl_results); no cost-model arithmetic (warpk.runtime.arms.hrl).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from warpk.config import ConfigError, RunConfig
from warpk.paths import from_repo
from warpk.records import EvalRecord, read_records
from warpk.runtime.arms import hrl
from warpk.runtime.serving.calibration import PhaseScale


def learn(model, timesteps: int, seed: int) -> None:
    """Continue training: no env reset, the step counter goes on (rounds of whole rollouts).

    The global torch/numpy RNGs are re-seeded first: GRPO rounds and the other arm's PPO consume
    them in between, and M4 and M5 must see the same random stream (identical envs -> identical
    policies, so any gain comes from the kernels)."""
    if timesteps > 0:
        model.set_random_seed(seed)
        model.learn(total_timesteps=timesteps, reset_num_timesteps=False)


def served_tasks(config: RunConfig):
    from warpk.tasks import load_suite

    tasks = load_suite(dataclasses.replace(config.tasks, split="all", subset=[]))
    return [t for t in tasks if hrl.op_class(t.task_id) is not None]


def grpo_round(config: RunConfig, run_dir: Path, r: int, log) -> list[EvalRecord]:
    """Train the kernel policy one more round, then evaluate its samples on the served op tasks."""
    from warpk.trainers.common import build_evaluator
    from warpk.trainers.grpo import run_grpo
    from warpk.trainers.sample import evaluate_policy

    rt = config.runtime
    cfg = dataclasses.replace(
        config, train=dataclasses.replace(config.train, max_steps=r * rt.hrl.grpo_steps, heldout_eval=False)
    )
    out = run_dir / "grpo"
    trainer, summary = run_grpo(cfg, out, log)
    tasks = served_tasks(cfg)
    if not tasks:
        return []
    records, metrics = evaluate_policy(
        trainer.model,
        trainer.processing_class,
        tasks,
        build_evaluator(cfg),
        k=cfg.train.samples_per_task,
        max_new_tokens=cfg.policy.max_new_tokens,
        temperature=cfg.policy.temperature,
        hardware=cfg.hardware.name,
        seed=cfg.seed + r,
        records_path=out / f"round{r}_records.jsonl",
    )
    log({f"hrl/grpo_round{r}/{k}": v for k, v in metrics.items() if isinstance(v, int | float)})
    return records


def file_records(config: RunConfig) -> tuple[list[EvalRecord], list[str]]:
    """runtime.hrl.kernel_records: measured records on the served GPU; ConfigError if it has none."""
    rt = config.runtime
    if not rt.hrl.kernel_records:
        return [], []
    path = from_repo(rt.hrl.kernel_records)
    if not path.is_file():
        raise ConfigError(f"runtime.hrl.kernel_records={rt.hrl.kernel_records}: no such file")
    try:
        records = read_records(path)
    except ValueError as err:
        raise ConfigError(f"runtime.hrl.kernel_records: {err}") from err
    keep, notes = hrl.usable(records, rt.served.name)
    if not keep:
        found = sorted({str(r.hardware) for r in records}) or ["nothing"]
        raise ConfigError(
            f"runtime.hrl.kernel_records={rt.hrl.kernel_records} holds records of {', '.join(found)}, "
            f"none measured on the served GPU hardware@runtime.served={rt.served.name}: refused"
        )
    return keep, notes


def alternate(config: RunConfig, run_dir: Path, arms, shares, sources: dict, notes: list, log, update, say):
    """M5's rounds: each round (GRPO where runtime.hrl.grpo) adds the policy's correct kernels on
    the served GPU to `sources`, the deployed kernels rescale M5's env, and M5's and M4's PPO
    models each continue for runtime.hrl.ppo_timesteps on one seed; then both train jointly on the
    final cost model. `arms` = (M5's env, M5's model, M4's model); `update(done, text)` reports
    PPO steps. Returns (the kernels deployed, their cost scale, the policy's correct kernels)."""
    rt = config.runtime
    m5_env, m5_model, m4_model = arms
    policy_ok, scale = 0, PhaseScale()
    kernels = hrl.choose_kernels(sources)
    done = 0
    for r in range(1, rt.hrl.rounds + 1):
        if rt.hrl.grpo:
            update(done, f"round {r}: GRPO ({rt.hrl.grpo_steps} steps) and sampling")
            records = grpo_round(config, run_dir, r, log)
            policy_ok += sum(x.status == "ok" for x in records)
            on_gpu, left_out = hrl.usable(records, rt.served.name)
            notes += [f"policy round {r}: {n}" for n in left_out]
            sources[f"policy round {r}"] = on_gpu
            say(f"round {r}: GRPO policy wrote {len(records)} candidates for {len(served_tasks(config))} "
                f"served-op tasks, {sum(x.status == 'ok' for x in records)} correct")  # fmt: skip
        kernels = hrl.choose_kernels(sources)
        scale = hrl.kernel_scale(kernels, shares)
        m5_env.set_kernel_scale(scale)
        log({f"hrl/round{r}/{k}": v for k, v in hrl.scale_dict(scale).items()})
        for model in (m5_model, m4_model):
            update(done, f"round {r}: PPO {rt.hrl.ppo_timesteps} steps")
            learn(model, rt.hrl.ppo_timesteps, config.seed + 1000 * r)
            done += rt.hrl.ppo_timesteps
    for model in (m5_model, m4_model):
        update(done, f"joint: PPO {rt.hrl.joint_timesteps} steps on the final cost model")
        learn(model, rt.hrl.joint_timesteps, config.seed + 999)
        done += rt.hrl.joint_timesteps
    update(done)
    return kernels, scale, policy_ok
