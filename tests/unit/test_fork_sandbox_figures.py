"""The session-39 fork-server figures of docs/benchmarks.md recomputed from their data
(docs/data/fork-sandbox-cpu-2026-12-07/): where the corpus fixture waits, and the probe's forks."""

import json
import re
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from probe_fork_sandbox import EXPECTED  # noqa: E402

DATA = REPO / "docs" / "data" / "fork-sandbox-cpu-2026-12-07"
TEXT = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())


def test_the_corpus_waits_for_the_next_workers_import():
    text = (DATA / "corpus_walls.txt").read_text()
    count, total = re.search(r"^(\d+) records in ([\d.]+) s", text, re.MULTILINE).groups()
    spare, trusted = re.search(r"waited ([\d.]+) s for the next worker's Ready and ([\d.]+) s", text).groups()
    records = [json.loads(line) for line in (DATA / "corpus_walls.jsonl").read_text().splitlines()]
    assert len(records) == int(count)
    walls = sum(r["wall_s"] or 0 for r in records)
    assert (f"{count} records in {total} s; their walls add up to {walls:.1f} s, and the lane "
            f"waited {spare} s") in TEXT
    assert f"{trusted} s more for the trusted worker's" in TEXT
    assert float(spare) + walls <= float(total)  # the wait lies outside every record's wall


def test_every_fork_passed_its_checks_and_the_medians():
    found = json.loads((DATA / "probe.json").read_text())
    forks = found["forks"]
    assert len(forks) == 20
    for fork in forks:
        assert {k: fork[k] for k in EXPECTED} == EXPECTED
    ready = [f["ready_s"] for f in forks]
    fresh = found["fresh_worker_s"]
    assert (f"median {statistics.median(ready):.3f} s ({min(ready):.3f}-{max(ready):.3f})** against "
            f"**{statistics.median(fresh):.3f} s** for a fresh sandboxed worker to its Ready "
            f"(median of {len(fresh)})") in TEXT
    assert f"imports torch once ({found['template']['template_import_s']:.3f} s)" in TEXT
    assert f"about {round(statistics.median(fresh) / statistics.median(ready), -1):.0f}x less" in TEXT
    assert all(f["bounding"] == "0000000000000000" and f["sysctl"] == "EROFS" for f in forks)
