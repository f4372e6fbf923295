"""Keeping the candidate still while the reference is timed (evaluator v3, a clean reference).

A candidate must not be able to raise its speedup by slowing the reference: threads it leaves
running, helper processes in sessions of their own, busy loops between its batches. So while the
reference worker runs a timed batch, every process of the candidate's sandbox is frozen, and the
freeze is confirmed before the reference's clock starts:

- `cgroup`: the sandbox's processes are moved into a cgroup v2 of their own before the candidate
  is loaded (while the worker is still our harness, idle), so everything it ever spawns is born
  inside; `cgroup.freeze` = 1, confirmed by `frozen 1` in `cgroup.events`. Nothing escapes.
- `sigstop` (no writable cgroup v2 hierarchy): SIGSTOP to every process found under the
  sandbox's root in /proc, walked again until a walk finds every thread stopped and no process it
  has not stopped. Under bwrap the sandbox has its own PID namespace, so orphans stay under its
  init; in `process` mode an orphan reparented outside the tree escapes (stated in the threat
  model).

On a GPU a frozen process's queued kernels still run: that part is not covered here.

Non-goals: no timing, no resource limits (warpk.evaluator.resources; where those are cgroup v2,
the sandbox already lives in a group of its own, and that group is the one frozen).
"""

from __future__ import annotations

import ctypes
import functools
import os
import secrets
import signal
import time
from pathlib import Path

from warpk.evaluator.resources import GROUP_PREFIX, cgroup2_root

CONFIRM_TIMEOUT_S = 5.0
STALE_AFTER_S = 60.0  # an empty sandbox cgroup this old is left over from a closed one
POLL_S = 0.0005


class FreezeError(RuntimeError):
    """The candidate could not be confirmed frozen (its verdict: it cannot be timed cleanly)."""


def stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command's name (which may hold spaces and parentheses):
    state, ppid, ...; None where the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_state(pid: int) -> str | None:
    """The process's state letter from /proc (R, S, T, Z, ...), or None where it is gone."""
    fields = stat_fields(pid)
    return fields[0] if fields else None


