"""The session-40 figures of docs/benchmarks.md recomputed from the H100 call's data
(docs/data/gpu-h100-2026-12-08-s40/): CUDA as nobody, the GPU tests that ran, the unit tests."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data" / "gpu-h100-2026-12-08-s40"
TEXT = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())


def test_cuda_started_as_nobody_with_and_without_the_filter():
    log = (DATA / "pre.log").read_text()
    assert "/usr/bin/setpriv" in log and "0          0 4294967295" in log  # the host's root: a drop
    assert "committed: rc 0, printed '4.0'" in log and "none: rc 0, printed '4.0'" in log


def test_the_gpu_tests_that_ran_all_passed():
    lines = (DATA / "pytest-gpu.log").read_text().splitlines()
    passed = [line for line in lines if " PASSED" in line]
    assert not [line for line in lines if " FAILED" in line or " ERROR" in line]
    assert sum("test_evaluate_energy.py" in line for line in passed) == 3
    corpus = [line for line in passed if "test_gpu_exploit_gets_its_status[" in line]
    assert len(corpus) == 14 and any("60_fds_in_flight" in line for line in corpus)
    assert f"{len(passed)} of the 26 `pytest -m gpu` tests passed" in TEXT


def test_the_unit_tests_on_the_gpu_machine():
    log = (DATA / "pre.log").read_text()
    assert "3 failed, 27 passed" in log
    failed = {line.split()[1] for line in log.splitlines() if line.startswith("FAILED ")}
    assert failed == {
        "tests/unit/test_identity.py::test_a_worker_runs_as_nobody_with_no_capability_and_no_group",
        "tests/unit/test_private_mounts.py::test_a_root_sandbox_receives_no_mount_from_the_host",
        "tests/unit/test_seccomp.py::test_every_untrusted_worker_runs_under_the_filter"}
    assert "27 passed, 3 failed" in TEXT
