"""The session-26 figures of the H100 refcheck at 078e0ce in docs/benchmarks.md, recomputed from
docs/data/refcheck-h100-2026-12-06-078e0ce/ (and session 25's run at 750652e beside it)."""

import json
import math
import statistics
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data"
NOW = DATA / "refcheck-h100-2026-12-06-078e0ce"
BEFORE = DATA / "refcheck-h100-2026-12-06"
DOC = (REPO / "docs" / "benchmarks.md").read_text()
TEXT = " ".join(DOC.split())
MARGIN = 1.10  # records.SPEED_BIAS_MARGIN
HUGE = 1 << 30


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def now() -> dict[str, list[dict]]:
    return {"L1": load(NOW / "records-L1.jsonl"), "L2": load(NOW / "records-L2.jsonl"),
            "L3": load(NOW / "records-L3-1-31.jsonl") + load(NOW / "records-L3-32-50.jsonl")}


def before() -> dict[str, list[dict]]:
    first = load(BEFORE / "records-L1-1-87.jsonl")
    seen = {r["task_id"] for r in first}
    rest = [r for r in load(BEFORE / "records-L1-87-100.jsonl") if r["task_id"] not in seen]
    return {"L1": first + rest, "L2": load(BEFORE / "records-L2.jsonl"),
            "L3": load(BEFORE / "records-L3.jsonl")}


def flat(levels: dict) -> list[dict]:
    return [r for records in levels.values() for r in records]


def by_task(levels: dict) -> dict[str, dict]:
    return {r["task_id"]: r for r in flat(levels)}


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    i = (len(xs) - 1) * p
    lo = int(i)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (i - lo)


def inside(r: dict) -> bool:
    return r["speedup_low"] <= 1 <= r["speedup_high"]


def width(records: list[dict]) -> float:
    return statistics.median(r["speedup_high"] - r["speedup_low"] for r in records)


def row(run: str, level: str, records: list[dict]) -> str:
    sp = [r["speedup"] for r in records]
    return (f"| {run} | {level} | {len(records)} | {sum(r['status'] == 'ok' for r in records)} | "
            f"{statistics.median(sp):.3f} | {percentile(sp, 0.05):.3f}-{percentile(sp, 0.95):.3f} | "
            f"{sum(map(inside, records))} | {width(records):.3f} | {sum(s < 0.9 for s in sp)} | "
            f"{sum(s > 1.1 for s in sp)} | {sum(r['speedup_low'] > MARGIN for r in records)} |")


@pytest.mark.parametrize("run", ["078e0ce", "750652e"])
@pytest.mark.parametrize("level", ["L1", "L2", "L3", "all"])
def test_each_row_recomputes_from_its_records(run, level):
    levels = now() if run == "078e0ce" else before()
    records = flat(levels) if level == "all" else levels[level]
    assert len({r["task_id"] for r in records}) == len(records) == {"L3": 50, "all": 250}.get(level, 100)
    assert row(run, level, records) in DOC, row(run, level, records)


def test_the_goals_and_what_the_widths_say():
    records, old = flat(now()), by_task(before())
    assert f"the interval contains 1 for {sum(map(inside, records))}/250 (93%; goal 90%)" in TEXT
    assert f"(median width {width(records):.3f} against {width(list(old.values())):.3f})" in TEXT
    slower = statistics.median(r["ref_runtime_ms"] / old[r["task_id"]]["ref_runtime_ms"] for r in records)
    walls = statistics.median(r["wall_s"] / old[r["task_id"]]["wall_s"] for r in records)
    assert f"a median {round(100 * (slower - 1))}% longer" in TEXT and f"walls {walls:.2f}x" in TEXT
    slowed = [sum((r.get("ref_contention") or 0) > 1.05 for r in rs) for rs in (records, old.values())]
    assert f"came up {slowed[0]} times against {slowed[1]}" in TEXT
    small = [r for r in records if r["min_bytes"] <= HUGE]
    assert (f"Counting only the {len(small)} copies that move at most 1 GiB a call: "
            f"{sum(map(inside, small))} contain 1 now against "
            f"{sum(inside(old[r['task_id']]) for r in small)}, at a median width of {width(small):.3f} "
            f"against {width([old[r['task_id']] for r in small]):.3f}") in TEXT


def test_the_largest_lower_end():
    records, old = flat(now()), by_task(before())
    best = max(records, key=lambda r: r["speedup_low"])
    assert best["task_id"].endswith("/58_conv_transposed_3D__asymmetric_input__asymmetric_kernel")
    was = old[best["task_id"]]
    assert (f"**The largest lower end is {best['speedup_low']:.3f}**" in TEXT
            and f"{best['speedup']:.3f} [{best['speedup_low']:.3f}, {best['speedup_high']:.3f}]" in TEXT
            and f"`ref_contention` {best['ref_contention']:.2f}" in TEXT
            and f"{was['speedup']:.3f} [{was['speedup_low']:.3f}, {was['speedup_high']:.3f}] in session 25"
            in TEXT)


def test_level_three_offset():
    records, old = now()["L3"], by_task(before())
    was = [old[r["task_id"]] for r in records]
    above = [sum(r["speedup"] > 1 for r in rs) for rs in (records, was)]
    covered = [sum(map(inside, rs)) for rs in (records, was)]
    assert (f"median {statistics.median(r['speedup'] for r in records):.3f} against "
            f"{statistics.median(old[r['task_id']]['speedup'] for r in records):.3f}, {above[0]} of 50 point "
            f"estimates above 1 against {above[1]}, {covered[0]} of 50 intervals containing 1 against "
            f"{covered[1]}") in TEXT
    ratio = width(records) / width([old[r["task_id"]] for r in records])
    assert f"(with intervals {ratio:.1f}x as wide: {width(records):.3f}" in TEXT


