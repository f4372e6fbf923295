"""Freezing the candidate's sandbox (warpk.evaluator.freeze): every process of the tree, helpers
in sessions of their own included, is still while frozen, runs again when thawed, and is gone
after kill."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from warpk.evaluator import freeze
from warpk.evaluator.freeze import Freezer, process_tree

# a parent that starts a helper in a session of its own; both count up in a file forever
SCRIPT = """
import os, subprocess, sys, time
if len(sys.argv) == 1:
    subprocess.Popen([sys.executable, __file__, "child"], start_new_session=True)
path = sys.argv[0] + (".child" if len(sys.argv) > 1 else ".parent")
n = 0
while True:
    n += 1
    with open(path, "w") as f:
        f.write(str(n))
    time.sleep(0.005)
"""


def counters(tmp_path: Path) -> tuple[str, str]:
    """Both counts, each read again while its writer has it truncated (a running writer)."""
    script = tmp_path / "busy.py"

    def read(name: str) -> str:
        for _ in range(100):
            text = script.with_name(name).read_text()
            if text:
                return text
            time.sleep(0.001)
        return text

    return read("busy.py.parent"), read("busy.py.child")


def busy_tree(tmp_path: Path) -> tuple[Path, subprocess.Popen]:
    """SCRIPT started, once both its processes are counting."""
    script = tmp_path / "busy.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)])
    deadline = time.monotonic() + 20
    while len(process_tree(proc.pid)) < 2 or not (tmp_path / "busy.py.child").exists():
        assert time.monotonic() < deadline, "the helper never started"
        time.sleep(0.05)
    return script, proc


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup-or-fallback", "sigstop"])
def test_freeze_stops_the_whole_tree_thaw_resumes_it_and_kill_ends_it(tmp_path, monkeypatch, cgroup):
    if not cgroup:
        monkeypatch.setattr(freeze, "cgroup2_root", lambda: None)
    script, proc = busy_tree(tmp_path)
    # joined while it is already running: the cgroup takes the tree as it is
    freezer = Freezer(proc.pid)
    try:
        freezer.freeze()
        time.sleep(0.05)
        before = counters(tmp_path)
        time.sleep(0.3)
        assert counters(tmp_path) == before, f"ran while frozen ({freezer.method})"
        assert cgroup or freezer.method == "sigstop"
        freezer.thaw()
        time.sleep(0.3)
        after = counters(tmp_path)
        assert after[0] != before[0] and after[1] != before[1], "did not run again once thawed"
        assert freezer.kill(), "still running after kill"
        proc.wait(timeout=10)
    finally:
        freezer.close()
        subprocess.run(["pkill", "-f", str(script)], check=False)


def test_a_freeze_that_failed_half_way_is_undone_by_thaw(tmp_path, monkeypatch):
    """Red team round 19: a freeze that could not be confirmed (a thread stuck in the kernel)
    left the processes it had stopped stopped, and thaw() did nothing since nothing was frozen;
    the lane's spare would have gone to the next candidate stopped."""
    monkeypatch.setattr(freeze, "cgroup2_root", lambda: None)
    monkeypatch.setattr(freeze, "CONFIRM_TIMEOUT_S", 0.3)
    monkeypatch.setattr(freeze, "_all_stopped", lambda pid: False)  # one that never stops
    script, proc = busy_tree(tmp_path)
    freezer = Freezer(proc.pid)
    try:
        with pytest.raises(freeze.FreezeError):
            freezer.freeze()
        before = counters(tmp_path)
        time.sleep(0.3)
        assert counters(tmp_path) == before  # what it stopped stays stopped
        freezer.thaw()
        time.sleep(0.3)
        after = counters(tmp_path)
        assert after[0] != before[0] and after[1] != before[1], "still stopped after thaw"
    finally:
        freezer.kill()
        freezer.close()
        subprocess.run(["pkill", "-f", str(script)], check=False)


def test_a_spare_that_will_not_freeze_is_killed_not_blamed_on_the_candidate(tmp_path, monkeypatch):
    """Red team round 20: the lane's spare failing to freeze after correctness was the measured
    candidate's `crashed`. Now the spare is killed (the lane replaces a dead one) and timing goes on."""
    from warpk.evaluator.freeze import NoFreeze, still_or_gone

    monkeypatch.setattr(freeze, "cgroup2_root", lambda: None)
    monkeypatch.setattr(freeze, "CONFIRM_TIMEOUT_S", 0.3)
    monkeypatch.setattr(freeze, "_all_stopped", lambda pid: False)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert isinstance(still_or_gone(Freezer(proc.pid)), NoFreeze)
        assert proc.wait(timeout=10) == -9
    finally:
        proc.kill()


def test_library_handles_that_fail_count_as_the_candidates_only_while_the_device_is_short():
    from warpk.evaluator.reference import starved_handle

    text = "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling cublasCreate"
    assert starved_handle(text, lambda: True)  # a candidate holds the memory: its runtime_error
    assert not starved_handle(text, lambda: False)  # memory free: a broken install, the harness's
    assert starved_handle("cuDNN error: CUDNN_STATUS_NOT_INITIALIZED", lambda: True)
    assert not starved_handle("NameError: name 'x' is not defined", lambda: True)
    assert not starved_handle(text)  # no GPU here: not shown to be short
