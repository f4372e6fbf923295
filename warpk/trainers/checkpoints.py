"""Checkpoints: where they live, which is the latest, and what policy they were trained from.

Layout under a run dir:
    checkpoints/checkpoint-<step>/   transformers Trainer checkpoints (adapter, optimizer,
                                     scheduler, RNG, trainer_state.json) + warpk_policy.json
    adapter/                         the final LoRA adapter (peft `save_pretrained`), or the
                                     whole model with policy.finetune=full, + tokenizer
                                     + warpk_policy.json

`warpk_policy.json` names the policy preset (and, for `tiny`/`small`, its shape) the adapter was
trained on, and its fine-tuning (`lora`: a peft adapter; `full`: the whole model). `load_trained`
refuses a folder whose stamp differs from the requested preset: LoRA weights applied to another
base model would load silently (same module names) and sample garbage. `check_checkpoint` is the
same test without loading anything, for preflight.

A restarted run with the same run dir resumes from `latest_checkpoint` (train.resume=true).

Non-goals: no checkpoint pruning beyond the Trainer's save_total_limit; no upload.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from warpk.config import PolicyConfig
from warpk.tasks import TaskError

STAMP = "warpk_policy.json"
CHECKPOINTS = "checkpoints"
ADAPTER = "adapter"
_STEP = re.compile(r"^checkpoint-(\d+)$")


class CheckpointMismatch(TaskError):
    """An adapter trained from another policy preset than the one requested, or no adapter at all.

    A TaskError (what the evaluate stage cannot use) so that `python -m warpk` reports it in one
    line and exits non-zero, like a missing task file."""


def stamp_of(policy: PolicyConfig) -> dict:
    """What identifies the base model an adapter belongs to, and how it was fine-tuned."""
    return {
        "policy": policy.name,
        "hf_id": policy.hf_id,
        "hidden_size": policy.hidden_size,
        "num_hidden_layers": policy.num_hidden_layers,
        "finetune": policy.finetune,
    }


def write_stamp(folder: Path, policy: PolicyConfig, **extra) -> None:
    (Path(folder) / STAMP).write_text(json.dumps({**stamp_of(policy), **extra}, indent=2) + "\n")


def read_stamp(folder: Path) -> dict:
    path = Path(folder) / STAMP
    if not path.is_file():
        raise CheckpointMismatch(
            f"policy.checkpoint={folder} has no {STAMP}: not an adapter written by stage=train"
        )
    return json.loads(path.read_text())


def check_stamp(folder: Path, policy: PolicyConfig) -> dict:
    """The stamp of `folder`; raises CheckpointMismatch when it names another base model."""
    stamp = {"finetune": "lora", **read_stamp(folder)}  # stamps before policy.finetune were LoRA
    want = stamp_of(policy)
    differ = {k: (stamp.get(k), v) for k, v in want.items() if stamp.get(k) != v}
    if differ:
        detail = ", ".join(f"{k}: trained {a!r}, requested {b!r}" for k, (a, b) in differ.items())
        raise CheckpointMismatch(
            f"policy.checkpoint={folder} was trained on another base model than the requested "
            f"policy={policy.name} ({detail}); pass the preset it was trained from"
        )
    return stamp


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The `checkpoints/checkpoint-<step>` folder with the highest step that holds a trainer state."""
    folder = Path(run_dir) / CHECKPOINTS
    found = []
    for child in folder.glob("checkpoint-*") if folder.is_dir() else []:
        match = _STEP.match(child.name)
        if match and (child / "trainer_state.json").is_file():
            found.append((int(match.group(1)), child))
    return max(found)[1] if found else None


def stamp_callback(policy: PolicyConfig, arm: str):
    """A TrainerCallback that writes warpk_policy.json into every checkpoint the Trainer saves."""
    from transformers import TrainerCallback

    class _Stamp(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if state.is_world_process_zero and folder.is_dir():
                write_stamp(folder, policy, arm=arm, global_step=state.global_step)

    return _Stamp()


def check_checkpoint(policy: PolicyConfig, folder: Path | None = None) -> dict:
    """The stamp of `policy.checkpoint` (or `folder`) once it is known to be loadable as the
    requested policy: the folder exists, holds what its fine-tuning writes, and was trained from
    the same base. Cheap (reads two small files): preflight runs it before anything loads."""
    folder = Path(folder or policy.checkpoint or "")
    if not folder.is_dir():
        raise CheckpointMismatch(f"policy.checkpoint={folder} is not a directory")
    needed = "adapter_config.json" if policy.finetune == "lora" else "config.json"
    if not (folder / needed).is_file():
        kind = "a peft LoRA adapter" if policy.finetune == "lora" else "a fully fine-tuned model"
        raise CheckpointMismatch(
            f"policy.checkpoint={folder} holds no {needed}: not {kind} (policy.finetune={policy.finetune})"
        )
    return check_stamp(folder, policy)


def load_trained(policy: PolicyConfig, folder: Path, cache_dir: Path, dtype=None, trainable: bool = False,
                 corpus_root: Path | None = None):
    """(model trained from `policy`, as saved in `folder`, tokenizer), after check_checkpoint.

    LoRA: the base policy with the adapter of `folder` (its weights trainable with `trainable`,
    so GRPO continues the SFT adapter rather than starting a new one). Full: the saved model."""
    import torch

    from warpk.policy import load_policy

    folder = Path(folder)
    check_checkpoint(policy, folder)
    if policy.finetune == "full":  # the folder is the whole model and its tokenizer: no base load
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype or torch.float32)
        return model, AutoTokenizer.from_pretrained(folder)
    from peft import PeftModel

    base, tokenizer = load_policy(policy, cache_dir, dtype=dtype, corpus_root=corpus_root)
    return PeftModel.from_pretrained(base, str(folder), is_trainable=trainable), tokenizer
