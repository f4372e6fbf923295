"""Multi-turn refinement for GRPO (`model.turns=k`): the evaluator's verdict is fed back.

The completion trl sampled is turn 0, the only one trained. For turns 1..k-1 the conversation
(prompt, answer, a user message with the evaluator's verdict: status, error text, speedup) is
continued by the CURRENT policy without gradient, and each new answer is evaluated against the
same task. The `total` reward of turn 0 is the discounted return

    R = sum_{t=0}^{k-1} gamma^t * total_reward(record_t),   gamma = train.turn_discount

so an answer that the policy can fix from feedback earns some credit, always less than being
right at once (for gamma < 1). The other terms (correctness, speedup, ...) stay those of turn 0.
Per-turn means go to trl's metrics as `turns/turn<t>/total_mean`.

Non-goals: no gradient through refinement turns (they are rollouts of the current policy);
no tool calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from warpk.config import RewardConfig
from warpk.records import EvalRecord
from warpk.rewards import total_reward
from warpk.rewards.adapters import RecordSource, completion_text


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


class DiscountedTotal:
    """The `total` reward function of a k-turn GRPO run; `bind(trainer)` before training."""

    __name__ = "total"

    def __init__(
        self, first: RecordSource, refine: RecordSource, cfg: RewardConfig, turns: int, discount: float,
        max_new_tokens: int, temperature: float,
    ) -> None:  # fmt: skip
        self.first, self.refine, self.cfg = first, refine, cfg
        self.turns, self.discount = turns, discount
        self.max_new_tokens, self.temperature = max_new_tokens, temperature
        self.trainer = None

    def bind(self, trainer) -> None:
        self.trainer = trainer

    def generate(self, conversations: list[list[dict]]) -> list[str]:
        """One continuation per conversation from the current policy (no gradient)."""
        import torch

        model, tokenizer = self.trainer.model, self.trainer.processing_class
        texts = [
            tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False)
            for c in conversations
        ]
        enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left").to(model.device)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                # trl's own sampling settings (temperature, max tokens, pad/eos, no torch.compile)
                out = model.generate(**enc, generation_config=self.trainer.generation_config)
        finally:
            model.train(was_training)
        width = enc["input_ids"].shape[1]
        return [tokenizer.decode(row[width:], skip_special_tokens=True) for row in out]

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], task_id: Sequence[str], **kwargs: Any
    ) -> list[float]:
        if self.trainer is None:
            raise RuntimeError("DiscountedTotal.bind(trainer) must be called before training")
        task_ids = list(task_id)
        records = self.first.records_for(completions, task_ids)
        totals = [[total_reward(r, self.cfg) for r in records]]
        conversations = [
            [*p, {"role": "assistant", "content": completion_text(c)}]
            for p, c in zip(prompts, completions, strict=True)
        ]
        for _ in range(1, self.turns):
            conversations = [
                [*c, {"role": "user", "content": feedback(r)}]
                for c, r in zip(conversations, records, strict=True)
            ]
            answers = self.generate(conversations)
            records = self.refine.records_for(answers, task_ids)
            totals.append([total_reward(r, self.cfg) for r in records])
            conversations = [
                [*c, {"role": "assistant", "content": a}] for c, a in zip(conversations, answers, strict=True)
            ]
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            for t, turn in enumerate(totals):
                log_metric(f"turns/turn{t}/total_mean", sum(turn) / len(turn))
        return discounted_return(totals, self.discount)

    def __repr__(self) -> str:
        return f"DiscountedTotal(turns={self.turns}, discount={self.discount})"
