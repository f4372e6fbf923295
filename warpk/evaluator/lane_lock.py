"""One timing at a time per core and per GPU on this machine, across evaluator processes.

Every evaluator process puts its first lane on the same cores (`resources.lane_cores`), so two
runs on one machine (the test suite's two xdist workers; a user's `make run` beside a sweep)
time their candidates and references on the same cores at once, and each slows the other's
batches at random: a copy of the reference got 2.5x against its control's 0.5x that way
(2026-12-06). So a lane's trusted worker takes an exclusive flock on one file per core of its
lane and one per GPU (by the device's UUID: a SLURM job's "GPU 0" is not another job's) for as
long as it times or measures energy (`LaneLock.held`). Another run's timing waits; its loading,
building and checking go on. Locks are taken in one global order, so two lanes never deadlock.

The files live in a folder of this user's, 0700, under the host's temp dir, which no sandbox
mounts: a candidate can neither see nor hold them. Runs of different users do not wait for
each other. A lock held longer than WAIT_S (a run stopped with SIGSTOP there) is our failure,
said in one line, never the candidate's verdict.

Non-goals: no freezing (warpk.evaluator.pool_gate, warpk.evaluator.freeze), no placement.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
import time
from pathlib import Path

from warpk.evaluator.errors import HarnessError

CORES_ENV = "WARPK_LANE_CORES"  # set for the trusted worker by its lane: "2,3"
FOLDER_ENV = "WARPK_LANE_LOCKS"  # and the folder, the parent's (the worker's TMPDIR is its own)
# for another run's timing of one candidate (energy included) to end; WARPK_TEST_LANE_LOCK_WAIT_S
# (tests only, passed to the trusted worker by lane.py) shortens it
WAIT_S = float(os.environ.get("WARPK_TEST_LANE_LOCK_WAIT_S") or 600.0)
POLL_S = 0.02


def folder(path: Path | None = None) -> Path:
    """This user's lock folder (made 0700 if missing; refused if it is not ours or a link)."""
    path = path or Path(tempfile.gettempdir()) / f"warpk-timing-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise HarnessError(f"{path} is not a private folder of this user's: remove it (the lane locks "
                           f"live there)")
    return path


def env_for(cores: tuple[int, ...]) -> dict[str, str]:
    """What a lane adds to its trusted worker's environment."""
    return {CORES_ENV: ",".join(map(str, cores)), FOLDER_ENV: str(folder())}


def names(cores: tuple[int, ...], gpu_uuid: str | None) -> list[str]:
    """The lock files of a lane, in the one order every lane takes them."""
    return sorted([f"core-{c:04d}" for c in cores] + ([f"gpu-{gpu_uuid}"] if gpu_uuid else []))


def gpu_identity(props) -> str:
    """The physical GPU behind torch's device properties: its UUID, else its PCI bus id."""
    for name in ("uuid", "pci_bus_id"):
        value = getattr(props, name, None)
        if value:
            return str(value)
    raise HarnessError("torch's device properties have neither uuid nor pci_bus_id: the lane's "
                       "timing lock cannot name its GPU")


class LaneLock:
    def __init__(self, cores: tuple[int, ...], gpu_uuid: str | None = None, wait_s: float = WAIT_S,
                 where: Path | None = None):
        self.names = names(cores, gpu_uuid)
        self.wait_s, self.where = wait_s, where

    @classmethod
    def from_env(cls, gpu_uuid: str | None = None) -> LaneLock:
        """The trusted worker's: the cores and the folder its lane gave it (`env_for`)."""
        cores = os.environ.get(CORES_ENV, "")
        where = os.environ.get(FOLDER_ENV)
        return cls(tuple(int(c) for c in cores.split(",") if c), gpu_uuid,
                   where=Path(where) if where else None)

    @contextlib.contextmanager
    def held(self):
        """Every lock of the lane, exclusively, for the duration."""
        fds: list[int] = []
        try:
            if self.names:
                base = folder(self.where)
                deadline = time.monotonic() + self.wait_s
                for name in self.names:
                    fd = os.open(base / name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                    fds.append(fd)
                    self._take(fd, base / name, deadline)
            yield
        finally:
            for fd in reversed(fds):
                os.close(fd)  # closing drops the lock

    def _take(self, fd: int, path: Path, deadline: float) -> None:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise HarnessError(f"another evaluator on this machine held the timing lock {path} for "
                                       f"{self.wait_s:g} s: is a run stopped there?") from None
                time.sleep(POLL_S)
