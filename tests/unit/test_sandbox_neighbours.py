"""What one sandbox can learn of, or take from, the others alive beside it (red team rounds 8
and 9): the host's cgroup tree (every sandbox's frozen state and CPU use) is not visible inside;
a build in the compile pool lives in the run's pool group, which a lane freezes, confirmed, for
as long as it times (warpk.evaluator.pool_gate), so no build can load the trusted worker's core
or the memory bus while a reference is timed (round 9: 1.9x for a copy without it); with
several lanes the group thaws only when the last is done."""

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import is_python
from warpk.evaluator.freeze import process_tree
from warpk.evaluator.pool_gate import PoolGate
from warpk.evaluator.resources import POOL_PREFIX, cgroup2_root
from warpk.evaluator.sandbox import (
    PROJECT_ROOT,
    SANDBOX_HOME,
    Limits,
    UntrustedProcess,
    bwrap_command,
    worker_env,
)

needs_v2 = pytest.mark.skipif(cgroup2_root() is None, reason="no writable cgroup v2 hierarchy here")
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
'''


def _inside() -> list[str]:
    done = subprocess.run(bwrap_command(None, None) + [sys.executable, "-c", LOOK],
                          env=worker_env(SANDBOX_HOME, 1, {}), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
    return done.stdout.splitlines()


@needs_bwrap
@pytest.mark.skipif(not os.listdir("/sys/fs/cgroup"), reason="this host shows no cgroup tree to hide")
def test_the_hosts_cgroup_tree_is_hidden_and_read_only_inside():
    listing, write = _inside()
    assert listing == "[]" and write in ("OSError", "PermissionError")


@needs_v2
def test_compile_pool_workers_live_in_the_runs_pool_group_and_lane_workers_do_not():
    for pool in (True, False):
        worker = UntrustedProcess("bwrap", None, Limits(2.0, 1, False), {}, pool=pool)
        try:
            deadline, groups = time.monotonic() + 30, set()
            while time.monotonic() < deadline and not groups:
                for pid in process_tree(worker.proc.pid):
                    try:
                        groups |= {line[3:] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                                   if line.startswith("0::")}
                    except OSError:
                        continue
                time.sleep(0.05)
            inside = {g.startswith(f"/warpk/{POOL_PREFIX}{os.getpid()}") for g in groups}
            assert inside == {pool}, groups
        finally:
            worker.close()


def _burner(group: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    (group / "cgroup.procs").write_text(str(proc.pid))
    return proc


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _runs(pid: int) -> bool:
    before = _cpu_ticks(pid)
    time.sleep(0.3)
    return _cpu_ticks(pid) > before


@needs_v2
def test_the_pool_stays_frozen_while_any_lane_times_and_thaws_when_the_last_is_done(tmp_path):
    group = cgroup2_root() / "warpk" / f"{POOL_PREFIX}test-{os.getpid()}"
    group.mkdir(parents=True)
    burner = _burner(group)
    try:
        gate = str(tmp_path / "gate")
        one, two = PoolGate(str(group), gate), PoolGate(str(group), gate)
        assert _runs(burner.pid)
        with contextlib.ExitStack() as first:
            first.enter_context(one.hold())
            assert "frozen 1" in (group / "cgroup.events").read_text() and not _runs(burner.pid)
            with two.hold():  # a second lane starts timing, then the first finishes
                first.close()
                assert not _runs(burner.pid)  # still frozen: the second lane is timing
        assert _runs(burner.pid)  # the last one out thawed it
        with PoolGate(None, None).hold():  # no group (no cgroup v2): holds nothing
            assert _runs(burner.pid)
    finally:
        burner.kill()
        burner.wait()
        (group / "cgroup.freeze").write_text("0")
        group.rmdir()


HOLDER = """
import sys, time
from warpk.evaluator.pool_gate import PoolGate
with PoolGate(sys.argv[1], sys.argv[2]).hold():
    print("holding", flush=True)
    time.sleep(600)  # a trusted worker stuck while it times: the parent kills it
"""


@needs_v2
def test_a_trusted_worker_killed_while_it_holds_the_pool_leaves_it_thawed(tmp_path, monkeypatch):
    """Red team round 18: a trusted worker killed inside PoolGate.hold never ran its thaw, so the
    compile pool stayed frozen until another lane's hold ended. The parent's close thaws it, unless
    another lane is timing."""
    from warpk.evaluator import pool_gate, trusted_process

    group = cgroup2_root() / "warpk" / f"{POOL_PREFIX}test-killed-{os.getpid()}"
    group.mkdir(parents=True)
    gate = str(tmp_path / "gate")
    run_gate = {pool_gate.GROUP_ENV: str(group), pool_gate.GATE_ENV: gate}
    monkeypatch.setattr(pool_gate, "run_gate", lambda: run_gate)
    monkeypatch.setattr(trusted_process, "QUIT_WAIT_S", 0.2)
    burner = _burner(group)
    try:
        for other_lane_timing in (True, False):
            trusted = trusted_process.TrustedProcess({}, 1)
            trusted.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(group), gate], text=True,
                                            stdout=subprocess.PIPE, start_new_session=True,
                                            env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
            assert trusted.proc.stdout.readline().strip() == "holding"
            assert not _runs(burner.pid)
            with contextlib.ExitStack() as other:
                if other_lane_timing:
                    other.enter_context(PoolGate(str(group), gate).hold())
                trusted.close()  # it ignores the closed socket: killed after QUIT_WAIT_S
                assert not _runs(burner.pid) if other_lane_timing else _runs(burner.pid)
            assert _runs(burner.pid)  # the other lane's hold thawed it at its end
            (group / "cgroup.freeze").write_text("0")
    finally:
        burner.kill()
        burner.wait()
        (group / "cgroup.freeze").write_text("0")
        group.rmdir()


def test_a_gate_held_by_a_stuck_process_stops_the_run_instead_of_hanging_it(tmp_path, monkeypatch):
    """Red team round 22: whatever holds the gate exclusively (a stuck process) must not hang every
    lane forever: the shared lock is waited for LOCK_WAIT_S, then it is our failure."""
    import fcntl

    from warpk.evaluator import pool_gate
    from warpk.evaluator.errors import HarnessError

    monkeypatch.setattr(pool_gate, "LOCK_WAIT_S", 0.3)
    gate = tmp_path / "gate"
    gate.touch()
    with open(gate) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(HarnessError, match="gate stayed locked"):
            with PoolGate(str(tmp_path / "group"), str(gate)).hold():
                pass


@needs_v2
def test_a_build_that_will_not_freeze_is_killed_and_the_pool_never_stays_frozen(tmp_path, monkeypatch):
    # Red team round 10: io_uring work queued in the kernel keeps a build running after the freeze
    # is asked (until it idles); the lane waited, then left the pool frozen for good: a hung run.
    from warpk.evaluator import pool_gate
    from warpk.evaluator.errors import HarnessError

    group = cgroup2_root() / "warpk" / f"{POOL_PREFIX}test-{os.getpid()}"
    stuck = group / "sandbox-stuck"
    stuck.mkdir(parents=True)
    burner = _burner(stuck)
    real = pool_gate._frozen
    monkeypatch.setattr(pool_gate, "CONFIRM_TIMEOUT_S", 0.5)
    monkeypatch.setattr(pool_gate, "KILLED_WAIT_S", 0.5)
    monkeypatch.setattr(pool_gate, "_frozen",  # the stuck build does not freeze while it lives
                        lambda g: real(g) and not (g in (group, stuck) and burner.poll() is None))
    gate = PoolGate(str(group), str(tmp_path / "gate"))
    try:
        with gate.hold():
            assert burner.wait(timeout=5) is not None  # killed, and the lane times meanwhile
        assert (group / "cgroup.freeze").read_text().strip() == "0"
        monkeypatch.setattr(pool_gate, "_frozen", lambda g: False)  # a pool that never freezes
        with pytest.raises(HarnessError, match="did not freeze"), gate.hold():
            pass
        assert (group / "cgroup.freeze").read_text().strip() == "0"  # thawed on the way out
    finally:
        burner.kill()
        burner.wait()
        (group / "cgroup.freeze").write_text("0")
        stuck.rmdir()
        group.rmdir()


def _worker_pid(worker: UntrustedProcess) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for pid in process_tree(worker.proc.pid):
            with contextlib.suppress(OSError):
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"warpk.evaluator.untrusted" in cmdline and is_python(pid):
                    return pid
        time.sleep(0.05)
    raise AssertionError("the worker never started")


@needs_bwrap
def test_the_oom_killer_takes_sandboxes_first():
    """Red team round 13: each sandbox's memory is bounded but their sum is not, and memfd or
    tmpfs pages count in no process's badness, so the kernel's OOM killer would take the trusted
    worker or the parent; sandboxes now come first (candidates and builds, then the reference
    worker). A candidate can lower its own score again (Linux 6.18 lets it, measured): this
    orders accidents, it does not stop an adversary (threat model, warpk.evaluator.sandbox)."""
    candidate = UntrustedProcess("bwrap", None, Limits(2.0, 1, False), {})
    reference = UntrustedProcess("bwrap", None, Limits(2.0, 1, False), {}, role="reference")
    try:
        assert Path(f"/proc/{_worker_pid(candidate)}/oom_score_adj").read_text().strip() == "1000"
        assert Path(f"/proc/{_worker_pid(reference)}/oom_score_adj").read_text().strip() == "500"
    finally:
        candidate.close()
        reference.close()


def test_every_sandbox_lies_below_one_memory_budget():
    """Red team round 13: the sandboxes' memory is bounded in total, not only each: their groups
    lie below the `warpk` group, whose limit is MemTotal less the trusted side's reserve, so
    over it the kernel kills inside the sandboxes and never the trusted worker or the parent."""
    from warpk.evaluator.hostmem import sandbox_budget_bytes
    from warpk.evaluator.resources import ResourceGroup, placement

    method, bases = placement()
    if "memory" not in bases:
        pytest.skip("no memory cgroup here (records say limits=none)")
    base = bases["memory"]
    limit = int((base / ("memory.max" if method == "cgroup2" else "memory.limit_in_bytes")).read_text())
    budget = sandbox_budget_bytes()
    assert budget - 4096 <= limit <= budget  # the kernel rounds down to a page
    for pool in (False, True):
        group = ResourceGroup(1 << 30, (), pool)
        try:
            assert group.dirs["memory"].is_relative_to(base), (group.dirs, base)
        finally:
            group.close()
