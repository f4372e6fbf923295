"""What the SFT and GRPO trainers share: trainer arguments, the policy, the evaluator.

W&B: `stage=train` runs inside the job's W&B run (warpk.tracking, opened by __main__). The
Trainer's WandbCallback logs into `wandb.run` when one is open (it calls `wandb.init` only when
`wandb.run is None`), so trl's metrics land in the SAME run. With `logger=disabled` wandb is
never imported and `report_to="none"`; with no open run (a library caller) trl does not open one.

Non-goals: no training loop here; no hydra.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from warpk.config import RunConfig
from warpk.evaluator import Evaluator, default_cache_dir
from warpk.hardware import usable_cores
from warpk.rewards.terms import reads_energy
from warpk.tasks import synthetic_folder
from warpk.trainers import distributed
from warpk.trainers.checkpoints import ADAPTER, CHECKPOINTS, load_trained, write_stamp


def corpus_root(config: RunConfig) -> Path | None:
    """The suite folder an in-process policy's tokenizer learns from: the generated one under
    tasks=synthetic, a bundled-layout tasks.root, else None (the bundled suite)."""
    if config.tasks.source == "synthetic":
        return synthetic_folder(config.tasks)
    if config.tasks.source == "bundled" and config.tasks.root:
        return Path(config.tasks.root)
    return None


def cache_dir(config: RunConfig) -> Path:
    """The evaluator's cache dir; the tiny policy is built under it too."""
    return Path(config.evaluate.cache_dir) if config.evaluate.cache_dir else default_cache_dir()


def report_to(config: RunConfig) -> str:
    """'wandb' when a W&B run is open in this process (logger not disabled), else 'none'."""
    if config.logger.mode == "disabled":
        return "none"
    wandb = sys.modules.get("wandb")
    return "wandb" if wandb is not None and getattr(wandb, "run", None) is not None else "none"


def _checkpointing_field() -> str:
    """transformers 5.24 renamed gradient_checkpointing to activation_checkpointing (the old name
    warns); the GPU machine's transformers 5.17 knows only the old one."""
    from transformers import TrainingArguments

    fields = TrainingArguments.__dataclass_fields__
    return "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"


def trainer_args(config: RunConfig, run_dir: Path, sft: bool = False) -> dict:
    """Keyword arguments common to trl's SFTConfig and GRPOConfig (`sft`: the SFT steps,
    batch and learning rate, where the preset sets them apart)."""
    t = config.train
    on_cpu = config.hardware.device == "cpu"
    steps = (t.sft_max_steps or t.max_steps) if sft else t.max_steps
    batch = (t.sft_batch_size or t.per_device_batch_size) if sft else t.per_device_batch_size
    return {
        "output_dir": str(Path(run_dir) / CHECKPOINTS),
        "use_cpu": on_cpu,  # with bf16=False: pure fp32 on the CPU (no bf16 autocast)
        "bf16": not on_cpu,
        _checkpointing_field(): not on_cpu,  # trl's default on a GPU (memory); off on the CPU (speed)
        "per_device_train_batch_size": batch,
        "gradient_accumulation_steps": t.gradient_accumulation_steps,
        "max_steps": steps,
        "learning_rate": t.sft_learning_rate if sft else t.learning_rate,
        "optim": "adamw_torch" if sft else t.optim,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": t.save_steps,
        "save_total_limit": t.save_total_limit,
        "report_to": report_to(config),
        "seed": config.seed,
        "data_seed": config.seed,
        "disable_tqdm": False,
    }


def load_train_policy(config: RunConfig):
    """(model, tokenizer, peft config or None) to train: bf16 weights on a GPU, fp32 on the CPU.

    With `policy.checkpoint` (warm start, e.g. M1 from M0's adapter) the trained model of that
    folder, its LoRA weights trainable, and no new adapter; otherwise the base policy with a new
    LoRA adapter from the preset, or none when `policy.finetune=full` (every weight trains)."""
    import torch

    from warpk.policy import load_policy, lora_config

    dtype = torch.float32 if config.hardware.device == "cpu" else torch.bfloat16
    if config.policy.checkpoint:
        model, tokenizer = load_trained(
            config.policy, Path(config.policy.checkpoint), cache_dir(config), dtype=dtype, trainable=True,
            corpus_root=corpus_root(config),
        )
        return model, tokenizer, None
    model, tokenizer = load_policy(config.policy, cache_dir(config), dtype=dtype,
                                   corpus_root=corpus_root(config))
    return model, tokenizer, lora_config(config.policy) if config.policy.finetune == "lora" else None


def build_evaluator(config: RunConfig, for_reward: bool = False) -> Evaluator:
    """The evaluator of `stage=evaluate`, built from the same config groups. `for_reward`: the
    one that scores training completions, which with evaluate.energy=auto measures no energy
    when the arm's reward reads none (M1 does not pay for it; held-out evaluation still does)."""
    protocol = config.evaluate
    if for_reward and protocol.energy == "auto" and not reads_energy(config.reward):
        protocol = dataclasses.replace(protocol, energy="none")
        print(f"evaluate.energy=auto: reward={config.reward.name} reads no energy, so training "
              "completions are evaluated without it (held-out evaluation still measures it)", flush=True)
    if distributed.world_size() > 1 and not protocol.compile_workers:  # this job's cores, shared
        workers = distributed.compile_workers(usable_cores())
        protocol = dataclasses.replace(protocol, compile_workers=workers)
    return Evaluator(protocol, config.hardware, config.tasks.shape, config.seed,
                     lanes=distributed.lanes(config.hardware.device))


def resume_point(config: RunConfig, run_dir: Path) -> str | None:
    """The checkpoint a restarted run continues from (train.resume), or None to start fresh."""
    from warpk.trainers.checkpoints import latest_checkpoint

    last = latest_checkpoint(run_dir) if config.train.resume else None
    return str(last) if last else None


def history_summary(log_history: list[dict]) -> dict:
    """Last logged value of each numeric training metric, prefixed `train/`."""
    out: dict = {}
    for row in log_history:
        for key, value in row.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[f"train/{key}"] = float(value)
    return out


def train_and_save(config: RunConfig, run_dir: Path, trainer, log) -> dict:
    """Train (resuming from the run dir's latest checkpoint), save the adapter with its stamp;
    the summary of the trainer's log history."""
    resume = resume_point(config, run_dir)
    if resume:
        log({"train/resumed_from_step": float(Path(resume).name.split("-")[-1])})
    trainer.train(resume_from_checkpoint=resume)
    adapter = Path(run_dir) / ADAPTER
    trainer.save_model(str(adapter))
    if distributed.is_main():
        write_stamp(
            adapter, config.policy, arm=config.model.name, global_step=trainer.state.global_step,
            warm_start=config.policy.checkpoint,
        )  # fmt: skip
    summary = history_summary(trainer.state.log_history)
    summary["global_step"] = float(trainer.state.global_step)
    summary["train/processes"] = float(distributed.world_size())
    summary["resumed_from"] = resume
    return summary
