"""A worker whose parent is killed while the worker is frozen dies with it (entry.enter_sandbox's
parent-death signal): before, a `process`-mode reference worker stayed frozen for ever after its
trusted worker was killed, holding its memory (found 2026-12-06 after the test suite)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warpk.evaluator.freeze import Freezer

PARENT = r'''
import sys, time
from warpk.evaluator.freeze import Freezer
from warpk.evaluator.sandbox import Limits, UntrustedProcess
worker = UntrustedProcess(sys.argv[1], None, Limits(2.0, 1, False), {}, role="reference")
time.sleep(1.0)
Freezer(worker.proc.pid).freeze()  # frozen, as a worker is between our messages
print(worker.proc.pid, flush=True)
time.sleep(600)
'''


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.parametrize("mode", ["process", "bwrap"])
def test_a_frozen_worker_dies_with_its_killed_parent(mode):
    if mode == "bwrap" and subprocess.run(["sh", "-c", "command -v bwrap"]).returncode:
        pytest.skip("bubblewrap is not installed")
    parent = subprocess.Popen([sys.executable, "-c", PARENT, mode], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    worker = 0
    try:
        worker = int(parent.stdout.readline())
        assert _alive(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 20
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), "the frozen worker outlived its killed parent"
    finally:
        parent.kill()
        if worker and _alive(worker):
            Freezer(worker).thaw()
            os.kill(worker, signal.SIGKILL)
