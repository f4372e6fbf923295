"""The static grids' worker process (warpk.runtime.arms.sensitivity.start_static_grids) ends when
the run's process is killed, instead of computing on and lingering (19 minutes after a SIGTERM,
2026-12-07)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN = """
import os, time
from warpk.runtime.arms.sensitivity import grid_pool

if __name__ == "__main__":
    pool = grid_pool()  # start_static_grids's
    print(pool.submit(os.getpid).result(), flush=True)
    pool.submit(time.sleep, 120)
    time.sleep(120)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_the_grid_worker_dies_with_the_run(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(RUN)
    run = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    worker = int(run.stdout.readline())
    run.send_signal(signal.SIGTERM)
    run.wait(timeout=30)
    deadline = time.monotonic() + 10
    while not gone(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    ended = gone(worker)
    if not ended:
        os.kill(worker, signal.SIGKILL)
    assert ended


def gone(pid: int) -> bool:
    """No such process, or a zombie (dead, not yet reaped by init)."""
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
