"""The session-39 figures of docs/benchmarks.md recomputed from the H100 call's data
(docs/data/gpu-h100-2026-12-07-s39/): the CUDA probe, `pytest -m gpu`, L3."""

import json
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data" / "gpu-h100-2026-12-07-s39"
TEXT = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())


def test_cuda_starts_under_the_committed_filter_and_not_under_the_one_refusing_unix_sockets():
    log = (DATA / "probe_cuda_sandbox.log").read_text()
    assert "committed: rc 0, printed '4.0'" in log and "none: rc 0, printed '4.0'" in log
    assert "devprobe/seccomp_unix.py: rc 1, printed ''" in log and "Error 304" in log
    assert "Error 304, \"OS call failed or operation not supported on this OS\"" in TEXT


def test_the_gpu_tests_summary_and_its_one_failure():
    log = (DATA / "pytest-gpu.log").read_text()
    assert "1 failed, 25 passed, 1236 deselected in 407.29s" in log
    failed = {line.split()[1] for line in log.splitlines() if line.startswith("FAILED ")}
    assert failed == {"tests/integration/test_exploits.py::test_gpu_exploit_gets_its_status"
                      "[45b_gpu_hog_inflates_reference_overhead]"}
    assert "25 passed, 1 failed in 407 s" in TEXT


def test_45b_was_scaled_as_designed_and_the_new_check_holds_for_it():
    from warpk.evaluator.timing_phase import CONTENTION_TOLERANCE

    log = (DATA / "pytest-gpu.log").read_text()

    def field(name: str) -> float:
        return float(log.split(f" {name}=")[1].split(",")[0])

    contention, interleaved, speedup = field("ref_contention"), field("interleaved_speedup"), field("speedup")
    factor = (1 + CONTENTION_TOLERANCE) / contention
    assert abs(speedup - interleaved * factor) <= 1e-9 * speedup  # what the fixed check asserts
    assert field("ref_runtime_ms") > field("ref_alone_runtime_ms") * (1 + CONTENTION_TOLERANCE)  # the old
    assert (f"{interleaved:.4f} x {factor:.4f} = {speedup:.4f}") in TEXT
    assert f"reference slowed {contention:.3f}x" in TEXT


def test_the_l3_line():
    records = [json.loads(line) for line in (DATA / "records-L3.jsonl").read_text().splitlines() if line]
    speedups = sorted(r["speedup"] for r in records)
    ok = sum(r["status"] == "ok" for r in records)
    inside = sum(r["speedup_low"] <= 1 <= r["speedup_high"] for r in records)
    q = statistics.quantiles(speedups, n=20)
    low_above = [r["speedup_low"] for r in records if r["speedup_low"] > 1]
    assert (f"{ok} of {len(records)} `ok`, median speedup {statistics.median(speedups):.3f}, 5-95% "
            f"{q[0]:.3f}-{q[-1]:.3f}, the interval contains 1 for {inside} of {len(records)} "
            f"({len(low_above)} lower ends between {min(low_above):.3f} and {max(low_above):.3f}") in TEXT
    assert not any(r["speedup_high"] < 1 for r in records)
    assert f"{sum(r['wall_s'] for r in records):.0f} s of record walls" in TEXT
