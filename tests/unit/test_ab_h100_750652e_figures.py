"""The session-27 A-B-A figures in docs/benchmarks.md (750652e, d388479, 750652e again on the 11
huge L1 copies that lay at 0.898-0.940 in session 26's full L1 run), recomputed from the three
logs in docs/data/ab-h100-2026-12-06-750652e-vs-d388479/ and session 26's records."""

import json
import re
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data" / "ab-h100-2026-12-06-750652e-vs-d388479"
S26 = REPO / "docs" / "data" / "refcheck-h100-2026-12-06-078e0ce" / "records-L1.jsonl"
TEXT = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())
LINE = re.compile(r"kernelbench/L1/(\S+): ok speedup ([\d.]+) \[([\d.]+), ([\d.]+)\]")


def run(name: str) -> dict[str, tuple[float, float, float]]:
    text = (DATA / f"ab-{name}.log").read_text()
    return {m[1]: (float(m[2]), float(m[3]), float(m[4])) for m in LINE.finditer(text)}


def test_each_run_has_the_eleven_copies_ok_and_the_new_records_agree_with_its_log():
    runs = {name: run(name) for name in ("old", "new", "old-again")}
    assert all(len(r) == 11 for r in runs.values())
    records = [json.loads(line) for line in (DATA / "records-new.jsonl").read_text().splitlines()]
    assert {r["status"] for r in records} == {"ok"}
    for r in records:
        assert abs(r["speedup"] - runs["new"][r["task_id"].split("/")[-1]][0]) < 5e-4


def test_the_table_of_medians_ranges_and_coverage():
    for name, label in (("old", "750652e"), ("new", "d388479"), ("old-again", "750652e again")):
        r = run(name)
        speedups = [s for s, _, _ in r.values()]
        inside = sum(lo <= 1 <= hi for _, lo, hi in r.values())
        row = (f"| {label} | {statistics.median(speedups):.3f} | {min(speedups):.3f}-{max(speedups):.3f}"
               f" | {inside}/11 | {statistics.median(hi - lo for _, lo, hi in r.values()):.3f} |")
        assert row in TEXT, row


def test_the_low_block_of_session_26_is_not_seen_in_any_of_the_three_runs():
    s26 = {json.loads(line)["task_id"].split("/")[-1]: json.loads(line)["speedup"]
           for line in S26.read_text().splitlines()}
    new, old, again = run("new"), run("old"), run("old-again")
    then = [s26[t] for t in new]
    assert f"{statistics.median(then):.3f} (0.898-0.940)" in TEXT and max(then) < 0.94
    paired = statistics.median(new[t][0] / ((old[t][0] + again[t][0]) / 2) for t in new)
    same = statistics.median(again[t][0] / old[t][0] for t in new)
    assert f"HEAD against the mean of the two old runs {paired:.3f}" in TEXT
    assert f"old again against old {same:.3f}" in TEXT
    assert statistics.median(s for s, _, _ in new.values()) > max(then)
