"""#33 item 3 (docs/data/multiturn-synthetic-e49ae00/): single-shot against 2-turn held-out
correct rate on the claim's five M0s recomputes from the committed records, at one generation
budget, and docs/training.md quotes it."""

import gzip
import json
from pathlib import Path

import pytest

from warpk.records import EvalRecord
from warpk.stats import t_interval

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data" / "multiturn-synthetic-e49ae00"
CLAIM = REPO / "docs" / "data" / "learning-synthetic-claim-e49ae00"
TEXT = " ".join((REPO / "docs" / "training.md").read_text().split())


def records(path: Path) -> list[EvalRecord]:
    return [EvalRecord.from_json(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def correct(rs: list[EvalRecord]) -> float:
    return sum(r.status == "ok" for r in rs) / len(rs)


def test_each_seed_compares_the_same_tasks_at_the_same_budget_and_the_table_recomputes():
    table = json.loads((DATA / "multiturn.json").read_text())
    assert [row["seed"] for row in table["seeds"]] == [0, 1, 2, 3, 4]
    diffs = []
    for row in table["seeds"]:
        single = records(CLAIM / f"seed{row['seed']}" / "m0-records.jsonl.gz")
        last = records(DATA / f"seed{row['seed']}" / "two-turn-records.jsonl.gz")
        assert {r.task_id for r in single} == {r.task_id for r in last}
        assert len(single) == 2 * len(last) == 192
        assert row["single_shot_correct"] == pytest.approx(correct(single))
        assert row["two_turn_last_correct"] == pytest.approx(correct(last))
        summary = json.loads((DATA / f"seed{row['seed']}" / "two-turn-summary.json").read_text())
        assert row["two_turn_turn0_correct"] == summary["turn0/correct_rate"]
        assert "model.turns=2" in (DATA / f"seed{row['seed']}" / "command.txt").read_text()
        diffs.append(correct(last) - correct(single))
    iv = t_interval(diffs, 0.95)
    paired = table["summary"]["two_turn_minus_single"]
    assert (paired["mean"], paired["low"], paired["high"]) == pytest.approx((iv.estimate, iv.low, iv.high))
    assert f"{iv.estimate:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}]" in TEXT
