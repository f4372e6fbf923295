"""Session 29's pair of side-by-side runs in docs/benchmarks.md (the lane's start outside the lock),
recomputed from docs/data/neighbours-cpu-2026-12-06-89521b6/."""

import re
import statistics
from pathlib import Path

import pytest

from tests.unit.test_neighbours_cpu_figures import TEXT, load, percentile, width

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "neighbours-cpu-2026-12-06-89521b6"
NAMES = ["old-fc28807-1", "old-fc28807-2", "head-89521b6-1", "head-89521b6-2",  # the first pair
         "old-fc28807b-1", "old-fc28807b-2", "head-1be7e76-1", "head-1be7e76-2"]  # the second


def row(name: str) -> str:
    records = load(DATA / f"records-{name}.jsonl")
    sp = [r["speedup"] for r in records]
    _, commit, run = name.split("-")
    commit = commit.rstrip("b")  # fc28807b: fc28807's second pair
    wall = re.search(r"ok in (\d+) s", (DATA / f"log-{name}.txt").read_text()).group(1)
    return (f"| {commit} | {run} | {wall} | {sum(r['status'] == 'ok' for r in records)}/24 | "
            f"{statistics.median(sp):.3f} | {percentile(sp, 0.05):.3f}-{percentile(sp, 0.95):.3f} | "
            f"{sum(r['speedup_low'] <= 1 <= r['speedup_high'] for r in records)}/24 | {width(records):.3f} |")


@pytest.mark.parametrize("name", NAMES)
def test_each_row_recomputes(name):
    assert row(name) in TEXT, row(name)
