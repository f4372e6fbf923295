"""What the parent keeps of a worker: its output, through a pipe, and the removal of its folder.

The parent never opens, follows or walks a path a candidate can write (warpk.evaluator.sandbox
states the threat model). A worker's stdout and stderr go to a pipe made here, never to a file
in its working dir: a symlink planted where a log file was would make the parent read a host
file into the record, and a FIFO there would block the parent's open() forever. A daemon thread
drains the pipe without blocking and keeps only the last TAIL_BYTES, so a flood of output costs
the parent nothing and cannot stall the worker on a full pipe either.

A host folder a worker wrote into (a `process`-mode working dir) is removed by `rm -rf` under a
time limit: it never follows a symlink, has no depth limit (shutil.rmtree raises RecursionError
on a tree ~1000 folders deep and leaves it on the host) and what it cannot remove is logged,
never raised, so a candidate's leftovers never cost the lane or the run.

Non-goals: no disk quota (the host's job), no parsing of what a worker printed.
"""

from __future__ import annotations

import logging
import os
import select
import shutil
import subprocess
import threading
from pathlib import Path

log = logging.getLogger(__name__)

TAIL_BYTES = 4096  # what a record's reason can quote of a dead worker's last words
CHUNK_BYTES = 1 << 16
POLL_MS = 100  # how often the drain notices that it was told to stop
JOIN_S = 5.0  # the drain thread stops within POLL_MS; this only bounds a stuck log copy
REMOVE_TIMEOUT_S = 120.0


class OutputTail:
    """A worker's stdout and stderr: a pipe made here, drained by a daemon thread into the last
    TAIL_BYTES. `write_fd` goes to the worker (Popen's stdout and stderr); call `started()` once
    it is running. `copy_to`: also append everything to that host file (the parent's own file:
    WARPK_WORKER_LOGS debugging)."""

    def __init__(self) -> None:
        self._read_fd, self.write_fd = os.pipe()  # both close-on-exec; Popen dup2s write_fd
        os.set_blocking(self._read_fd, False)
        self._tail = b""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._eof = threading.Event()  # every writer (the worker, its children) has closed
        self._thread: threading.Thread | None = None

    def started(self, copy_to: Path | None = None) -> None:
        """The worker holds its own copy of the write end now: drop ours, start draining."""
        os.close(self.write_fd)
        self.write_fd = -1
        copy = open(copy_to, "ab") if copy_to else None  # noqa: SIM115 - the thread closes it
        self._thread = threading.Thread(target=self._drain, args=(copy,), name="worker-output", daemon=True)
        self._thread.start()

    def _drain(self, copy) -> None:
        poller = select.poll()  # not select(): a busy trainer's fds exceed select's 1024
        poller.register(self._read_fd, select.POLLIN)
        try:
            while not self._stop.is_set():
                if not poller.poll(POLL_MS):
                    continue
                try:
                    chunk = os.read(self._read_fd, CHUNK_BYTES)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._eof.set()
                    return
                with self._lock:
                    self._tail = (self._tail + chunk)[-TAIL_BYTES:]
                if copy is not None:
                    copy.write(chunk)
        except OSError as err:  # a failed log copy, or the fd itself: the tail keeps what it has
            log.warning("worker output: %s", err)
        finally:
            os.close(self._read_fd)
            if copy is not None:
                copy.close()
            self._eof.set()

    def last_line(self, chars: int = 300, wait_s: float = 1.0) -> str:
        """The last non-empty line the worker wrote (its last `chars` characters), after waiting
        up to `wait_s` for the pipe's end (a dying worker's last words are still in flight; a
        child it left holding the pipe cannot delay this longer)."""
        self._eof.wait(wait_s)
        with self._lock:
            text = self._tail.decode(errors="replace")
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return " ".join(lines[-1].split())[-chars:] if lines else ""

    def close(self) -> None:
        """Stop draining (the pipe is closed by the thread itself: no fd is closed under it)."""
        self._stop.set()
        if self._thread is None:  # never started: both ends are still ours
            for fd in (self._read_fd, self.write_fd):
                if fd >= 0:
                    os.close(fd)
            self._read_fd = self.write_fd = -1
            self._eof.set()
            return
        self._thread.join(JOIN_S)


def remove_tree(path: Path, timeout_s: float = REMOVE_TIMEOUT_S) -> bool:
    """Remove a host folder a candidate may have written into, without following its links and
    at any depth; True when nothing is left. Never raises: a failure is logged."""
    if not os.path.lexists(path):
        return True
    rm = shutil.which("rm") or "/bin/rm"
    try:
        subprocess.run([rm, "-rf", "--one-file-system", "--", str(path)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        log.warning("could not remove %s: %s", path, err)
    if os.path.lexists(path):
        log.warning("could not remove all of %s (left on the host)", path)
        return False
    return True
