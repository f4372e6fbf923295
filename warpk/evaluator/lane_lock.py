"""One measurement at a time per core and per GPU on this machine, across evaluator processes.

Every evaluator process puts its first lane on the same cores (`resources.lane_cores`), so two
runs on one machine (the test suite's two xdist workers; a user's `make run` beside a sweep)
measured candidates on the same cores at once, and each slowed the other's timed batches at
random: a copy of the reference got 2.5x against its control's 0.5x that way (2026-12-06). So a
lane holds an exclusive flock on one file per core of its lane and one per GPU (its
CUDA_VISIBLE_DEVICES value: an index or UUID of the machine's) for each candidate's whole
measurement (`Lane.measure`): loading, checking and timing, since another run's torch import on
our cores disturbs our batches as much as its batches do. Another run's lane on other cores and
GPUs goes on, as do both runs' compile pools. The files are taken in one global order, so two
lanes never deadlock, each through a turnstile file (so turns alternate: a lane that lets go and
comes straight back queues behind one already waiting), and the wait comes before the
measurement's backstop deadline starts, so waiting is never a candidate's `timeout`. A lane's
trusted worker and first candidate worker start, off the lane's cores, before it asks (Lane.measure):
a new lane's torch imports are not inside another run's wait.

A holder's measurement is bounded by its own backstop (and its candidate's exit by the 120 s
`resources.REMOVE_WAIT_S`), so we wait as long as it runs; a holder
stopped (SIGSTOP, state T) for STOPPED_WAIT_S is our failure, said in one line (exit 2). The
files live in /tmp/warpk-timing-<uid> (0700, a private folder of this user's), which no sandbox mounts (/tmp
is a private folder: warpk.paths). Who holds a file is what the kernel says (/proc/locks, by the
file's device and inode), never what is written in it: with `evaluate.sandbox=process` (no
isolation) a candidate that wrote a stopped pid of its own into the files made the next run on
the machine fail as if its holder were stopped (red team round 32). What such a candidate leaves
in the folder (an opened-up mode, a directory, link, socket or FIFO for a lock file, a lock file
hard-linked to its turnstile, on which a lane waited on itself for ever) is repaired or moved
aside, never a failure or a hang (round 33); so is a file, link or another user's folder where the
folder should be, a folder or lock file shut to its owner (mode 0), and repairs are made one at a
time under the folder's lock (round 34). It can still hold the files itself, stop its own parent,
or (as root) keep a lock alive past its death; process mode isolates nothing. Runs of different
users do not wait for each other.

Non-goals: no freezing (warpk.evaluator.pool_gate, warpk.evaluator.freeze), no placement.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from warpk.evaluator.errors import HarnessFailure
from warpk.evaluator.freeze import process_state

# a holder stopped this long fails the waiting run; WARPK_TEST_LANE_LOCK_STOPPED_S (tests) shortens it
STOPPED_WAIT_S = float(os.environ.get("WARPK_TEST_LANE_LOCK_STOPPED_S") or 60.0)
# where the folder lies; WARPK_TEST_LANE_LOCK_BASE (tests) moves it, so a test's stopped holder
# stops no other test's run on the machine
BASE_ENV = "WARPK_TEST_LANE_LOCK_BASE"
POLL_S = 0.05
# who holds a lock is looked up this often while waiting: /proc/locks is read whole, and a candidate
# can make it long (100k locks took 3 s a read; red team round 33)
LOOK_S = 1.0
REPAIR_WAIT_S = 10.0  # the folder's lock during a repair of a lock file (milliseconds when honest)
NOTE_AFTER_S = 2.0  # a wait longer than this is logged once (the run's log, not stderr)
# a diagnostic: each hold appended to this file (benchmarks/lane_holds.py reads it)
LOG_ENV = "WARPK_LANE_LOG"


def folder(base: Path | None = None) -> Path:
    """This user's lock folder (made 0700 if missing; what is there instead, a file, a link, a folder
    of another user's, is moved aside once where we may: red team round 34)."""
    path = (base or Path(os.environ.get(BASE_ENV) or "/tmp")) / f"warpk-timing-{os.getuid()}"
    for attempt in (1, 2):
        try:
            with contextlib.suppress(FileExistsError):
                path.mkdir(mode=0o700)
        except OSError as err:
            raise HarnessFailure(f"cannot make {path} for the lanes' machine-wide locks: {err}") from err
        try:
            fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)  # even mode 0
        except OSError as err:
            if attempt == 2 or err.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise HarnessFailure(f"cannot make {path} for the lanes' machine-wide locks: {err}") from err
            _move_aside(path)
            continue
        try:
            info = os.fstat(fd)
            if info.st_uid == os.getuid():
                if stat.S_IMODE(info.st_mode) != 0o700:  # opened up or shut (round 33, 34)
                    os.chmod(f"/proc/self/fd/{fd}", 0o700)  # this very folder, never a link's target
                return path
        finally:
            os.close(fd)
        if attempt == 2:
            break
        _move_aside(path)
    raise HarnessFailure(f"{path} is not a private folder of this user's: remove it (the lanes' "
                         f"machine-wide locks live there)")


