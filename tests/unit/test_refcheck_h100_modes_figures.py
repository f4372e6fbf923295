"""The session-35 figures of docs/benchmarks.md on the low block of huge L1 copies, recomputed from
docs/data/refcheck-h100-2026-12-07-modes/: the rows, the two copy times of a huge batch, the fast
mode's preference for the side that comes second, and the stretches in which one role holds it."""

import gzip
import re
import statistics
from pathlib import Path

from tests.unit.test_refcheck_h100_078e0ce_figures import TEXT, load, row

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "refcheck-h100-2026-12-07-modes"
UNPACK = re.compile(r"unpack (\d+) MiB: map ([\d.]+) ms, copy ([\d.]+) ms")
BATCH = re.compile(r"batch (\d+) k=\d+ reference ([\d.]+) ms candidate ([\d.]+) ms \((\w+) first\)")
ELEMENTWISE = tuple(f"{n}_" for n in range(19, 33))  # L1 19-32: 6 GiB in, 6 GiB out, k = 1
FAST_BELOW_MS = 4.9  # the copy of 6 GiB of outputs took 4.5-4.7 or 5.0-5.5 ms, 13 of 904 between


def batches(run: str) -> list[tuple[dict, list[tuple]]]:
    """Per copy: its record and its interleaved batches' (reference copy ms, candidate copy ms,
    the side that came first, reference rest ms, candidate rest ms), warmup batches left out; a
    side's rest is its batch less the trusted side's mapping and copy of its outputs."""
    lines = gzip.open(DATA / f"{run}-trusted.log.gz", "rt").read().splitlines()
    tasks, pending = [], []
    for line in lines:
        if m := UNPACK.match(line):
            pending.append((float(m[2]), float(m[3])))
        elif m := BATCH.match(line):
            if m[1] == "0":
                tasks.append([])
            first, second = pending[-2:]
            ref, cand = (first, second) if m[4] == "reference" else (second, first)
            rests = (float(m[2]) - sum(ref), float(m[3]) - sum(cand))
            tasks[-1].append((ref[1], cand[1], m[4], *rests))
            pending = []
        elif line.startswith(("baseline", "alone")):
            pending = []
    records = load(DATA / f"{run}-records-L1.jsonl")
    assert len(tasks) == len(records)
    return [(r, t[2:]) for r, t in zip(records, tasks, strict=True)]


def again(r: dict) -> bool:
    return r["candidate"].endswith("#1")


def elementwise(run: str) -> list[tuple[dict, list]]:
    return [(r, t) for r, t in batches(run) if r["task_id"].split("/")[-1].startswith(ELEMENTWISE)]


def test_the_rows_recompute_from_their_records():
    for run, copies in (("random", 46), ("pairs", 32)):
        records = load(DATA / f"{run}-records-L1.jsonl")
        assert len(records) == copies and {r["status"] for r in records} == {"ok"}
        assert row(f"{run} first", "L1", [r for r in records if not again(r)]) in TEXT
        assert row(f"{run} again", "L1", [r for r in records if again(r)]) in TEXT
    assert {r["timing_batches"] for r in load(DATA / "pairs-records-L1.jsonl")} == {12}
    assert "26 passed, 1165 deselected in 421.05s" in (DATA / "pytest-gpu-2f2968f.log").read_text()


def test_the_suite_lines():
    for commit, line in (("2dce976", "1169 passed, 28 skipped in 916.21 s"),
                         ("8bc67ea", "1178 passed, 28 skipped in 864.41 s"),
                         ("f4b76d7", "1180 passed, 28 skipped in 1002.22 s"),
                         ("8c78146", "1180 passed, 28 skipped in 833.10 s")):
        text = (DATA / f"pytest-cpu-{commit}.txt").read_text()
        counts, seconds = line.split(" in ")
        assert f"{counts}, 11 warnings in {seconds.removesuffix(' s')}s" in text and "rc=0" in text
        assert f"at {commit}" in TEXT and line in TEXT


def test_the_costliest_items_of_the_idle_suite():
    text = (DATA / "pytest-cpu-8c78146.txt").read_text()
    setups = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "setup" and float(parts[0].rstrip("s")) > 70:
            setups[parts[2].split("::")[0]] = float(parts[0].rstrip("s"))
    assert setups == {"tests/integration/test_exploits.py": 331.34, "tests/integration/test_report.py": 99.29,
                      "tests/integration/test_evaluate.py": 73.45}
    wall = float(re.search(r" in ([\d.]+)s", text).group(1))
    assert round(sum(setups.values())) == 504 and round(2 * wall, -1) == 1670
    assert "504 s of the two xdist workers' ~1,670 s" in TEXT


