"""The session-34 figures of the H100 run at 6915f12 in docs/benchmarks.md (`pytest -m gpu`, L1),
recomputed from docs/data/refcheck-h100-2026-12-07-6915f12/ against 4fe3292, 078e0ce and, for
all 250, L2 and L3 at 6a72ac3."""

import statistics
from pathlib import Path

from tests.unit.test_refcheck_h100_078e0ce_figures import TEXT, by_task, inside, load, now, row
from tests.unit.test_refcheck_h100_4fe3292_figures import this_run as run_4fe3292
from tests.unit.test_refcheck_h100_6a72ac3_figures import this_run as run_6a72ac3

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "refcheck-h100-2026-12-07-6915f12"


def l1() -> list[dict]:
    return load(DATA / "records-L1.jsonl")


def name(r: dict) -> str:
    return r["task_id"].split("/")[-1].rstrip("_")


def number(r: dict) -> int:
    return int(name(r).split("_")[0])


def test_the_rows_recompute_from_their_records():
    records = l1()
    assert len({r["task_id"] for r in records}) == len(records) == 100
    old, older = by_task({"L1": run_4fe3292()["L1"]}), by_task(now())
    assert row("6915f12", "L1", records) in TEXT
    assert row("4fe3292", "L1", [old[r["task_id"]] for r in records]) in TEXT
    assert row("078e0ce", "L1", [older[r["task_id"]] for r in records]) in TEXT
    both = records + run_6a72ac3()["L2"] + run_6a72ac3()["L3"]
    assert len({r["task_id"] for r in both}) == 250
    assert row("6915f12 + 6a72ac3", "L1-L3", both) in TEXT


def test_the_headline_and_the_coverage_across_two_commits():
    records = l1()
    assert all(r["status"] == "ok" for r in records) and not any(r["speedup_low"] > 1.10 for r in records)
    median, covered = statistics.median(r["speedup"] for r in records), sum(map(inside, records))
    headline = f"**100/100 `ok`, `fast_1` 0**, median {median:.3f}; the interval contains 1 for {covered}/100"
    assert headline in TEXT
    total = covered + sum(map(inside, run_6a72ac3()["L2"] + run_6a72ac3()["L3"]))
    assert f"Across the two commits, {total}/250 ({round(100 * total / 250)}%)" in TEXT


def test_the_low_block_is_the_huge_l1_run_and_the_other_misses_lie_above_1():
    records = sorted(l1(), key=number)
    low = [r for r in records if not inside(r) and r["speedup_high"] < 1]
    assert all(25 <= number(r) <= 38 for r in low)
    assert f"{len(low)} copies ({', '.join(name(r) for r in low)})" in TEXT
    points = [r["speedup"] for r in low]
    assert f"(points {min(points):.3f}-{max(points):.3f})" in TEXT
    before = by_task({"L1": run_4fe3292()["L1"]})
    old = [before[r["task_id"]]["speedup"] for r in low]
    assert f"were {min(old):.3f}-{max(old):.3f} at 4fe3292" in TEXT
    high = [r for r in records if not inside(r) and r["speedup_low"] > 1]
    assert len(high) + len(low) == 100 - sum(map(inside, records))
    assert "The other 3 misses lie above 1: " + ", ".join(
        f"{name(r)[:len('58_conv_transposed_3D')] if number(r) == 58 else name(r)} {r['speedup']:.3f}"
        for r in high) in TEXT


def test_the_gpu_tests_passed_at_this_commit():
    log = (DATA / "pytest-gpu.log").read_text()
    assert "26 passed, 1145 deselected in 463.35s" in log and "FAILED" not in log
    assert "**`pytest -m gpu`: 26 passed, 1145 deselected in 463.35 s**" in TEXT
