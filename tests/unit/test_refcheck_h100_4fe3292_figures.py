"""The session-29 figures of the H100 refcheck at 4fe3292 in docs/benchmarks.md, recomputed from
docs/data/refcheck-h100-2026-12-06-4fe3292/ against session 26's run at 078e0ce."""

import statistics
from pathlib import Path

import pytest

from tests.unit.test_refcheck_h100_078e0ce_figures import HUGE, TEXT, by_task, flat, inside, load, now, row

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "refcheck-h100-2026-12-06-4fe3292"


def this_run() -> dict[str, list[dict]]:
    return {"L1": load(DATA / "records-L1-1-92.jsonl") + load(DATA / "records-L1-93-100.jsonl"),
            "L2": load(DATA / "records-L2-1-64.jsonl"), "L3": load(DATA / "records-L3.jsonl")}


def name(r: dict) -> str:
    return r["task_id"].split("/")[-1]


def number(r: dict) -> int:
    return int(name(r).split("_")[0])


@pytest.mark.parametrize("level", ["L1", "L2", "L3", "all"])
def test_each_row_recomputes_from_its_records(level):
    levels = this_run()
    records = flat(levels) if level == "all" else levels[level]
    expected = {"L2": 64, "L3": 50, "all": 214}.get(level, 100)
    assert len({r["task_id"] for r in records}) == len(records) == expected
    old = by_task(now())
    for run, rs in (("4fe3292", records), ("078e0ce", [old[r["task_id"]] for r in records])):
        assert row(run, level, rs) in TEXT, row(run, level, rs)


def test_the_headline_and_the_pairing():
    records, old = flat(this_run()), by_task(now())
    assert all(r["status"] == "ok" for r in records) and not any(r["speedup_low"] > 1.10 for r in records)
    covered = sum(map(inside, records))
    sp = statistics.median(r["speedup"] for r in records)
    assert f"214/214 `ok`, `fast_1` 0**, median {sp:.3f}; the interval contains 1 for {covered}/214 (89%" \
        in TEXT
    ratio = statistics.median(r["speedup"] / old[r["task_id"]]["speedup"] for r in records)
    assert f"paired: median ratio {ratio:.3f}" in TEXT


def test_the_low_block_and_the_leader():
    l1 = this_run()["L1"]
    low = [r for r in l1 if r["min_bytes"] > HUGE and r["speedup"] < 0.95 and 25 <= number(r) <= 39]
    assert {number(r) for r in low} == set(range(26, 38)) - {33, 34}
    assert (f"{len(low)} huge copies, all of L1 26-37 but 33 and 34, at "
            f"{min(r['speedup'] for r in low):.3f}-{max(r['speedup'] for r in low):.3f}") in TEXT
    best = max(flat(this_run()), key=lambda r: r["speedup_low"])
    assert name(best) == "58_conv_transposed_3D__asymmetric_input__asymmetric_kernel"
    assert (f"{best['speedup']:.3f} [{best['speedup_low']:.3f}, {best['speedup_high']:.3f}]" in TEXT
            and f"(`ref_contention` {best['ref_contention']:.2f})" in TEXT)


def test_the_copies_timed_alone_are_the_low_ones():
    l3 = this_run()["L3"]
    alone = sorted((r for r in flat(this_run()) if r.get("basis") == "alone"), key=lambda r: r["speedup"])
    assert all("/L3/" in r["task_id"] and r["speedup"] < 0.95 for r in alone)
    listed = ", ".join(f"{name(r)} {r['speedup']:.3f}" for r in alone)
    assert f"{len(alone)} copies were timed alone" in TEXT and f"({listed})" in TEXT
    assert f"so L3 has {sum(r['speedup'] < 0.9 for r in l3)} copies below 0.9" in TEXT


def test_the_gpu_tests_passed():
    log = (DATA / "pytest-gpu.log").read_text()
    assert "24 passed" in log and " FAILED " not in log
    assert "**`pytest -m gpu`: 24 passed in 378 s**" in TEXT


def test_the_reference_of_vit_moved_both_ways_between_runs():
    """docs/evaluator.md (`timing_phase.wider`): 28_VisionTransformer's interleaved / alone ratio
    over the five H100 L3 runs that recorded it."""
    root = DATA.parent
    runs = sorted(root.glob("refcheck-h100-2026-12-0[56]*"))  # the five runs of that analysis
    paths = [path for run in runs for path in run.glob("records-L3*.jsonl")]
    seen = [r["ref_contention"] for path in paths for r in load(path)
            if r["task_id"].endswith("/28_VisionTransformer") and r.get("ref_contention")]
    assert len(seen) == 5
    text = (root.parents[1] / "docs" / "evaluator.md").read_text()
    assert f"ViT's `ref_contention` {min(seen):.2f}-{max(seen):.2f}" in text and "over five runs" in text


def test_the_copies_timed_alone_came_out_low_with_intervals_below_1():
    """docs/evaluator.md (`timing_phase.wider`): the 7 L3 copies with basis `alone` at 4fe3292."""
    alone = [r for r in this_run()["L3"] if r.get("basis") == "alone"]
    assert len(alone) == 7 and all(r["speedup_high"] < 1 for r in alone)
    low, high = min(r["speedup"] for r in alone), max(r["speedup"] for r in alone)
    text = (DATA.parents[1] / "evaluator.md").read_text()
    assert f"the 7 L3 copies with basis\n     `alone` on the H100 on 2026-12-06, {low:.2f}-{high:.2f}" in text
