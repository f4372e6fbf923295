"""The GRPO reward source: completions -> records (warpk.policy.completions), ONE
`evaluate_many` per reward batch.

Each completion is bound to the task of its own prompt (the `task_id` column trl repeats per
generation). A completion without code gets no record (None), which the rewards score at the
no-code tier.

`counts` accumulates what the evaluator said over the run, for the summary.

Non-goals: no reward arithmetic (warpk.rewards) and no trl import.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from warpk.evaluator import Evaluator
from warpk.policy.completions import score_completions
from warpk.records import EvalRecord
from warpk.rewards.adapters import completion_text
from warpk.tasks import Task


class EvaluatorSource:
    """A `warpk.rewards.RecordSource` backed by the real evaluator."""

    def __init__(self, evaluator: Evaluator, tasks: Sequence[Task]) -> None:
        self.evaluator = evaluator
        self.tasks = {t.task_id: t for t in tasks}
        self.batches = 0
        self.counts: Counter[str] = Counter()  # status -> completions; "no_code" for None records
        self.last: list[EvalRecord | None] = []

    def records_for(self, completions: Sequence[Any], task_ids: Sequence[str]) -> list[EvalRecord | None]:
        if len(completions) != len(task_ids):
            raise ValueError(f"{len(completions)} completions but {len(task_ids)} task ids")
        unknown = sorted(set(task_ids) - set(self.tasks))
        if unknown:
            raise KeyError(f"completions for tasks this source does not know: {unknown}")
        records = score_completions(self.evaluator, [
            (self.tasks[task_id], completion_text(c), f"batch{self.batches}-completion{i}")
            for i, (c, task_id) in enumerate(zip(completions, task_ids, strict=True))
        ])  # fmt: skip
        self.batches += 1
        self.counts.update("no_code" if r is None else r.status for r in records)
        self.last = records
        return records
