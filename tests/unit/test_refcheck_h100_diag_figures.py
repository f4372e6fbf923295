"""The session-38 figures of docs/benchmarks.md recomputed from the diagnostic call's data
(docs/data/refcheck-h100-2026-12-07-diag/): no block of fast reference batches in any variant."""

import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from timing_modes import batches, of_baseline, positions, spread  # noqa: E402

DATA = REPO / "docs" / "data" / "refcheck-h100-2026-12-07-diag"
TEXT = (REPO / "docs" / "benchmarks.md").read_text()


def test_the_variants_table_is_the_runs_summaries():
    summaries = (DATA / "summaries.txt").read_text()
    rows = {"pause": "`GO_PAUSE_MS=50`", "freeze": "`FREEZE_REFERENCE=1`", "plain": "neither"}
    for variant, label in rows.items():
        part = summaries.split(f"== {variant}\n")[1]
        median = part.split("median speedup ")[1].split(",")[0]
        low_high = part.split("5-95% ")[1].split(",")[0]
        inside = part.split("contains 1 for ")[1].split("/")[0]
        assert f"| {label} | 11 | 11 | {median} | {low_high} | {inside} | 0 |" in TEXT


def test_the_freeze_variants_records_give_its_summary():
    lines = (DATA / "freeze-records-L1.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line]
    speedups = [r["speedup"] for r in records]
    assert len(records) == 11 and all(r["status"] == "ok" for r in records)
    assert f"{statistics.median(speedups):.3f}" == "0.998"
    assert sum(r["speedup_low"] <= 1 <= r["speedup_high"] for r in records) == 11


def test_the_reference_was_not_fast_against_its_baseline():
    found = batches(DATA / "freeze-trusted.log.gz")
    assert len(found) == 11
    ref = [of_baseline(c, "ref", 0) for c in found]
    new = [of_baseline(c, "new", 0) for c in found]
    text = " ".join(TEXT.split())  # the paragraph's line breaks
    assert (f"interleaved batches took {spread(ref)} of its own baseline's and the candidate's "
            f"{spread(new)}") in text
    said = positions(found)
    (a, n1), (b, n2), (c, n3) = said.values()
    assert (f"same batch in {a} of {n1}, after the candidate's previous batch in {b} of {n2}, "
            f"after itself in {c} of {n3}") in text
