"""benchmarks/replay_timing_log.py against the recorded H100 runs of session 36, and the session-37
figures of docs/benchmarks.md recomputed from them: the reference of the huge L1 copies faster
interleaved than in its own baseline, the copy of its outputs too, and the intervals under the
current rule (the upper end reaching the reference at its alone speed)."""

import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from replay_timing_log import copies, inside  # noqa: E402
from timing_modes import batches, number, of_baseline, positions, records, spread  # noqa: E402

DATA = REPO / "docs" / "data"
L1 = DATA / "refcheck-h100-2026-12-07-4f604c2"
TEXT = (REPO / "docs" / "benchmarks.md").read_text()


def replayed(folder: Path, name: str = "") -> tuple[list[dict], list[dict]]:
    """(records, the fields replayed under the current rule; a copy the log holds only part of
    as recorded)."""
    rs = records(folder / f"{name}records-L1.jsonl")
    found = copies(folder / f"{name}trusted.log.gz")
    assert len(found) == len(rs)
    return rs, [c.fields() if len(c.new_ms) >= r["timing_batches"] else r
                for r, c in zip(rs, found, strict=True)]


def test_the_replay_gives_back_each_recorded_speedup():
    rs, now = replayed(L1)
    complete = [(r, f) for r, f in zip(rs, now, strict=True) if f is not r]
    assert len(complete) == 92  # the log ends inside the last copy (the call's limit)
    for r, f in complete:  # the log's three decimals: within 0.3%
        assert abs(f["speedup"] - r["speedup"]) <= 3e-3 * r["speedup"], r["task_id"]
        assert abs(f["speedup_low"] - r["speedup_low"]) <= 3e-3, r["task_id"]


def test_coverage_under_the_current_rule():
    rs, now = replayed(L1)
    before, after = sum(map(inside, rs)), sum(map(inside, now))
    block = [f for r, f in zip(rs, now, strict=True) if 26 <= number(r) <= 39]
    width = statistics.median(f["speedup_high"] - f["speedup_low"] for f in now)
    assert (f"contain 1 for {after} of {len(rs)} ({after / len(rs):.0%}; {before} as recorded), the block's "
            f"{sum(map(inside, block))} of 14; median width {width:.3f}") in TEXT
    widened = [r for r in rs if (c := r["ref_contention"]) is not None and not 1 / 1.05 <= c <= 1.05]
    others = [f for r, f in zip(rs, now, strict=True) if r not in widened]
    assert (f"of the 93, {len(widened)} were widened (the\n  reference beyond 5% of its baseline either way) "
            f"and of the other {len(others)}, {sum(map(inside, others))} contain 1 "
            f"({sum(map(inside, others)) / len(others):.0%})") in TEXT
    said = []
    for folder, name in ((DATA / "refcheck-h100-2026-12-07-modes", "pairs-"),
                         (DATA / "refcheck-h100-2026-12-07-alloc", "history-")):
        rs, now = replayed(folder, name)
        said.append(f"{sum(map(inside, rs))} -> {sum(map(inside, now))} of {len(rs)}")
    assert f"session 35's pairs run {said[0]}, session 36's history run {said[1]}" in TEXT


def block() -> list[dict]:
    """Per copy of L1 26-39: its baseline's and timed batches (timing_modes.batches)."""
    chosen = zip(records(L1 / "records-L1.jsonl"), batches(L1 / "trusted.log.gz"), strict=False)
    return [c for r, c in chosen if 26 <= number(r) <= 39]


def test_the_blocks_reference_is_faster_than_its_own_baseline():
    copies_ = block()
    assert len(copies_) == 14
    med = statistics.median

    def ratio(side: str, part: int) -> list[float]:
        return [of_baseline(c, side, part) for c in copies_]

    assert f"the reference's interleaved batches took {spread(ratio('ref', 0))} of its own baseline's" in TEXT
    assert f"the candidate's {spread(ratio('new', 0))}" in TEXT
    assert f"copying the reference's outputs took {spread(ratio('ref', 1))} of the baseline's copy" in TEXT
    assert f"the candidate's {spread(ratio('new', 1))})" in TEXT
    share = med((med(x[1] for x in c["baseline"]) - med(x[1] for x in c["ref"]))
                / (med(x[0] for x in c["baseline"]) - med(x[0] for x in c["ref"])) for c in copies_)
    assert f"the copy is {share:.0%} of what the reference gains" in TEXT


def test_the_gain_follows_the_candidate_only_within_a_batch():
    said = ", ".join(f"{fast} of {n}" for fast, n in positions(block()).values())
    assert f"fast in {said}" in TEXT


def test_the_refcheck_counts_widened_intervals_apart():
    from types import SimpleNamespace

    from kernelbench_refcheck import copy_speedups

    def copy(low, high, contention):
        return SimpleNamespace(speedup=(low + high) / 2, speedup_low=low, speedup_high=high,
                               ref_contention=contention)

    ok = [copy(0.98, 1.02, 1.0), copy(0.9, 1.05, 0.9), copy(0.9, 1.05, 1.2), copy(0.9, 0.95, 1.2),
          copy(1.01, 1.03, None), copy(0.97, 1.01, 1 / 1.05)]  # the last at the tolerance: not widened
    t = copy_speedups(ok)
    assert t["interval_contains_1"] == 4 and t["intervals_widened"] == 3 and t["unwidened_contain_1"] == 2
