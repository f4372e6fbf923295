"""Multi-turn refinement for GRPO (`model.turns=k`): the evaluator's verdict is fed back, and every
turn the policy writes is trained on.

`MultiTurnRollout` is trl's `rollout_func`. For each prompt it samples turn 0 from the current
policy, evaluates it, appends a user message with the verdict (status, error text, speedup) and
samples turn 1 from the whole conversation, and so on for k turns. The trained completion is the
conversation after the prompt: every token the policy sampled (`env_mask` 1) and, between turns,
the feedback message and chat-template tokens (`env_mask` 0: trl leaves them out of the loss).
Its `total` reward is the discounted return

    R = sum_{t=0}^{k-1} gamma^t * total_reward(record_t),   gamma = train.turn_discount

so an answer the policy fixes from feedback earns credit, always less than being right at once
(gamma < 1). trl gives one advantage per completion, so every turn's tokens share R: a turn is
not credited only with the rewards from itself on. The other terms (correctness, speedup, ...)
are those of the last turn's answer. Per-turn means go to trl's metrics as
`turns/turn<t>/total_mean`.

`policy.max_new_tokens` bounds each turn, so a completion holds up to k times that many sampled
tokens (plus the feedback); `train/completions_*` counts every turn's answer.

Non-goals: no tool calls; no vLLM generation for the turns (refused at preflight).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from warpk.config import RewardConfig
from warpk.records import EvalRecord
from warpk.rewards import total_reward
from warpk.rewards.adapters import SharedBatch
from warpk.tasks import TaskError
from warpk.trainers.lean_sampling import lean


def feedback(record: EvalRecord | None) -> str:
    """The user message that reports the evaluator's verdict on the previous answer."""
    if record is None:
        return (
            "Your answer has no ```python block defining `class ModelNew`. Answer again with exactly "
            "one fenced python block holding the complete module."
        )
    if record.status == "ok":
        speed = f"{record.speedup:.3f}x" if record.speedup is not None else "unmeasured"
        return (
            f"Evaluation: correct; speedup over the reference {speed}. Make it faster and more "
            "energy-efficient while staying correct; answer with the complete module."
        )
    return (
        f"Evaluation: {record.status}: {(record.error or '')[:500]}\n"
        "Fix the problem; answer with the complete module in one ```python block."
    )


def discounted_return(totals: Sequence[Sequence[float]], discount: float) -> list[float]:
    """sum_t discount^t * totals[t][i] for each completion i (totals[t] = rewards of turn t)."""
    return [sum(discount**t * turn[i] for t, turn in enumerate(totals)) for i in range(len(totals[0]))]


def prompt_key(messages: Sequence[dict]) -> str:
    """What identifies a task's prompt among the dataset's rows: its last message."""
    return str(messages[-1]["content"])


def task_of_prompts(rows: Sequence[dict]) -> dict[str, str]:
    """prompt_key -> task_id of the dataset's rows; two tasks with one prompt are refused."""
    out: dict[str, str] = {}
    for row in rows:
        key = prompt_key(row["prompt"])
        if out.get(key, row["task_id"]) != row["task_id"]:
            raise TaskError(f"tasks {out[key]} and {row['task_id']} have the same prompt: model.turns > 1 "
                            "cannot tell their completions apart")  # fmt: skip
        out[key] = row["task_id"]
    return out