def test_huge_tasks():
    records, old = flat(now()), by_task(before())
    named = {r["task_id"].split("/")[-1]: r for r in records}

    def quoted(name):
        r = named[name]
        return f"{name} {r['speedup']:.3f} [{r['speedup_low']:.3f}, {r['speedup_high']:.3f}]"

    assert quoted("87_conv_pointwise_2D") in TEXT and quoted("76_conv_standard_1D_dilated_strided__") in TEXT
    r87 = named["87_conv_pointwise_2D"]
    was87 = old[r87["task_id"]]["ref_runtime_ms"]
    assert f"{r87['ref_runtime_ms']:.1f} ms a call against {was87:.1f}" in TEXT
    for name in ("26_GELU_", "31_ELU"):
        assert f"{name} {named[name]['speedup']:.3f}" in TEXT
    faster = [100 * (1 - named[n]["ref_runtime_ms"] / old[named[n]["task_id"]]["ref_runtime_ms"])
              for n in ("26_GELU_", "30_Softsign", "31_ELU")]
    assert f"got {round(min(faster))}-{round(max(faster))}% faster" in TEXT
    huge = [r for r in records if r["min_bytes"] > HUGE]
    low = sorted((r for r in huge if r["speedup"] < 0.95), key=lambda r: r["task_id"])
    numbers = {int(r["task_id"].split("/")[-1].split("_")[0]) for r in low}
    assert all("/L1/" in r["task_id"] for r in low) and numbers == set(range(25, 40)) - {29, 33, 36, 38}
    was_low = sum(old[r["task_id"]]["speedup"] < 0.95 for r in huge)
    assert (f"**{len(low)} huge copies, all of L1 25-39 but 29, 33, 36 and 38, lie at "
            f"{min(r['speedup'] for r in low):.3f}-{max(r['speedup'] for r in low):.3f}** ({was_low} huge "
            f"copies below 0.95 before)") in TEXT
    floor = [statistics.median(x["runtime_ms"] / x["roofline_floor_ms"] for x in rs)
             for rs in (huge, [old[r["task_id"]] for r in huge])]
    assert (f"{sum(map(inside, huge))} of the {len(huge)} huge copies contain 1 "
            f"({sum(inside(old[r['task_id']]) for r in huge)} before); the median huge batch is still "
            f"{floor[0]:.1f}x its roofline floor ({floor[1]:.1f}x before") in TEXT


def test_the_gpu_test_run_and_the_diagnostic():
    log = (NOW / "pytest-gpu-cut.log").read_text()
    failed = sorted(line.split("[")[1].split("]")[0] for line in log.splitlines() if line.endswith("]")
                    and " FAILED " in line)
    assert failed == ["09_non_default_stream", "09b_stream_in_cuda_source", "42c_clock_cuda_event_patch"]
    assert f"{log.count(' PASSED ')} passed and {len(failed)} failed before" in TEXT
    lines = (NOW / "diagnostic-09-42c.txt").read_text().splitlines()
    rows = {line.split()[0]: line.split() for line in lines if not line.startswith("#")}
    assert all(r[1] == "ok" for r in rows.values())
    stream, twin = rows["09_non_default_stream.py"], rows["09_matmul:torch_fused"]
    assert float(stream[4]) <= 1.25 * float(twin[5])  # the corpus's no-faster check
    assert (f"{float(stream[3]):.3f} [{float(stream[4]):.3f}, {float(stream[5]):.3f}] and "
            f"{float(rows['42c_clock_cuda_event_patch.py'][3]):.3f}") in TEXT
    assert not math.isnan(float(twin[3]))


def test_the_readme_quotes_the_run():
    readme = " ".join((REPO / "README.md").read_text().split())
    records, old = flat(now()), flat(before())
    sp = [r["speedup"] for r in records]
    covered = sum(map(inside, records))
    assert (f"250/250 `ok`, median {statistics.median(sp):.3f} (5-95% {percentile(sp, 0.05):.3f}-"
            f"{percentile(sp, 0.95):.3f}), none counted faster (largest lower end "
            f"{max(r['speedup_low'] for r in records):.3f}), the 95% interval containing 1 for "
            f"{covered}/250 ({100 * covered / 250:.0f}%; goal 90%), with intervals wider than the previous "
            f"run's ({100 * sum(map(inside, old)) / 250:.0f}% there, with intervals {width(old):.3f} wide "
            f"against {width(records):.3f})") in readme
    low = [r["speedup"] for r in records if r["min_bytes"] > HUGE and r["speedup"] < 0.95]
    quoted = f"{len(low)} huge elementwise copies (over 1 GiB a call) lie at {min(low):.2f}-{max(low):.2f}"
    assert quoted in readme
    assert f"at {min(r['speedup'] for r in records):.2f};" in readme


def test_the_copies_timed_alone():
    records = flat(now())
    alone = sorted((r for r in records if r.get("basis") == "alone"), key=lambda r: r["speedup"])
    assert [r["task_id"].split("/")[-1].split("_")[0] for r in alone] == ["32", "30", "89"]
    assert all(r["speedup"] < 0.95 for r in alone)
    cvt = alone[0]
    assert min(records, key=lambda r: r["speedup"]) is cvt and cvt["min_bytes"] <= HUGE
    assert (f"32_ConvolutionalVisionTransformer {cvt['speedup']:.3f} [{cvt['speedup_low']:.3f}, "
            f"{cvt['speedup_high']:.3f}], not a huge task: its interleaved reference was "
            f"{cvt['ref_contention']:.2f}x its baseline") in TEXT
    assert (f"({alone[0]['speedup']:.3f}, L3 30 {alone[1]['speedup']:.3f}, L2 89 {alone[2]['speedup']:.3f})"
            in TEXT)