def process_tree(root: int) -> set[int]:
    """`root` and every process below it, from /proc (threads' children included)."""
    found, stack = set(), [root]
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        found.add(pid)
        for task in tasks:
            try:
                stack += [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
    return found


KCMP_SYSCALL = {"x86_64": 312, "aarch64": 272}.get(os.uname().machine)
KCMP_VM = 1
KCMP_MOST_ALIKE = 64  # processes of one VmRSS compared pairwise at most (more: each counted)


@functools.cache
def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _has_memory(tid: int) -> bool:
    return b"VmRSS:" in _read(f"/proc/{tid}/status")


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def same_address_space(a: int, b: int) -> bool:
    """Whether live threads `a` and `b` share one address space (vfork, CLONE_VM): kcmp(2), and
    both still have one after it: a thread that exited has none, and two such compare equal (a
    review, session 35: children whose main thread had exited were counted once for four). False
    where it cannot say (then both are counted: more, never less)."""
    if KCMP_SYSCALL is None:
        return False
    if _libc().syscall(KCMP_SYSCALL, a, b, KCMP_VM, 0, 0) != 0:
        return False
    return _has_memory(a) and _has_memory(b)  # an exited thread never gets an address space back


def resident_values(root: int) -> dict[int, tuple[int, int]]:
    """(tid, VmRSS kB) by pid of `root` and every process below it, each read through a live
    thread of the process (`live_thread`)."""
    values = {}
    for pid in process_tree(root):
        tid, status = live_thread(pid, "status", b"VmRSS:")
        if tid is not None:
            lines = status.splitlines()
            values[pid] = (tid, sum(int(line.split()[1]) for line in lines if line.startswith(b"VmRSS:")))
    return values


def resident_kb(values: dict[int, tuple[int, int]]) -> int:
    """The sum of the VmRSS in `values` (`resident_values`), each address space once: vfork
    children share their parent's and each reports all of it (red team round 50: 24 of them
    multiplied a worker's memory). Processes of one address space read a moment apart report the
    same figure, so only those alike are compared, through the threads they were read by; a
    figure read while it changed, or a bucket past KCMP_MOST_ALIKE, is counted for each process
    (more, never less than the memory held)."""
    buckets: dict[int, list[int]] = {}
    for tid, kb in values.values():
        buckets.setdefault(kb, []).append(tid)
    total = 0
    for kb, tids in buckets.items():
        if kb == 0 or len(tids) > KCMP_MOST_ALIKE:
            total += kb * len(tids)
            continue
        spaces: list[int] = []  # one thread of each distinct address space
        for tid in tids:
            if not any(same_address_space(tid, seen) for seen in spaces):
                spaces.append(tid)
        total += kb * len(spaces)
    return total


def live_thread(pid: int, name: str, marker: bytes = b"\n") -> tuple[int | None, bytes]:
    """(tid, /proc/<pid>/task/<tid>/<name>) of the first thread whose view holds `marker`: the
    process's memory as one of its live threads sees it (a main thread that exited leaves the
    process's own maps empty and its status without VmRSS while the others run on: red team round
    44); (None, b"") where none does."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None, b""
    for tid in tids:
        text = _read(f"/proc/{pid}/task/{tid}/{name}")
        if marker in text:
            return int(tid), text
    return None, b""


def live_view(pid: int, name: str, marker: bytes = b"\n") -> bytes:
    """`live_thread`'s view alone."""
    return live_thread(pid, name, marker)[1]


def _own_group(pid: int, base: Path) -> Path | None:
    """The cgroup v2 sandbox group `pid` already lives in (warpk.evaluator.resources made it with
    its limits and the process was born inside), or None."""
    try:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                group = base / line[3:].lstrip("/")
                if group.name.startswith(GROUP_PREFIX) and group.parent.name == "warpk" and group.is_dir():
                    return group
    except OSError:
        pass
    return None


def _all_stopped(pid: int) -> bool:
    """Every thread of `pid` is stopped (or gone)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return True
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        state = stat[stat.rindex(")") + 2]
        if state not in "TtXZ":
            return False
    return True


def _gone(pid: int) -> bool:
    """Exited (a zombie waiting for its parent counts: its memory and contexts are released)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


def _new_group(root: int, base: Path) -> Path | None:
    """A cgroup v2 group of its own for `root`'s process tree (moved in while it is our idle
    harness), or None where one cannot be made."""
    for stale in (base / "warpk").glob(f"{GROUP_PREFIX}*"):  # emptied since an earlier close
        try:  # not one another lane made a moment ago and has not filled yet
            if time.time() - stale.stat().st_mtime > STALE_AFTER_S:
                stale.rmdir()
        except OSError:
            pass
    try:
        group = base / "warpk" / f"{GROUP_PREFIX}{root}-{secrets.token_hex(4)}"
        group.mkdir(parents=True)
        for pid in sorted(process_tree(root)):
            try:
                (group / "cgroup.procs").write_text(str(pid))
            except ProcessLookupError:
                continue
        return group
    except OSError:
        return None


class Freezer:
    """Freezes and thaws the processes under `root` (the candidate's sandbox)."""

    def __init__(self, root: int):
        self.root = root
        self.cgroup: Path | None = None
        self.stopped: set[int] = set()
        self.frozen = False
        self.touched = False  # a freeze begun, confirmed or not: thaw undoes it (red team round 19)
        self.own = False  # made here (removed at close), or the sandbox's resource group
        base = cgroup2_root()
        if base is not None:
            self.cgroup = _own_group(root, base)
            if self.cgroup is None:
                self.cgroup = _new_group(root, base)
                self.own = self.cgroup is not None
        self.method = "cgroup" if self.cgroup is not None else "sigstop"

    def freeze(self) -> None:
        """Freeze, and return only once the freeze is confirmed (else FreezeError)."""
        if self.frozen:
            return
        deadline = time.monotonic() + CONFIRM_TIMEOUT_S
        self.touched = True
        if self.cgroup is not None:
            (self.cgroup / "cgroup.freeze").write_text("1")
            while "frozen 1" not in (self.cgroup / "cgroup.events").read_text():
                if time.monotonic() > deadline:
                    raise FreezeError(f"the candidate's cgroup did not freeze in {CONFIRM_TIMEOUT_S:g} s")
                time.sleep(POLL_S)
            self.frozen = True
            return
        while True:
            tree = process_tree(self.root)
            for pid in tree - self.stopped:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
                self.stopped.add(pid)
            if all(_all_stopped(pid) for pid in tree) and process_tree(self.root) <= self.stopped:
                self.frozen = True
                return
            if time.monotonic() > deadline:
                raise FreezeError(f"the candidate's processes did not all stop in {CONFIRM_TIMEOUT_S:g} s")
            time.sleep(POLL_S)

    def thaw(self) -> None:
        if not (self.frozen or self.touched):
            return
        self.frozen = self.touched = False
        if self.cgroup is not None:
            try:
                (self.cgroup / "cgroup.freeze").write_text("0")
            except OSError:
                pass
            return
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.stopped = set()

    def kill(self, timeout_s: float = CONFIRM_TIMEOUT_S) -> bool:
        """SIGKILL everything of the sandbox and wait until none of it runs (its GPU contexts, and
        the work queued in them, go with it); True once gone."""
        doomed = process_tree(self.root)  # before killing: a dead parent's children move away
        if self.cgroup is not None:
            try:
                doomed |= {int(p) for p in (self.cgroup / "cgroup.procs").read_text().split()}
                (self.cgroup / "cgroup.kill").write_text("1")
            except (OSError, ValueError):
                pass
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.frozen = True  # a stopped process must be continued to die
        self.thaw()
        deadline = time.monotonic() + timeout_s
        while any(not _gone(pid) for pid in doomed):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def close(self) -> None:
        """Thaw (a killed process must be able to die) and remove the cgroup once it is empty."""
        self.frozen = True  # whatever we think: thaw for real
        self.thaw()
        if self.cgroup is None or not self.own:
            return
        # Killing is the parent's (it reports how the worker ended: a signal, its last line), so
        # the group may not be empty yet: then a later Freezer removes it (`_new_group`, once
        # stale). Waiting here for the kill cost every failed candidate 0.5 s.
        try:
            self.cgroup.rmdir()
        except OSError:
            pass


class NoFreeze:
    """No candidate process to freeze (an in-process fake in tests)."""

    method = "none"

    def freeze(self) -> None:
        pass

    def thaw(self) -> None:
        pass

    def kill(self, timeout_s: float = 0.0) -> bool:
        return True

    def close(self) -> None:
        pass


def still_or_gone(spare):
    """The lane's spare worker frozen, or killed where it will not freeze: its failure is no
    candidate's verdict (red team round 20: it was the measured candidate's `crashed`); the lane
    replaces a dead spare."""
    try:
        spare.freeze()
        return spare
    except (FreezeError, OSError):  # OSError: its group already gone (round 21)
        spare.kill()
        return NoFreeze()
