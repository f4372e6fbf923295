"""The session-25 figures of the H100 refcheck in docs/benchmarks.md, recomputed from the records
in docs/data/refcheck-h100-2026-12-06/ (every figure there comes from a file here)."""

import json
import statistics
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data" / "refcheck-h100-2026-12-06"
DOC = (REPO / "docs" / "benchmarks.md").read_text()
MARGIN = 1.10  # records.SPEED_BIAS_MARGIN


def load(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()]


def level_one() -> list[dict]:
    """The L1 run stopped after 87; 88-100 came from a second run (87 again there, not counted)."""
    first = load("records-L1-1-87.jsonl")
    seen = {r["task_id"] for r in first}
    return first + [r for r in load("records-L1-87-100.jsonl") if r["task_id"] not in seen]


LEVELS = {"L1": level_one, "L2": lambda: load("records-L2.jsonl"), "L3": lambda: load("records-L3.jsonl")}


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    i = (len(xs) - 1) * p
    lo = int(i)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (i - lo)


def row(name: str, records: list[dict]) -> str:
    sp = [r["speedup"] for r in records]
    n = len(records)
    return (f"| {name} | {n} | {sum(r['status'] == 'ok' for r in records)} | {statistics.median(sp):.3f} | "
            f"{percentile(sp, 0.05):.3f}-{percentile(sp, 0.95):.3f} | "
            f"{sum(r['speedup_low'] <= 1 <= r['speedup_high'] for r in records)} | "
            f"{sum(s < 0.9 for s in sp)} | {sum(s > 1.1 for s in sp)} | "
            f"{sum(r['speedup_low'] > MARGIN for r in records)} |")


@pytest.mark.parametrize("level", [*LEVELS, "all"])
def test_each_row_recomputes_from_its_records(level):
    records = [r for f in LEVELS.values() for r in f()] if level == "all" else LEVELS[level]()
    assert len({r["task_id"] for r in records}) == len(records)
    assert row(level, records) in DOC, row(level, records)


def test_the_statements_about_the_misses_and_huge_tasks():
    records = [r for f in LEVELS.values() for r in f()]
    misses = [r for r in records if not r["speedup_low"] <= 1 <= r["speedup_high"]]
    assert len(misses) == 38 and sum(0.97 <= r["speedup"] <= 1.05 for r in misses) == 36
    assert sum(r["speedup_low"] > 1 for r in misses) == 26
    best = max(records, key=lambda r: r["speedup_low"])
    assert best["task_id"].endswith("10_ResNet101") and f"{best['speedup_low']:.3f}" == "1.026"
    assert not any(r.get("basis") for r in records)
    huge = [r for r in records if r["min_bytes"] > 1 << 30]
    assert len(huge) == 106
    assert f"{statistics.median(r['runtime_ms'] / r['roofline_floor_ms'] for r in huge):.1f}" == "10.2"
    outside = {r["task_id"].split("/")[-1] for r in records if not 0.9 <= r["speedup"] <= 1.1}
    assert outside == {"87_conv_pointwise_2D", "76_conv_standard_1D_dilated_strided__", "39_L2Norm_"}
    assert outside <= {r["task_id"].split("/")[-1] for r in huge}


def test_l3_against_session_22():
    before = {r["task_id"]: r for r in load("../refcheck-h100-2026-12-05c/records-L3.jsonl")}
    now = {r["task_id"]: r for r in load("records-L3.jsonl")}
    width = [statistics.median(r["speedup_high"] - r["speedup_low"] for r in side.values())
             for side in (before, now)]
    assert [f"{w:.3f}" for w in width] == ["0.059", "0.028"]
    assert f"{statistics.median(r['speedup'] for r in before.values()):.3f}" == "0.999"
    faster = [statistics.median(now[t][k] / before[t][k] for t in now)
              for k in ("ref_runtime_ms", "runtime_ms")]
    assert [round(100 * (1 - f)) for f in faster] == [16, 18]


def test_the_cpu_run_with_the_collector_off():
    records = load("../refcheck-cpu-2026-12-06/records-bundled-cpu-gc-off.jsonl")
    ok = sum(r["status"] == "ok" for r in records)
    inside = sum(r["speedup_low"] <= 1 <= r["speedup_high"] for r in records)
    median = statistics.median(r["speedup"] for r in records)
    assert ok == len(records) == 24
    assert f"24/24 `ok`, median\n  {median:.3f}, the interval contains 1 for {inside}/24" in DOC


@pytest.mark.parametrize(("name", "median"), [("warmup6-a", "0.976"), ("head-c7dc158", "0.975"),
                                              ("warmup6-b", "0.980")])
def test_the_cpu_warmup_runs(name, median):
    records = load(f"../refcheck-cpu-2026-12-06/records-bundled-cpu-{name}.jsonl")
    assert len(records) == 24 and all(r["status"] == "ok" for r in records)
    assert f"{statistics.median(r['speedup'] for r in records):.3f}" == median
    assert f"`-{name}`" in DOC or f"`records-bundled-cpu-{name}.jsonl`" in DOC


def test_the_warmup_sentence_quotes_the_three_runs():
    def median(name: str) -> str:
        records = load(f"../refcheck-cpu-2026-12-06/records-bundled-cpu-{name}.jsonl")
        return f"{statistics.median(r['speedup'] for r in records):.3f}"

    a, head, b = (median(n) for n in ("warmup6-a", "head-c7dc158", "warmup6-b"))
    text = " ".join(DOC.split())
    assert f"two runs gave medians {a} and {b} and the committed code between them {head}" in text


def test_the_cpu_profile_paragraph():
    profile = json.loads((REPO / "docs" / "data" / "profile-cpu-2026-12-06" / "profile.json").read_text())
    rows = profile["rows"]
    wall = statistics.median(r["wall_s"] for r in rows)
    text = " ".join(DOC.split())
    assert f"**24 candidates in {profile['total_s']:.1f} s, median wall {wall:.2f} s**" in text
    for phase, words in [("reference baseline", "before the candidate's `Load`, since session 24)"),
                         ("timing", "timing"), ("correctness", "correctness"),
                         ("candidate load (its torch import too)", "the candidate's load")]:
        median = statistics.median(r["trusted"][phase] for r in rows)
        assert f"{words} {median:.3f} s ({100 * median / wall:.0f}%)" in text, phase