def test_a_huge_batchs_copy_takes_one_of_two_times():
    copies = [ms for run in ("random", "pairs") for _, t in elementwise(run) for b in t for ms in b[:2]]
    assert len(copies) == 904 and sum(4.7 <= ms < 5.0 for ms in copies) == 13  # the rest at one end
    assert sum(4.5 <= ms < 4.7 for ms in copies) == 171 and sum(5.0 <= ms < 5.6 for ms in copies) == 720


def test_a_huge_batch_against_its_floor_and_the_norms_two_copy_times():
    refs = [r for run in ("random", "pairs") for r, _ in elementwise(run)]
    runtimes = [r["ref_runtime_ms"] for r in refs]
    assert (int(min(runtimes)), round(max(runtimes))) == (16, 30)
    assert round(statistics.median(runtimes), 1) == 18.0
    assert {round(r["roofline_floor_ms"], 2) for r in refs} == {3.85}
    norms = [ms for run in ("random", "pairs") for r, t in batches(run)
             if r["task_id"].split("/")[-1].startswith(("34_", "35_", "37_")) for b in t for ms in b[:2]]
    shorter, longer = [ms for ms in norms if ms < 5.6], [ms for ms in norms if ms >= 5.6]
    assert (len(shorter), round(min(shorter), 1), round(max(shorter), 1)) == (177, 5.2, 5.6)
    assert (len(longer), round(min(longer), 1), round(max(longer), 1)) == (87, 5.7, 6.2)


def test_a_batch_with_the_shorter_copy_is_faster_in_the_rest_too():
    # per task (their forwards differ), the median rest of a side's batches in each mode
    gaps = []
    for run in ("random", "pairs"):
        for _, t in elementwise(run):
            sides = [(b[0], b[3]) for b in t] + [(b[1], b[4]) for b in t]
            fast = [rest for copy, rest in sides if copy < FAST_BELOW_MS]
            slow = [rest for copy, rest in sides if copy >= FAST_BELOW_MS]
            if len(fast) >= 3 and len(slow) >= 3:
                gaps.append(statistics.median(slow) - statistics.median(fast))
    assert len(gaps) == 28 and round(statistics.median(gaps), 1) == 1.1  # of a ~13 ms rest
    assert sum(g > 0 for g in gaps) == 27


def test_the_fast_mode_favours_the_side_that_comes_second():
    counts = {}
    for run in ("random", "pairs"):
        first = second = n = 0
        for _, t in elementwise(run):
            for ref, cand, which, *_ in t:
                ahead, behind = (ref, cand) if which == "reference" else (cand, ref)
                first, second, n = first + (ahead < FAST_BELOW_MS), second + (behind < FAST_BELOW_MS), n + 1
        counts[run] = (second, first, n)
    assert counts == {"random": (74, 8, 200), "pairs": (72, 27, 252)}
    assert "in 74 of 200 that it came second in and 8 of 200 that it came first in" in TEXT
    assert "72 of 252 and 27 of 252 (pairs)" in TEXT


def test_the_modes_noise_stays_in_pairs():
    # the pairs run (consecutive batches, one of either order): in how many pairs did the two
    # sides hold the fast mode a different number of times
    pairs = [t[i:i + 2] for _, t in elementwise("pairs") for i in range(0, len(t), 2)]
    differ = sum(sum(b[0] < FAST_BELOW_MS for b in p) != sum(b[1] < FAST_BELOW_MS for b in p) for p in pairs)
    assert (differ, len(pairs)) == (72, 126)
    assert "held it a different number of times in 72 of 126 huge elementwise pairs" in TEXT


def test_in_a_second_round_one_role_holds_the_mode():
    held = {}
    for run in ("random", "pairs"):
        rounds = [t for r, t in elementwise(run) if again(r)]
        held[run] = (sum(b[0] < FAST_BELOW_MS for t in rounds for b in t),
                     sum(b[1] < FAST_BELOW_MS for t in rounds for b in t), sum(map(len, rounds)))
    assert held == {"random": (3, 28, 70), "pairs": (56, 1, 84)}
    low = [r["speedup"] for r, _ in elementwise("pairs") if again(r)]
    assert (round(min(low), 3), round(max(low), 3)) == (0.899, 0.962)
    swish = next(r for r, _ in elementwise("random") if again(r) and "25_Swish" in r["task_id"])
    point, low, high = swish["speedup"], swish["speedup_low"], swish["speedup_high"]
    assert f"25_Swish {point:.3f} [{low:.3f}, {high:.3f}]" in TEXT
    assert swish["speedup_low"] < 1.10
