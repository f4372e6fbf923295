"""Session 30's A-B-A-B-A of the bundled copies around the sandbox-exit wait in docs/benchmarks.md,
recomputed from docs/data/settle-ababa-cpu-2026-12-06/."""

import json
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data" / "settle-ababa-cpu-2026-12-06"
TEXT = (ROOT / "docs" / "benchmarks.md").read_text()
RUNS = {"old": "6eb28ef", "new": "HEAD", "old-again": "6eb28ef", "new-again": "HEAD", "old-3": "6eb28ef"}


@pytest.mark.parametrize("run", RUNS)
def test_each_row_recomputes(run):
    records = [json.loads(line) for line in (DATA / f"records-{run}.jsonl").read_text().splitlines()]
    wall = json.loads((DATA / f"summary-{run}.json").read_text())["wall_s"]
    assert len(records) == 24 and all(r["status"] == "ok" for r in records)
    median = statistics.median(r["speedup"] for r in records)
    row = (f"| {run} | {RUNS[run]} | {wall:.0f} | {median:.3f} | "
           f"{sum(r['speedup_low'] <= 1 <= r['speedup_high'] for r in records)}/24 | "
           f"{sum(r['speedup_low'] > 1 for r in records)} | "
           f"{sum(r['speedup_low'] > 1.10 for r in records)} |")
    assert row in TEXT, row


def test_the_teardown_probe_recomputes():
    import re

    text = (DATA / "teardown-1M.txt").read_text()
    assert re.search(r"before kill: usage (\d+) MiB", text).group(1) == "921" and "921 MiB" in TEXT
    rows = [(float(t), int(n), float(x)) for t, n, x in re.findall(
        r"t=\s*([0-9.]+)s procs (\d+) usage\s+[0-9.]+ MiB throughput ([0-9.]+)", text)]
    busy, gone = [x for _, n, x in rows if n], [(t, x) for t, n, x in rows if not n]
    assert f"for {gone[0][0]:.2f} s" in TEXT
    assert f"ran at {statistics.median(busy):.2f} ({min(busy):.2f}-{max(busy):.2f})" in TEXT
    assert f"{statistics.median(x for _, x in gone):.2f} once they were gone" in TEXT


def test_the_gpu_run_of_this_session_recomputes():
    import re

    log = (ROOT / "docs" / "data" / "gpu-tests-h200-2026-12-06-05935b8" / "pytest-gpu.log").read_text()
    passed, deselected, seconds = re.search(r"(\d+) passed, (\d+) deselected in ([0-9.]+)s", log).groups()
    assert f"**{passed} passed, {deselected} deselected in {seconds} s**" in TEXT
    assert "FAILED" not in log and int(passed) + int(deselected) == 1118
