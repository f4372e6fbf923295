"""Checkpoints: where they live, which is the latest, and what policy they were trained from.

Layout under a run dir:
    checkpoints/checkpoint-<step>/   transformers Trainer checkpoints (adapter, optimizer,
                                     scheduler, RNG, trainer_state.json) + warpk_policy.json
    adapter/                         the final LoRA adapter (peft `save_pretrained`) + tokenizer
                                     + warpk_policy.json

`warpk_policy.json` names the policy preset (and, for `tiny`, its shape) the adapter was trained
on. `load_adapter` refuses an adapter whose stamp differs from the requested preset: LoRA weights
applied to another base model would load silently (same module names) and sample garbage.

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
    """What identifies the base model an adapter belongs to."""
    return {
        "policy": policy.name,
        "hf_id": policy.hf_id,
        "hidden_size": policy.hidden_size,
        "num_hidden_layers": policy.num_hidden_layers,
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
    stamp = read_stamp(folder)
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
            if folder.is_dir():
                write_stamp(folder, policy, arm=arm, global_step=state.global_step)

    return _Stamp()


def load_adapter(policy: PolicyConfig, folder: Path, cache_dir: Path):
    """(model with the LoRA adapter of `folder`, tokenizer), after checking the stamp."""
    from peft import PeftModel

    from warpk.policy import load_policy

    folder = Path(folder)
    if not (folder / "adapter_config.json").is_file():
        raise CheckpointMismatch(f"policy.checkpoint={folder} holds no adapter_config.json (peft adapter)")
    check_stamp(folder, policy)
    base, tokenizer = load_policy(policy, cache_dir)
    return PeftModel.from_pretrained(base, str(folder)), tokenizer
