"""docs/benchmarks.md's "which path a batch took" table recomputed from the H100 refcheck records
of sessions 21-22 and the problems' I/O sizes (benchmarks/kernelbench_io_sizes.py): the figures
behind warpk.evaluator.link's DEVICE_MEMORY_BYTES."""

import json
import statistics

from tests.conftest import REPO
from warpk.evaluator import link

DATA = REPO / "docs" / "data"
DOC = (REPO / "docs" / "benchmarks.md").read_text()
RECORDS = ["refcheck-h100-2026-12-05b/records-L1.jsonl", "refcheck-h100-2026-12-05b/records-L2-first30.jsonl",
           "refcheck-h100-2026-12-05c/records-L2-31-98.jsonl", "refcheck-h100-2026-12-05c/records-L3.jsonl"]
AFTER = DATA / "refcheck-h100-2026-12-05d"  # after the change (3214340): the group re-measured
MIB = 1 << 20
BINS = {"under 128 MiB": (0, 128 * MIB), "128-256 MiB": (128 * MIB, 256 * MIB),
        "256 MiB or more": (256 * MIB, 1 << 62)}


def _moved(record: dict, sizes: dict) -> int | None:
    """max(inputs, outputs) of one call x calls per batch: what Link.carrier_for compares."""
    size = sizes.get(record["task_id"])
    return max(size) * record["calls_per_batch"] if isinstance(size, list) else None


def _at(speedups: list[float], q: float) -> float:
    """kernelbench_refcheck's percentile rule over sorted speedups."""
    return speedups[round(q * (len(speedups) - 1))]


def _old() -> dict[str, dict]:
    return {json.loads(x)["task_id"]: json.loads(x) for name in RECORDS
            for x in (DATA / name).read_text().splitlines()}


def _new() -> dict[str, dict]:
    """The 27 copies re-measured at 3214340."""
    return {json.loads(x)["task_id"]: json.loads(x) for path in sorted(AFTER.glob("records-*.jsonl"))
            for x in path.read_text().splitlines()}


def _mix() -> dict[str, dict]:
    """Sessions 21-22's records with the 27 re-measured at 3214340 in their place."""
    return {**_old(), **_new()}


def _rows() -> dict[str, dict]:
    sizes = json.loads((DATA / "kernelbench-io-sizes.json").read_text())
    records = list(_old().values())
    assert len(records) == 248 and all(r["status"] == "ok" for r in records)
    groups = {name: [] for name in [*BINS, "not sized"]}
    for r in records:
        moved = _moved(r, sizes)
        name = "not sized" if moved is None else next(n for n, (lo, hi) in BINS.items() if lo <= moved < hi)
        groups[name].append(r)
    rows = {}
    for name, group in groups.items():
        speedups = sorted(r["speedup"] for r in group)
        contains = sum(r["speedup_low"] <= 1 <= r["speedup_high"] for r in group)
        rows[name] = {"n": len(group), "median": f"{statistics.median(speedups):.3f}",
                      "range": f"{_at(speedups, 0.05):.3f}-{_at(speedups, 0.95):.3f}", "contains": contains,
                      "share": f"{100 * contains / len(group):.0f}%", "below": sum(s < 0.9 for s in speedups)}
    return rows


def test_the_path_table_is_its_records_and_sizes():
    rows = _rows()
    for name, row in rows.items():
        line = (f"| {name} | {row['n']} | {row['median']} | {row['range']} | "
                f"{row['contains']}/{row['n']} ({row['share']}) | {row['below']} |")
        assert line in DOC, line
    # the change the table supports: host memory only under 128 MiB a batch
    assert link.DEVICE_MEMORY_BYTES == 128 * MIB
    moved = rows["128-256 MiB"]
    assert moved["below"] >= 15 and rows["256 MiB or more"]["below"] <= 2


def test_the_modelled_share_is_labelled_and_recomputes():
    """If the 128-256 MiB batches did as well as those of 256 MiB or more (a model, not a run)."""
    rows = _rows()
    big, moved = rows["256 MiB or more"], rows["128-256 MiB"]
    projected = (rows["under 128 MiB"]["contains"] + rows["not sized"]["contains"] + big["contains"]
                 + round(moved["n"] * big["contains"] / big["n"]))
    assert f"modelled: {projected}/248 ({100 * projected / 248:.0f}%)" in DOC


# --- after the change (3214340): the group re-measured -----------------------------------------


def test_the_group_re_measured_in_device_memory_is_its_records():
    old, new, mix = _old(), _new(), _mix()
    sizes = json.loads((DATA / "kernelbench-io-sizes.json").read_text())
    assert len(new) == 27 and all(128 * MIB <= _moved(r, sizes) < 256 * MIB for r in new.values())
    assert all(r["status"] == "ok" for r in new.values())
    speedups = sorted(r["speedup"] for r in new.values())
    contains = sum(r["speedup_low"] <= 1 <= r["speedup_high"] for r in new.values())
    assert (f"27/27 `ok`, median {statistics.median(speedups):.3f}, "
            f"5-95% {_at(speedups, 0.05):.3f}-{_at(speedups, 0.95):.3f}, "
            f"the interval contains 1 for\n    {contains}/27") in DOC
    assert min(speedups) >= 0.9
    assert len(mix) == 248 and set(new) <= set(old)
    inside = sum(r["speedup_low"] <= 1 <= r["speedup_high"] for r in mix.values())
    median = statistics.median(r["speedup"] for r in mix.values())
    slow = sum(r["speedup"] < 0.8 for r in mix.values())
    faster = sum(r["speedup_low"] > 1.1 for r in mix.values())
    assert (f"the interval contains 1 for {inside}/248 ({100 * inside / 248:.0f}%; the goal is 90%), median\n"
            f"    {median:.3f}, none counted faster, {slow} below 0.8") in DOC and faster == 0


def test_the_copies_left_outside_their_interval_are_the_alone_correction():
    """docs/benchmarks.md: of the mix's copies whose interval excludes 1, the slowest half had
    the reference-alone correction applied, and without it their point speedups are about 1."""
    records = _mix()
    outside = [r for r in records.values() if not r["speedup_low"] <= 1 <= r["speedup_high"]]
    corrected = [r for r in outside if (r["ref_contention"] or 0) > 1.05]
    assert len(outside) == 18 and len(corrected) == 9
    assert sorted(r["speedup"] for r in corrected) == sorted(r["speedup"] for r in outside)[:9]
    contention = sorted(r["ref_contention"] for r in corrected)
    assert f"`ref_contention` {contention[0]:.2f}-{contention[-1]:.2f}" in DOC
    undone = sorted(r["speedup"] * r["ref_contention"] / 1.05 for r in corrected)
    assert f"is\n  {undone[0]:.2f}-{undone[-1]:.2f} for all 9" in DOC
    others = sorted(r["speedup"] for r in outside if r not in corrected)
    assert f"The other 9 are at {others[0]:.2f}-{others[-1]:.2f}" in DOC
