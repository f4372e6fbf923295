"""Nothing of the compile pool runs while anything is timed (red team round 9).

The compile pool imports candidates (and builds their extensions) in sandboxes on the cores the
trusted workers use. A build that knows when a reference is being timed (a lock on a shared file,
/proc/stat's per-core times) can load those cores and the memory bus then, and only then: a copy
of the reference reached 1.9x on CPU that way, and a CPU weight or SCHED_IDLE does not stop it
(every sandbox is a session, so an autogroup of its own; the bus is shared anyway). So the run's
compile sandboxes live in one cgroup v2 group (`warpk.evaluator.resources.pool_group`), and a
lane's trusted worker freezes that group, confirmed, for as long as it times (`PoolGate.hold`:
its candidate's and its reference's batches, and the reference alone). With several lanes the
group stays frozen until the last of them is done: each holds a shared flock on the run's gate
file while it times, and only a lane that then gets the lock exclusively thaws the group.

Where no cgroup v2 group can be made (`pool_group` None), the gate holds nothing and
`available` is False: the threat model says so (warpk.evaluator.sandbox).

Non-goals: no freezing of the candidate itself (warpk.evaluator.freeze), no placement.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from warpk.evaluator.errors import HarnessError
from warpk.evaluator.freeze import CONFIRM_TIMEOUT_S, POLL_S
from warpk.evaluator.lane_lock import flock_within
from warpk.evaluator.resources import GROUP_PREFIX, kill_group, pool_group

KILLED_WAIT_S = 120.0  # for killed builds to die (a task in writeback dies once it is done)
LOCK_WAIT_S = 60.0  # for the gate's shared lock (held exclusively only while a lane thaws)
GROUP_ENV, GATE_ENV = "WARPK_POOL_GROUP", "WARPK_POOL_GATE"  # set for the trusted workers by the lanes


def _debug(line: str) -> None:
    if os.environ.get("WARPK_DEBUG_TIMING"):  # with WARPK_WORKER_LOGS: the trusted worker's log
        print(line, file=sys.stderr, flush=True)


@functools.cache
def run_gate() -> dict[str, str]:
    """What a lane adds to its trusted worker's environment: the run's pool group and its gate
    file (in a private folder of this process, removed at exit); {} where there is no group."""
    group = pool_group()
    if group is None:
        return {}
    folder = tempfile.mkdtemp(prefix="warpk-pool-")
    atexit.register(shutil.rmtree, folder, True)
    return {GROUP_ENV: str(group), GATE_ENV: str(Path(folder) / "gate")}


def thaw_run_pool() -> None:
    """The run's pool (`run_gate`) thawed unless a lane is timing (PoolGate.thaw_if_idle)."""
    gate = run_gate()
    PoolGate(gate.get(GROUP_ENV), gate.get(GATE_ENV)).thaw_if_idle()


class PoolGate:
    """The run's compile pool as a timing lane sees it: `hold()` keeps it frozen meanwhile."""

    def __init__(self, group: str | None, gate: str | None):
        self.group = Path(group) if group else None
        self.gate = Path(gate) if gate else None
        self.available = self.group is not None and self.gate is not None

    @classmethod
    def from_env(cls) -> PoolGate:
        return cls(os.environ.get(GROUP_ENV), os.environ.get(GATE_ENV))

    @contextlib.contextmanager
    def hold(self):
        if not self.available:
            yield
            return
        fd = os.open(self.gate, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            self._shared(fd)  # waits while the last holder thaws (it holds it exclusively)
            try:
                self._freeze()
                _debug("compile pool frozen")
                yield
            finally:  # also when the freeze failed: the pool never stays frozen behind us
                fcntl.flock(fd, fcntl.LOCK_UN)
                self._thaw_if_idle(fd)
        finally:
            os.close(fd)

    def _shared(self, fd: int) -> None:
        """The gate's shared lock, waited for at most LOCK_WAIT_S: a holder of the exclusive lock
        keeps it only while it thaws, so longer is our failure, never a hang of the run."""
        if not flock_within(fd, fcntl.LOCK_SH, LOCK_WAIT_S, POLL_S):
            raise HarnessError(f"the compile pool's gate stayed locked for {LOCK_WAIT_S:g} s "
                               f"({self.gate}): a stuck process holds it")

    def thaw_if_idle(self) -> None:
        """Thaw the pool unless a lane is timing: for the parent, after a trusted worker died or
        was killed inside `hold` (its lock went with it, its thaw never ran: red team round 18)."""
        if not self.available or not self.gate.exists():
            return
        fd = os.open(self.gate, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            self._thaw_if_idle(fd)
        finally:
            os.close(fd)

    def _thaw_if_idle(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # no lane timing: thaw
        except BlockingIOError:
            _debug("compile pool left frozen: another lane is timing")
            return
        try:
            (self.group / "cgroup.freeze").write_text("0")
            _debug("compile pool thawed")
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _freeze(self) -> None:
        """Freeze the pool, confirmed. A build that will not freeze in time (io_uring work queued
        in the kernel keeps running until it idles: red team round 10) is killed, so the
        candidate meets the lane unbuilt, where the same trick gets its own sandbox `crashed`
        (warpk.evaluator.freeze); a pool still not frozen then is our failure."""
        (self.group / "cgroup.freeze").write_text("1")
        if self._frozen_within(CONFIRM_TIMEOUT_S):
            return
        stuck = [g for g in self.group.glob(f"{GROUP_PREFIX}*") if not _frozen(g)]
        for group in stuck:
            kill_group(group)
        _debug(f"compile pool: killed {len(stuck)} build(s) that would not freeze")
        # a killed task dies once its writeback ends (red team round 12: seconds, bounded by the
        # dirty-page limit): waited for, so no candidate can make this our failure
        if not self._frozen_within(KILLED_WAIT_S):
            raise HarnessError(f"the compile pool did not freeze in {CONFIRM_TIMEOUT_S + KILLED_WAIT_S:g} s, "
                               f"even with {len(stuck)} build(s) killed")

    def _frozen_within(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not _frozen(self.group):
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
        return True


def _frozen(group: Path) -> bool:
    try:
        return "frozen 1" in (group / "cgroup.events").read_text()
    except OSError:  # gone: nothing of it runs
        return True
