"""The session-24 table of the bundled copies on the CPU in docs/benchmarks.md, recomputed from
the records in docs/data/refcheck-cpu-2026-12-06/ (every figure there comes from a file here)."""

import json
import statistics
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data" / "refcheck-cpu-2026-12-06"
DOC = (REPO / "docs" / "benchmarks.md").read_text()
RUNS = ["records-bundled-cpu-warmup1.jsonl", "records-bundled-cpu-warmup2.jsonl",
        "records-bundled-cpu-warm200ms-lower.jsonl", "records-bundled-cpu-warm200ms-interval.jsonl",
        "records-bundled-cpu-fastest.jsonl"]


@pytest.mark.parametrize("name", RUNS)
def test_each_row_recomputes_from_its_records(name):
    records = [json.loads(line) for line in (DATA / name).read_text().splitlines()]
    speedups = [r["speedup"] for r in records]
    inside = sum(r["speedup_low"] <= 1 <= r["speedup_high"] for r in records)
    contention = statistics.median(r["ref_contention"] for r in records)
    alone = [r["speedup"] for r in records if r.get("basis") == "alone"]
    timed_alone = sum(1 for r in records if r.get("basis"))
    ok = sum(r["status"] == "ok" for r in records)
    n = len(records)
    row = (f"| `{name}` | {ok}/{n} | {statistics.median(speedups):.3f} | {inside}/{n} | "
           f"{contention:.3f} | {timed_alone} | {len(alone)} | {min(alone):.3f}-{max(alone):.3f} |")
    assert row in DOC, row


def test_the_cpu_margins_false_fast_count_in_evaluator_md_recomputes():
    """docs/evaluator.md: the bundled copies' lower ends above the `faster` margin on the CPU."""
    from warpk.records import SPEED_BIAS_MARGIN

    folders = ["refcheck-cpu-2026-12-05", "refcheck-cpu-2026-12-06", "settle-ababa-cpu-2026-12-06"]
    runs = sorted(f for folder in folders for f in (REPO / "docs" / "data" / folder).glob("records-*.jsonl"))
    lows = [json.loads(line)["speedup_low"] for f in runs for line in f.read_text().splitlines()]
    over = sorted(low for low in lows if low > 1 + SPEED_BIAS_MARGIN)
    text = " ".join((REPO / "docs" / "evaluator.md").read_text().split())
    assert len(runs) == 19 and len(lows) == 456 and len(over) == 2
    assert f"{len(runs)} runs of the 24 bundled copies" in text
    assert f"{len(lows)} copies), {len(over)} lower ends passed 1.10" in text
    assert f"({over[0]:.3f} and {over[1]:.3f}, both in one run): {len(over) / len(lows):.1%}" in text