def names(cores: tuple[int, ...], gpu: str | None) -> list[str]:
    """The lock files of a lane, in the one order every lane takes them."""
    return sorted([f"core-{c:04d}" for c in cores] + ([f"gpu-{gpu}"] if gpu else []))


def _try_open(path: Path) -> int | None:
    """`path` opened, if it is a plain lock file of this user's with one link; None if not; raised if
    it cannot be opened for another reason."""
    for attempt in (1, 2):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
            break
        except OSError as err:
            if err.errno not in (errno.EISDIR, errno.ELOOP, errno.ENXIO, errno.EACCES, errno.EPERM):
                raise HarnessFailure(f"cannot open the lane lock file {path}: {err}") from err
            # a lock file of ours shut by the creator's umask (honest) or a candidate: its mode
            # set back in place, never moved aside from under its holder (red team round 35)
            if attempt == 2 or err.errno not in (errno.EACCES, errno.EPERM) or not _reopened(path):
                return None
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and info.st_nlink == 1:
        if stat.S_IMODE(info.st_mode) != 0o600:  # made under a umask that shuts it (round 35)
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o600)
        return fd
    os.close(fd)
    return None


def _reopened(path: Path) -> bool:
    """A plain single-link file of ours at `path` given mode 0600 again (through an O_PATH
    descriptor, never a link's target); False where it is not one or cannot be."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and info.st_nlink == 1):
            return False
        os.chmod(f"/proc/self/fd/{fd}", 0o600)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def open_lock_file(path: Path) -> int:
    """`path` opened as a lock file: a plain file of this user's with one link. What a process-mode
    candidate can leave in the folder instead (a directory, a symlink, a socket or FIFO, a hard
    link to another lock file, on which a lane would wait on itself for ever: red team round 33)
    is moved aside once and the file made anew, under a lock on the folder and after a second look,
    so two runs repairing at once never move aside the file the other just made (round 34); what
    remains wrong after that is our failure."""
    fd = _try_open(path)
    if fd is not None:
        return fd
    folder_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _repair_turn(folder_fd, path.parent)  # repairs one at a time; released by the close
        fd = _try_open(path)  # another run may have made it anew while we waited
        if fd is None:
            _move_aside(path)
            fd = _try_open(path)
    finally:
        os.close(folder_fd)
    if fd is None:
        raise HarnessFailure(f"{path} is not a plain lock file of this user's, even made anew: remove "
                             f"{path.parent}")
    return fd


def flock_within(fd: int, operation: int, wait_s: float, poll_s: float = POLL_S) -> bool:
    """flock(fd, operation) waited for at most wait_s; False if it was still held by then (the
    caller says whose failure that is)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(poll_s)


