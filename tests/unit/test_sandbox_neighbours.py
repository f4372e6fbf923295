"""What one sandbox can learn of, or take from, the others alive beside it (red team round 8):
the host's cgroup tree (every sandbox's frozen state and CPU use) is not visible inside, and a
build in the compile pool runs SCHED_IDLE, which the code inside cannot leave, so it cannot take
the trusted worker's core while that worker times a reference."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warpk.evaluator.freeze import process_tree
from warpk.evaluator.resources import ResourceGroup, enter_limits
from warpk.evaluator.sandbox import SANDBOX_HOME, Limits, UntrustedProcess, bwrap_command, worker_env

needs_bwrap = pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v bwrap"], capture_output=True).returncode != 0,
    reason="bubblewrap is not installed")

LOOK = r'''
import os
print(sorted(os.listdir("/sys/fs/cgroup")))
try:
    open("/sys/fs/cgroup/x", "w")
    print("writable")
except OSError as err:
    print(type(err).__name__)
try:
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    print("left SCHED_IDLE" if IDLE else "normal")
except PermissionError:
    print("stays idle")
'''


def _inside(idle: bool) -> list[str]:
    group = ResourceGroup(0, None)
    try:
        code = LOOK.replace("IDLE", str(idle))
        done = subprocess.run(bwrap_command(None, None) + [sys.executable, "-c", code],
                              env=worker_env(SANDBOX_HOME, 1, {}), capture_output=True, text=True, timeout=60,
                              preexec_fn=lambda: enter_limits(group, 0, idle))
    finally:
        group.close()
    assert done.returncode == 0, done.stderr[-500:]
    return done.stdout.splitlines()


@needs_bwrap
@pytest.mark.skipif(not os.listdir("/sys/fs/cgroup"), reason="this host shows no cgroup tree to hide")
def test_the_hosts_cgroup_tree_is_hidden_and_read_only_inside():
    listing, write, _ = _inside(idle=False)
    assert listing == "[]" and write in ("OSError", "PermissionError")


@needs_bwrap
def test_code_in_an_idle_sandbox_cannot_leave_sched_idle():
    assert _inside(idle=True)[2] == "stays idle"
    assert _inside(idle=False)[2] == "normal"  # the control: leaving SCHED_OTHER for itself works


@needs_bwrap
def test_compile_pool_workers_run_sched_idle_and_lane_workers_do_not():
    for idle in (True, False):
        worker = UntrustedProcess("bwrap", None, Limits(2.0, 1, False), {}, idle=idle)
        try:
            deadline, policies = time.monotonic() + 30, set()
            while time.monotonic() < deadline and len(policies) < 2:
                for pid in process_tree(worker.proc.pid):
                    try:
                        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                        policies.add((cmdline.startswith(b"bwrap"), os.sched_getscheduler(pid)))
                    except OSError:
                        continue
                time.sleep(0.05)
            expected = os.SCHED_IDLE if idle else os.SCHED_OTHER
            assert {policy for _, policy in policies} == {expected} and len(policies) == 2
        finally:
            worker.close()
