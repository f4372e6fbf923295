"""The session-33 figures of the test suite with one core per xdist worker in docs/benchmarks.md,
recomputed from docs/data/suite-cores-cpu-2026-12-07/ (benchmarks/lane_holds.py's code for the
lane logs; /proc/stat's first line before and after the `-n 4` run)."""

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("lane_holds", REPO / "benchmarks" / "lane_holds.py")
lane_holds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lane_holds)
DATA = REPO / "docs" / "data" / "suite-cores-cpu-2026-12-07"
TEXT = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())


def wall_s(run: str) -> float:
    return float((DATA / f"pytest-{run}.txt").read_text().split(" in ")[1].split("s")[0])


@pytest.mark.parametrize("run, row", [
    ("427fcdb", "| 427fcdb | as session 32 left it | 1133 passed, 28 skipped | {:.0f} s |"),
    ("46be3fd", "| 1134 passed, 28 skipped | **{:.0f} s** |"),
    ("46be3fd-n4", "| 1 failed (a C++ build past 120 s), 1133 passed | {:.0f} s |"),
    ("eb9df89", "| 1 failed (below), 1133 passed, 28 skipped | {:.0f} s |"),
    ("e7397be", "| the split opt-in (off): `make test` as shipped | 1140 passed, 28 skipped | {:.0f} s |"),
])
def test_each_wall_is_pytests_own(run, row):
    assert row.format(wall_s(run)) in TEXT


def test_the_lane_logs_recompute():
    split = lane_holds.summary(lane_holds.read(DATA / "lanes-46be3fd.txt"))
    four = lane_holds.summary(lane_holds.read(DATA / "lanes-46be3fd-n4.txt"))
    assert (f"at 46be3fd: {split['holds']} holds, {split['held_s']:.0f} s held of a {split['span_s']:.0f} s "
            f"span, {split['waited_s']:.0f} s waited") in TEXT
    assert (f"(`-n 4`: {four['held_s']:.0f} s held of a {four['span_s']:.0f} s span, "
            f"{four['waited_s']:.0f} s waited)") in TEXT


def test_the_cores_were_busy():
    before, after = ([int(x) for x in line.split()[1:]] for line in
                     (DATA / "procstat-46be3fd-n4.txt").read_text().splitlines())
    delta = [b - a for a, b in zip(before, after, strict=True)]
    idle_s, total_s = (delta[3] + delta[4]) / 100, sum(delta) / 100  # USER_HZ: 100 on Linux x86_64
    assert f"{100 * (1 - idle_s / total_s):.1f}% busy ({idle_s:.1f} s idle or waiting on I/O of " \
           f"{total_s:.0f} s)" in TEXT
