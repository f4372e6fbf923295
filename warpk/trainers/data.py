"""Training data from the task suite: the train split only, prompts built by warpk.policy.

- `train_tasks`: the tasks a trainer may see. `tasks.split=all` means the train split here:
  the held-out split is never trained on, and `tasks.split=heldout` is refused.
- `heldout_tasks`: the tasks a trained policy is evaluated on afterwards.
- `grpo_dataset`: one row per task, `prompt` (chat messages) and `task_id` (trl passes every
  column to the reward functions, so each completion is scored against its own task).
- `sft_dataset`: (prompt -> reference solution) pairs, the solution wrapped in the fenced block
  the prompt asks for. Only solutions that run on the target are used (on a CPU: the torch
  ones; CUDA/Triton need a GPU), the same rule `stage=evaluate` applies.

Non-goals: no tokenisation beyond measuring prompt length; no trl import.
"""

from __future__ import annotations

import dataclasses
import random

from warpk.config import RunConfig
from warpk.evaluator.static import candidate_backend
from warpk.policy import build_prompt
from warpk.tasks import Task, TaskError, load_suite


def train_tasks(config: RunConfig) -> list[Task]:
    """The train split of the selected suite (tasks.subset respected)."""
    if config.tasks.split == "heldout":
        raise TaskError("stage=train never trains on tasks.split=heldout; use tasks.split=train (or all)")
    tasks = load_suite(dataclasses.replace(config.tasks, split="train"))
    if not tasks:
        raise TaskError(f"no train-split tasks selected (tasks.subset={config.tasks.subset})")
    return tasks


HELDOUT_SAMPLE_SEED = 0  # fixed: every run on a suite evaluates the same sample


def heldout_tasks(config: RunConfig) -> list[Task]:
    """The held-out split of the suite, all of it or (train.heldout_tasks = N) the same seeded
    sample of N of it for every run: evaluation is comparable across runs and arms."""
    tasks = load_suite(dataclasses.replace(config.tasks, split="heldout", subset=[]))
    n = config.train.heldout_tasks
    if n and n < len(tasks):
        chosen = set(random.Random(HELDOUT_SAMPLE_SEED).sample([t.name for t in tasks], n))
        tasks = [t for t in tasks if t.name in chosen]
    return tasks


def runs_on(source: str, device: str) -> bool:
    """True when a solution can run on `device` (CUDA and Triton need a GPU)."""
    return device == "cuda" or candidate_backend(source) == "torch"


def fenced(code: str) -> str:
    """`code` as the answer format the prompt asks for: one ```python block."""
    return f"```python\n{code.rstrip()}\n```"


def prompt_length(tokenizer, messages: list[dict]) -> int:
    """Tokens of the chat-formatted prompt, generation prompt included."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return len(tokenizer(text)["input_ids"])


def _fits(tokenizer, messages: list[dict], limit: int) -> bool:
    return tokenizer is None or prompt_length(tokenizer, messages) <= limit


def grpo_rows(config: RunConfig, tasks: list[Task], tokenizer=None) -> list[dict]:
    """Rows {prompt, task_id}; prompts longer than train.max_prompt_length are left out (trl
    1.16 does not truncate prompts). Raises TaskError when none is left."""
    rows = []
    for task in tasks:
        messages = build_prompt(task, config.hardware.name)
        if _fits(tokenizer, messages, config.train.max_prompt_length):
            rows.append({"prompt": messages, "task_id": task.task_id})
    if not rows:
        raise TaskError(
            f"every task prompt is longer than train.max_prompt_length={config.train.max_prompt_length}"
        )
    return rows


def sft_rows(config: RunConfig, tasks: list[Task], tokenizer=None) -> list[dict]:
    """Rows {prompt, completion, task_id}: one per task solution that runs on the target."""
    rows = []
    for task in tasks:
        messages = build_prompt(task, config.hardware.name)
        if not _fits(tokenizer, messages, config.train.max_prompt_length):
            continue
        for path in task.solutions:
            source = path.read_text()
            if runs_on(source, config.hardware.device):
                answer = [{"role": "assistant", "content": fenced(source)}]
                rows.append({"prompt": messages, "completion": answer, "task_id": task.task_id})
    if not rows:
        raise TaskError(
            f"no reference solution of the train split runs on hardware={config.hardware.name} "
            "(CUDA/Triton solutions need a GPU)"
        )
    return rows


def to_dataset(rows: list[dict]):
    """A `datasets.Dataset` of the rows (imported here: datasets is heavy)."""
    from datasets import Dataset

    return Dataset.from_list(rows)
