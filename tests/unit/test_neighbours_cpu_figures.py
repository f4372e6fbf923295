"""The lane lock's CPU benchmark in docs/benchmarks.md ("Two runs on one machine"), recomputed
from docs/data/neighbours-cpu-2026-12-06/ and the runs alone in docs/data/refcheck-cpu-2026-12-06/."""

import json
import re
import statistics
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data" / "neighbours-cpu-2026-12-06"
ALONE = REPO / "docs" / "data" / "refcheck-cpu-2026-12-06"
TEXT = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    i = (len(xs) - 1) * p
    lo = int(i)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (i - lo)


def width(records: list[dict]) -> float:
    return statistics.median(r["speedup_high"] - r["speedup_low"] for r in records)


def wall(name: str) -> str:
    return re.search(r"wall (\d+) s", (DATA / f"log-{name}.txt").read_text()).group(1)


@pytest.mark.parametrize("name", ["078e0ce-1", "078e0ce-2", "9993205-1", "9993205-2"])
def test_each_row_recomputes(name):
    records = load(DATA / f"records-{name}.jsonl")
    sp = [r["speedup"] for r in records]
    commit, run = name.split("-")
    row = (f"| {commit} | {run} | {wall(name)} | {sum(r['status'] == 'ok' for r in records)}/24 | "
           f"{statistics.median(sp):.3f} | {percentile(sp, 0.05):.3f}-{percentile(sp, 0.95):.3f} | "
           f"{sum(r['speedup_low'] <= 1 <= r['speedup_high'] for r in records)}/24 | {width(records):.3f} |")
    assert row in TEXT, row


def test_the_runs_alone():
    alone = [load(p) for p in sorted(ALONE.glob("records-bundled-cpu-*.jsonl"))]
    widths = [width(records) for records in alone]
    assert len(widths) == 9
    assert (f"nine runs alone (the same script, one at a time) had median widths "
            f"{min(widths):.3f}-{max(widths):.3f}") in TEXT
    medians = [statistics.median(r["speedup"] for r in records) for records in alone]
    assert f"put them ({min(medians):.3f}-{max(medians):.3f})" in TEXT
    side_by_side = [statistics.median(r["speedup"] for r in load(p))
                    for p in sorted(DATA.glob("records-*.jsonl"))]
    assert f"medians ({min(side_by_side):.3f}-{max(side_by_side):.3f}) stay" in TEXT
    without = [width(load(DATA / f"records-078e0ce-{i}.jsonl")) for i in (1, 2)]
    assert f"{min(without) / max(widths):.0f}-{max(without) / min(widths):.0f}x" in TEXT
