"""Session 30's table of the next worker frozen or thawed through the timing in docs/benchmarks.md,
recomputed from docs/data/spare-thawed-cpu-2026-12-06-a26b8ad/."""

import json
import math
import statistics
from pathlib import Path

from tests.unit.test_neighbours_cpu_figures import percentile

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "docs" / "data" / "spare-thawed-cpu-2026-12-06-a26b8ad"
DATA = json.loads((RUN / "spare_thawed.json").read_text())
TEXT = (ROOT / "docs" / "benchmarks.md").read_text()


def test_each_row_recomputes_from_the_records():
    for call in DATA["calls"]:
        ok = [c for c in call["copies"] if c["status"] == "ok"]
        n, speedups = len(call["copies"]), [c["speedup"] for c in ok]
        row = (f"| {call['round']} | {call['arm']} | {call['wall_s']:.1f} | {len(ok)}/{n} | "
               f"{statistics.median(c['speedup'] for c in ok):.3f} | "
               f"{percentile(speedups, 0.05):.3f}-{percentile(speedups, 0.95):.3f} | "
               f"{sum(c['low'] <= 1 <= c['high'] for c in ok)}/{n} | "
               f"{statistics.median(c['high'] - c['low'] for c in ok):.3f} |")
        assert row in TEXT, row


def test_the_summary_lines_recompute():
    by = {(c["round"], c["arm"]): c["wall_s"] for c in DATA["calls"]}
    ratios = sorted(by[(r, "frozen")] / by[(r, "thawed")] for r in (0, 1))
    assert f"frozen / thawed {ratios[0]:.2f} and {ratios[1]:.2f}" in TEXT
    thawed = statistics.median([by[(0, "thawed")], by[(1, "thawed")]])
    frozen = statistics.median([by[(0, "frozen")], by[(1, "frozen")]])
    assert f"{1 - thawed / frozen:.0%} less wall" in TEXT
    for arm in ("frozen", "thawed"):
        calls = [call for call in DATA["calls"] if call["arm"] == arm]
        ok = [c for call in calls for c in call["copies"] if c["status"] == "ok"]
        assert f"{statistics.stdev(math.log(c['speedup']) for c in ok):.3f} {arm}" in TEXT
