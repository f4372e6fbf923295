"""M0: trl SFTTrainer with LoRA on (task prompt -> reference solution) pairs of the train split.

The completion is the reference solution wrapped in the fenced block the prompt asks for, so
the SFT policy learns the same output contract the GRPO rewards and `extract_code` expect. Only
solutions that run on the target are used (warpk.trainers.data.sft_rows). The loss covers the
completion only (trl's default for prompt/completion data).

Non-goals: no evaluation here (warpk.stages.train evaluates the adapter on the held-out split).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from warpk.config import RunConfig
from warpk.trainers import common
from warpk.trainers.checkpoints import stamp_callback
from warpk.trainers.data import sft_rows, to_dataset, train_tasks


def build_trainer(config: RunConfig, run_dir: Path):
    """The SFTTrainer for `config` (LoRA from the policy preset)."""
    from trl import SFTConfig, SFTTrainer

    model, tokenizer, peft_config = common.load_train_policy(config)
    rows = sft_rows(config, train_tasks(config), tokenizer)
    args = SFTConfig(
        **common.trainer_args(config, run_dir, sft=True),
        max_length=config.train.max_length,
    )
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=to_dataset(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[stamp_callback(config.policy, config.model.name)],
    )


def run_sft(config: RunConfig, run_dir: Path, log: Callable[[dict], None]) -> tuple[object, dict]:
    """Fine-tune; returns (trainer, summary). The adapter is saved to <run_dir>/adapter."""
    run_dir = Path(run_dir)
    trainer = build_trainer(config, run_dir)
    summary = common.train_and_save(config, run_dir, trainer, log)
    summary["train/sft_pairs"] = float(len(trainer.train_dataset))
    return trainer, summary
