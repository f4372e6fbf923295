"""docs/benchmarks.md's refcheck table for the H100 (2026-12-05) recomputed from the records it
cites: a figure that drifts from its data fails here."""

import json
import statistics

from tests.conftest import REPO

DATA = REPO / "docs" / "data" / "refcheck-h100-2026-12-05"
DOC = (REPO / "docs" / "benchmarks.md").read_text()


def _figures(level: str) -> dict:
    records = [json.loads(line) for line in (DATA / f"records-{level}.jsonl").read_text().splitlines()]
    ok = [r for r in records if r["status"] == "ok"]
    speedups = sorted(r["speedup"] for r in ok)
    at = lambda q: speedups[round(q * (len(speedups) - 1))]  # noqa: E731 - kernelbench_refcheck's rule
    return {
        "records": len(records),
        "ok": len(ok),
        "median": statistics.median(speedups),
        "p5": at(0.05),
        "p95": at(0.95),
        "contains_1": sum(r["speedup_low"] <= 1 <= r["speedup_high"] for r in ok),
        "faster": sorted(r["task_id"].rsplit("/", 1)[1] for r in ok if r["speedup_low"] > 1.1),
        "not_ok": sorted(r["task_id"].rsplit("/", 1)[1] for r in records if r["status"] != "ok"),
    }


def test_the_h100_table_is_its_records():
    l1, l3 = _figures("L1"), _figures("L3")
    row = lambda name, a, b: f"| {name} | {a} | {b} |"  # noqa: E731
    assert row("`ok`", f"{l1['ok']}/{l1['records']}", f"**{l3['ok']}/{l3['records']}**") in DOC
    assert row("median speedup of the copies", f"{l1['median']:.3f}", f"{l3['median']:.3f}") in DOC
    assert row("5-95%", f"{l1['p5']:.3f}-{l1['p95']:.3f}", f"{l3['p5']:.3f}-{l3['p95']:.3f}") in DOC
    share = lambda f: f"{f['contains_1']}/{f['ok']} ({100 * f['contains_1'] / f['ok']:.0f}%)"  # noqa: E731
    assert row("95% interval contains 1", share(l1), share(l3)) in DOC
    assert l1["faster"] == ["87_conv_pointwise_2D"] and l3["faster"] == []
    assert l1["not_ok"] == ["38_L1Norm_", "39_L2Norm_", "45_Average_Pooling_2D",
                            "76_conv_standard_1D_dilated_strided__"]
    for name in l1["not_ok"]:
        assert name.rstrip("_") in DOC