class MultiTurnRollout:
    """trl's rollout_func for `model.turns=k`: trl calls it with the batch's prompts and itself."""

    def __init__(
        self, shared: SharedBatch, cfg: RewardConfig, turns: int, discount: float, task_of: dict[str, str]
    ) -> None:
        self.shared, self.cfg, self.turns, self.discount = shared, cfg, turns, discount
        self.task_of = task_of  # prompt_key -> task_id, from the dataset's rows
        self.trainer = None  # the GRPOTrainer of the call in progress

    def generate(self, contexts: list[list[int]]) -> list[list[int]]:
        """One sampled continuation (token ids, eos included when produced) per context."""
        import torch
        from trl.models import unwrap_model_for_generation

        trainer = self.trainer
        model, tok = trainer.model, trainer.processing_class
        width = max(len(c) for c in contexts)
        pad = tok.pad_token_id
        ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts], device=model.device)
        mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=model.device)
        was_training = model.training
        model.eval()
        try:
            # as trl generates: unwrapped from DDP/ZeRO, activation checkpointing off, trl's own
            # sampling settings (temperature, max tokens, pad/eos; hf-static: its static cache and
            # compiled decode; hf-paged: plain generate, continuous batching is trl's path only)
            with (
                lean(trainer),  # policy.lean_sampling, as trl's own path samples (warpk.trainers.grpo)
                unwrap_model_for_generation(
                    trainer.model_wrapped,
                    trainer.accelerator,
                    gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                    generation_kwargs=trainer.generation_kwargs,
                    gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
                ) as unwrapped,
                torch.no_grad(),
            ):
                out = unwrapped.generate(
                    input_ids=ids, attention_mask=mask, generation_config=trainer.generation_config
                )
        finally:
            model.train(was_training)
        stops = set(trainer.eos_token_ids) | {pad}
        turns = []
        for row in out[:, width:].tolist():
            cut = next((i + 1 for i, t in enumerate(row) if t in stops), len(row))
            turns.append(row[:cut])  # up to and including the first eos; no padding
        return turns

    def between_turns(self, conversation: list[dict], answer: str, verdict: str, last: str) -> list[int]:
        """The tokens the chat template puts after an answer, the feedback message and the next
        assistant header: what the policy reads but did not write. `last` is the text of the
        answer's final sampled token when it was an eos (it is in the completion already), else ""."""
        tok = self.trainer.processing_class
        head = tok.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
        done = [*conversation, {"role": "assistant", "content": answer}]
        before = tok.apply_chat_template(done, tokenize=False)
        after = tok.apply_chat_template(
            [*done, {"role": "user", "content": verdict}], add_generation_prompt=True, tokenize=False
        )
        if not before.startswith(head + answer) or not after.startswith(before):
            raise TaskError(
                "model.turns > 1 needs a chat template that renders an assistant answer verbatim after "
                "the generation prompt, and a conversation as a prefix of its continuation; this "
                "policy's does not (use model.turns=1)"
            )
        closing = before[len(head) + len(answer) :]  # e.g. "<|im_end|>\n"
        if last and closing.startswith(last):
            closing = closing[len(last) :]  # the sampled eos is already in the completion
        return tok(closing + after[len(before) :], add_special_tokens=False)["input_ids"]

    def __call__(self, prompts: list[list[dict]], trainer) -> dict[str, list]:
        self.trainer = trainer
        tok = trainer.processing_class
        task_ids = [self.task_of[prompt_key(p)] for p in prompts]
        texts = [tok.apply_chat_template(p, add_generation_prompt=True, tokenize=False) for p in prompts]
        prompt_ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        completion = [[] for _ in prompts]
        env_mask = [[] for _ in prompts]
        conversations = [list(p) for p in prompts]
        totals, records = [], []
        for t in range(self.turns):
            sampled = self.generate([p + c for p, c in zip(prompt_ids, completion, strict=True)])
            answers = [tok.decode(s, skip_special_tokens=True) for s in sampled]
            records = self.shared.source.records_for(answers, task_ids)
            totals.append([total_reward(r, self.cfg) for r in records])
            for i, s in enumerate(sampled):
                completion[i] += s
                env_mask[i] += [1] * len(s)
            if t == self.turns - 1:
                break
            for i, (answer, record) in enumerate(zip(answers, records, strict=True)):
                ended = bool(sampled[i]) and sampled[i][-1] in trainer.eos_token_ids
                last = tok.decode(sampled[i][-1:]) if ended else ""
                between = self.between_turns(conversations[i], answer, feedback(record), last)
                completion[i] += between
                env_mask[i] += [0] * len(between)
                conversations[i] += [
                    {"role": "assistant", "content": answer},
                    {"role": "user", "content": feedback(record)},
                ]
        # the other reward terms read the last turn's records: the text trl decodes is the key
        texts = tok.batch_decode(completion, skip_special_tokens=True)
        self.shared.prime(texts, task_ids, list(records))
        mode = "train" if trainer.model.training else "eval"
        for t, turn in enumerate(totals):  # this process's completions
            trainer._metrics[mode][f"turns/turn{t}/total_mean"].append(sum(turn) / len(turn))
        returns = discounted_return(totals, self.discount)
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion,
            "logprobs": None,  # only read for vLLM's importance-sampling correction
            "env_mask": env_mask,
            "turn_return": returns,
        }


class DiscountedTotal:
    """The `total` reward of a k-turn run: the rollout's discounted return, per completion."""

    __name__ = "total"

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], turn_return: Sequence[float],
                 **kwargs: Any) -> list[float]:  # fmt: skip
        return [float(r) for r in turn_return]

    def __repr__(self) -> str:
        return "DiscountedTotal()"
