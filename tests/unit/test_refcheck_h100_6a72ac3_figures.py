"""The session-32 figures of the H100 run at 6a72ac3 in docs/benchmarks.md (`pytest -m gpu`, L2
and L3), recomputed from docs/data/refcheck-h100-2026-12-07-6a72ac3/ against 078e0ce and 4fe3292."""

import statistics
from pathlib import Path

import pytest

from tests.unit.test_refcheck_h100_078e0ce_figures import TEXT, by_task, flat, inside, load, now, row
from tests.unit.test_refcheck_h100_4fe3292_figures import this_run as run_4fe3292

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "refcheck-h100-2026-12-07-6a72ac3"


def this_run() -> dict[str, list[dict]]:
    return {"L2": load(DATA / "records-L2.jsonl"), "L3": load(DATA / "records-L3.jsonl")}


def name(r: dict) -> str:
    return r["task_id"].split("/")[-1]


@pytest.mark.parametrize("level", ["L2", "L3", "L2+L3"])
def test_each_row_recomputes_from_its_records(level):
    levels = this_run()
    records = flat(levels) if level == "L2+L3" else levels[level]
    assert len({r["task_id"] for r in records}) == len(records) == {"L2": 100, "L3": 50}.get(level, 150)
    old = by_task(now())
    assert row("6a72ac3", level, records) in TEXT
    assert row("078e0ce", level, [old[r["task_id"]] for r in records]) in TEXT
    if level == "L3":
        before = by_task(run_4fe3292())
        assert row("4fe3292", level, [before[r["task_id"]] for r in records]) in TEXT


def test_the_headline_and_the_coverage_across_two_commits():
    records = flat(this_run())
    assert all(r["status"] == "ok" for r in records) and not any(r["speedup_low"] > 1.10 for r in records)
    covered, l1 = sum(map(inside, records)), sum(map(inside, run_4fe3292()["L1"]))
    median = statistics.median(r["speedup"] for r in records)
    assert f"**150/150 `ok`, `fast_1` 0**, median {median:.3f}; the interval contains 1 for {covered}/150" \
        in TEXT
    share = round(100 * (covered + l1) / 250)
    assert f"With L1 from 4fe3292 ({l1}/100), {covered + l1}/250 ({share}%)" in TEXT


def test_the_copies_timed_alone_contain_1_through_the_interleaved_ratio():
    alone = sorted((r for r in flat(this_run()) if r.get("basis") == "alone"), key=lambda r: r["speedup"])
    assert alone and all(inside(r) for r in alone)
    assert all(r["speedup_high"] >= r["interleaved_speedup"] for r in alone)  # wider's upper end
    listed = ", ".join(f"{name(r)} {r['speedup']:.3f}" for r in alone)
    upper = ", ".join(f"{r['interleaved_speedup']:.3f}" for r in alone)
    assert f"{len(alone)} copies had basis `alone` ({listed})" in TEXT and f"ratio ({upper})" in TEXT


def test_the_l2_misses_lie_above_1():
    misses = [r for r in this_run()["L2"] if not inside(r)]
    assert misses and all(r["speedup_low"] > 1 for r in misses)
    lo, hi = min(r["speedup"] for r in misses), max(r["speedup"] for r in misses)
    assert f"{len(misses)} copies at {lo:.3f}-{hi:.3f}, each interval's lower end above 1" in TEXT


def test_the_gpu_tests_passed():
    log = (DATA / "pytest-gpu.log").read_text()
    assert "26 passed, 1113 deselected in 497.86s" in log and " FAILED " not in log
    assert "**`pytest -m gpu`: 26 passed, 1113 deselected in 497.86 s**" in TEXT
