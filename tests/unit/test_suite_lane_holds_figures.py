"""The session-29 figures of the test suite on the machine's lane lock in docs/benchmarks.md,
recomputed from docs/data/suite-lane-holds-cpu-2026-12-06/ by benchmarks/lane_holds.py's code."""

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("lane_holds", REPO / "benchmarks" / "lane_holds.py")
lane_holds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lane_holds)
by_module, read, summary = lane_holds.by_module, lane_holds.read, lane_holds.summary
DATA = REPO / "docs" / "data" / "suite-lane-holds-cpu-2026-12-06"
TEXT = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())


def wall_s(commit: str) -> float:
    line = (DATA / f"pytest-{commit}.txt").read_text()
    return float(line.split(" in ")[1].split("s")[0])


@pytest.mark.parametrize("commit", ["fc28807", "571ebe8"])
def test_each_row_recomputes_from_its_log(commit):
    s = summary(read(DATA / f"{commit}.txt"))
    row = (f"| {commit} | {wall_s(commit):.0f} | {s['holds']} | {s['held_s']:.0f} | {s['span_s']:.0f} | "
           f"{s['waited_s']:.0f} |")
    assert row in TEXT, row


def test_the_modules_quoted():
    before = {m: held for m, held, _ in by_module(read(DATA / "fc28807.txt"))}
    after = {m: held for m, held, _ in by_module(read(DATA / "571ebe8.txt"))}
    for module in ("tests/integration/test_exploits.py", "tests/unit/test_sandbox.py"):
        assert f"{module.split('/')[-1]} {before[module]:.0f} -> {after[module]:.0f} s" in TEXT