def _repair_turn(folder_fd: int, where: Path) -> None:
    """The folder's flock, for one repair: a wait bounded by REPAIR_WAIT_S (a repair takes
    milliseconds; a process-mode candidate could hold the folder's lock for ever)."""
    if not flock_within(folder_fd, fcntl.LOCK_EX, REPAIR_WAIT_S):
        raise HarnessFailure(f"{where} has been locked for {REPAIR_WAIT_S:g} s by another "
                             f"process while a lock file needed repair: remove {where}")


def _move_aside(path: Path) -> None:
    try:
        os.rename(path, path.with_name(f"{path.name}.moved-{os.getpid()}-{time.monotonic_ns()}"))
    except FileNotFoundError:  # another run moved it first
        pass
    except OSError as err:
        raise HarnessFailure(f"cannot move aside {path}: {err}: remove it") from err


def holder_pid(fd: int) -> int | None:
    """The pid the kernel records for the flock on `fd`'s file held by another open file
    (/proc/locks: `1: FLOCK  ADVISORY  WRITE 4242 fe:00:1311 0 EOF`); None where none is listed."""
    info = os.fstat(fd)
    where = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        words = line.split()
        if len(words) >= 6 and words[1] == "FLOCK" and words[5] == where and words[4].isdigit():
            return int(words[4])
    return None


def _stopped(pid: int) -> bool:
    return process_state(pid) in ("T", "t")  # gone (None): its lock went with it


def _log_hold(path: str, asked: float, got: float) -> None:
    """One line: pid, asked, got, released (epoch s), the pytest test running (or -)."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "-").split(" ")[0]
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {asked:.3f} {got:.3f} {time.time():.3f} {test}\n")


def _note(line: str) -> None:
    logging.getLogger("warpk").info(line)


class LaneLock:
    def __init__(self, cores: tuple[int, ...], gpu: str | None = None, base: Path | None = None,
                 note: Callable[[str], None] = _note):
        self.names, self.base, self.note = names(cores, gpu), base, note

    @contextlib.contextmanager
    def held(self):
        """Every lock of the lane, exclusively, for the duration."""
        fds: list[int] = []
        asked, got = time.time(), None
        try:
            if self.names:
                where = folder(self.base)
                for name in self.names:
                    # the turnstile first: a lane that lets go and comes straight back queues
                    # behind one already waiting (without it one run starved the other: 87 s
                    # against 178 s for the same 24 candidates, 2026-12-06)
                    turn = self._open_and_take(where / f"{name}.turn")
                    try:
                        fds.append(self._open_and_take(where / name))
                    finally:
                        os.close(turn)
            got = time.time()
            yield
        finally:
            for fd in reversed(fds):
                os.close(fd)  # closing drops the lock
            if got is not None and os.environ.get(LOG_ENV):
                _log_hold(os.environ[LOG_ENV], asked, got)

    def _open_and_take(self, path: Path) -> int:
        fd = open_lock_file(path)
        try:
            self._take(fd, path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _take(self, fd: int, path: Path) -> None:
        start, stopped_since, said, looked = time.monotonic(), None, False, -LOOK_S
        holder = None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            now = time.monotonic()
            if now - looked < LOOK_S:
                time.sleep(POLL_S)
                continue
            holder, looked = holder_pid(fd), now
            if not said and now - start > NOTE_AFTER_S:
                self.note(f"evaluate: waiting for another run's measurement on {path.name} "
                          f"(pid {holder if holder is not None else 'unknown'})")
                said = True
            if holder is not None and _stopped(holder):
                stopped_since = stopped_since or now
                if now - stopped_since > STOPPED_WAIT_S:
                    raise HarnessFailure(f"another evaluator (pid {holder}) holds {path} and has been "
                                         f"stopped for {STOPPED_WAIT_S:g} s: resume or end it")
            else:
                stopped_since = None
            time.sleep(POLL_S)
