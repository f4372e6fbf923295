"""Completions -> evaluator records, in one home: the GRPO reward source and the policy
evaluation both score text this way.

A completion is scored against its OWN task (never a position in the batch: the earlier
implementation scored completion i against task i mod 8, notes/seed_repo_audit.md). One without
a fenced python block defining `ModelNew` gets None (no code: nothing ran); the others go to the
evaluator in ONE `evaluate_many` call, in order.

Non-goals: no reward arithmetic (warpk.rewards); no sampling (warpk.trainers.sample).
"""

from __future__ import annotations

from collections.abc import Sequence

from warpk.evaluator import EvalItem, Evaluator
from warpk.policy.prompt import extract_code
from warpk.records import EvalRecord
from warpk.tasks import Task


def score_completions(
    evaluator: Evaluator, completions: Sequence[tuple[Task, str, str]]
) -> list[EvalRecord | None]:
    """Records of (task, completion text, candidate name) triples, in order; None = no code."""
    codes = [extract_code(text) for _, text, _ in completions]
    slots = [i for i, code in enumerate(codes) if code is not None]
    items = [EvalItem(completions[i][0], codes[i], completions[i][2]) for i in slots]
    records: list[EvalRecord | None] = [None] * len(completions)
    for i, record in zip(slots, evaluator.evaluate_many(items) if items else [], strict=True):
        records[i] = record
    return records
