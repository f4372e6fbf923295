"""The session-36 figures of docs/benchmarks.md (L1 at 4f604c2 on an H100), recomputed from
docs/data/refcheck-h100-2026-12-07-4f604c2/: the row, the low block of huge copies with the
reference worker in the fast mode, the copies outside it, and the GPU's clocks before every Go."""

import gzip
import re
import statistics
from pathlib import Path

from tests.unit.test_refcheck_h100_078e0ce_figures import TEXT, load, row

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "refcheck-h100-2026-12-07-4f604c2"
BATCH = re.compile(r"batch (\d+) k=\d+ reference ([\d.]+) ms candidate ([\d.]+) ms \((\w+) first\) "
                   r"clocks before: reference (\S+) candidate (\S+)")
WARMUP = 2  # each copy's first two batches are not timed


def number(record: dict) -> int:
    return int(record["task_id"].split("/")[-1].split("_")[0])


def records() -> list[dict]:
    return load(DATA / "records-L1.jsonl")


def batches(log: Path = DATA / "trusted.log.gz", copies: int | None = None) -> list[list[tuple]]:
    """Per copy, in order: each timed batch's (reference ms, candidate ms, the side that came
    first, the clocks before each side)."""
    found = []
    for line in gzip.open(log, "rt"):
        if m := BATCH.match(line):
            if m[1] == "0":
                found.append([])
            found[-1].append((float(m[2]), float(m[3]), m[4], m[5], m[6]))
    assert len(found) == (len(records()) if copies is None else copies)
    return [c[WARMUP:] for c in found]


def inside(r: dict) -> bool:
    return r["speedup_low"] <= 1 <= r["speedup_high"]


def faster(low: int, high: int) -> tuple[int, int, int]:
    """Timed batches of copies L1 low-high: how many, the reference > 5% faster, the candidate."""
    pairs = [b for r, c in zip(records(), batches(), strict=True) if low <= number(r) <= high for b in c]
    return len(pairs), sum(a < 0.95 * b for a, b, *_ in pairs), sum(b < 0.95 * a for a, b, *_ in pairs)


def test_the_row():
    rs = records()
    assert {r["status"] for r in rs} == {"ok"} and {r["timing_batches"] for r in rs} == {12}
    assert [number(r) for r in rs] == list(range(1, 94))
    assert row("4f604c2", "L1", rs) in TEXT
    assert f"contain 1 for {sum(map(inside, rs))} of {len(rs)} (80%)" in TEXT


def test_the_block_and_the_fast_mode():
    block = [r for r in records() if 26 <= number(r) <= 39]
    sp = [r["speedup"] for r in block]
    assert f"L1 26-39 lie at {min(sp):.3f}-{max(sp):.3f}" in TEXT
    missed = sum(r["speedup_high"] < 1 for r in block)
    assert missed == len(block) - sum(map(inside, block))
    assert f"{missed} of their 14 intervals miss 1 below" in TEXT
    n, ref, cand = faster(26, 39)
    said = (f"in their {n} timed batches the reference worker was more than 5% faster than the candidate "
            f"in {ref} and the candidate in {cand}")
    assert said in TEXT
    n, ref, cand = faster(19, 25)
    assert f"(L1 19-25 just before: {ref} and {cand} of {n})" in TEXT


def test_outside_the_block():
    outside = [r for r in records() if not 26 <= number(r) <= 39]
    misses = [r for r in outside if not inside(r)]
    assert f"Outside the block {len(outside) - len(misses)} of {len(outside)} contain 1" in TEXT
    gap = statistics.median(min(abs(r["speedup_low"] - 1), abs(r["speedup_high"] - 1)) for r in misses)
    assert f"the {len(misses)} others miss by little (a median of {gap:.3f} from 1)" in TEXT
    r58 = next(r for r in outside if number(r) == 58)
    assert f"(58: {r58['speedup']:.3f} [{r58['speedup_low']:.3f}, {r58['speedup_high']:.3f}])" in TEXT


def test_the_clocks_before_every_go():
    clocks = {(ref, cand) for c in batches() for *_, ref, cand in c}
    everything = sum(1 for line in gzip.open(DATA / "trusted.log.gz", "rt") if BATCH.match(line))
    assert clocks == {("1980/2619", "1980/2619")}
    assert f"1980 and 2619 MHz in all {everything} batches, on both sides" in TEXT


def test_the_readme_line():
    readme = " ".join((DATA.parents[2] / "README.md").read_text().split())
    rs = records()
    assert f"L1 1-93 on an H100 (2026-12-07, 4f604c2): {len(rs)}/{len(rs)} `ok`" in readme
    assert f"median {statistics.median(r['speedup'] for r in rs):.3f}" in readme
    assert f"the interval containing 1 for {sum(map(inside, rs))}/{len(rs)} (80%" in readme


# --- the two later calls: expandable segments against the default, and the run's history ---------
ALLOC = DATA.parent / "refcheck-h100-2026-12-07-alloc"
LINE = re.compile(r"ok speedup ([\d.]+) \[([\d.]+), ([\d.]+)\]")


def order_counts(log: Path, recs: list[dict], low: int, high: int) -> dict[str, int]:
    """Timed batches of copies low-high: the reference > 5% faster than the candidate, by where
    it came; the candidate > 5% faster, either order."""
    out = dict(second=0, first=0, n_second=0, n_first=0, candidate=0)
    for r, c in zip(recs, batches(log, len(recs)), strict=True):
        if low <= number(r) <= high:
            for ref, cand, first, *_ in c:
                where = "second" if first == "candidate" else "first"
                out[f"n_{where}"] += 1
                out[where] += ref < 0.95 * cand
                out["candidate"] += cand < 0.95 * ref
    return out


def test_the_reference_is_fast_when_it_comes_second():
    got = order_counts(DATA / "trusted.log.gz", records(), 26, 39)
    said = (f"in the fast mode in {got['second']} of the {got['n_second']} it came second in and "
            f"{got['first']} of the {got['n_first']} it came first in; "
            f"the candidates in {got['candidate']} of 168")
    assert said in TEXT


def test_expandable_segments_and_the_default():
    widths = {}
    for name in ("expandable", "default"):
        found = [LINE.search(line) for line in (ALLOC / f"{name}-refcheck.log").read_text().splitlines()]
        widths[name] = [float(m[3]) - float(m[2]) for m in found if m]
    assert len(widths["expandable"]) == 4 and len(widths["default"]) == 5
    assert (f"a median width of {statistics.median(widths['expandable']):.3f} over 4 against "
            f"{statistics.median(widths['default']):.3f} over 5") in TEXT
    assert "all: 5/5 ok in 47 s" in (ALLOC / "default-refcheck.log").read_text()


def test_the_block_after_a_history():
    recs = load(ALLOC / "history-records-L1.jsonl")
    early = [r["speedup"] for r in recs if number(r) <= 25]
    late = [r["speedup"] for r in recs if number(r) >= 26]
    assert f"20-25 at {min(early):.3f}-{max(early):.3f}, 26-32 at {min(late):.3f}-{max(late):.3f}" in TEXT
    got = order_counts(ALLOC / "history-trusted.log.gz", recs, 26, 32)
    assert (f"the reference in the fast mode in {got['second']} of the {got['n_second']} batches it came "
            f"second in and {got['first']} of {got['n_first']} when first") in TEXT
