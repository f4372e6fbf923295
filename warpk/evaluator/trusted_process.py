"""The lane's trusted worker seen from the parent (warpk.evaluator.lane): started, its Ready
awaited before the lane takes the machine's lane lock, closed with a bounded wait.

Non-goals: no measuring (warpk.evaluator.trusted), no candidate workers (warpk.evaluator.sandbox).
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from warpk.evaluator import protocol as wire
from warpk.evaluator.errors import HarnessFailure
from warpk.evaluator.hostside import OutputTail, remove_tree
from warpk.evaluator.pool_gate import run_gate, thaw_run_pool
from warpk.evaluator.sandbox import KILL_WAIT_S, PROJECT_ROOT, worker_env

REQUEST_TIMEOUT_S = 60.0  # an idle trusted worker takes a request at once
READY_TIMEOUT_S = 300.0  # a new trusted worker's torch import (seconds; minutes on a loaded machine)
QUIT_WAIT_S = 10.0  # a trusted worker exits this soon after its socket closes


def send_timeout(sock: socket.socket, seconds: float) -> None:
    """Bound every blocking send on `sock` (protocol.send has no limit of its own): a peer that
    stops reading makes it raise BlockingIOError after `seconds` instead of hanging."""
    whole = int(seconds)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                    struct.pack("ll", whole, int((seconds - whole) * 1e6)))


class TrustedProcess:
    """The lane's trusted worker, started on first use and restarted if it dies."""

    def __init__(self, env: dict[str, str], threads: int, cores: tuple[int, ...] = ()):
        self.env, self.threads = env, threads
        self.cores = cores  # where it runs: off the lane's timed cores where there are others
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.home: Path | None = None
        self.output: OutputTail | None = None
        self.ready = False  # its Ready came: torch imported, requests are taken

    def start(self) -> None:
        self.ready = False
        self.home = Path(tempfile.mkdtemp(prefix="warpk-trusted-"))
        self.sock, child = socket.socketpair()
        send_timeout(self.sock, REQUEST_TIMEOUT_S)
        env = worker_env(self.home, self.threads,
                         {**self.env, **run_gate(), "WARPK_PARENT_FD": str(child.fileno())})
        logs = os.environ.get("WARPK_WORKER_LOGS")  # debugging: keep the trusted worker's log there
        if logs:
            env["WARPK_DEBUG_TIMING"] = "1"
        # profile_evaluator.py's laps; tests; screen_copy_bias.py
        for name in ("WARPK_PROFILE", "WARPK_TEST_BIG_IO_BYTES", "WARPK_DEVICE_MEMORY_BYTES",
                     "WARPK_DEBUG_GO_PAUSE_MS", "WARPK_DEBUG_FREEZE_REFERENCE"):
            if os.environ.get(name):
                env[name] = os.environ[name]
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p)
        self.output = OutputTail()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "warpk.evaluator.trusted"], cwd=self.home, env=env,
                stdin=subprocess.DEVNULL, stdout=self.output.write_fd, stderr=self.output.write_fd,
                pass_fds=(child.fileno(),), start_new_session=True,
                preexec_fn=(lambda: os.sched_setaffinity(0, self.cores)) if self.cores else None,
            )
        except BaseException:
            self.close()
            raise
        finally:
            child.close()
        self.output.started(Path(logs, f"trusted-{self.proc.pid}.txt") if logs else None)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until its Ready (once per start): HarnessFailure, with its last line, where it died or
        took longer than `timeout_s`."""
        if self.ready:
            return
        try:
            wire.recv(self.sock, (wire.Ready,), timeout_s)
        except (OSError, wire.ProtocolError) as err:
            words = self.last_words()
            self.close()
            raise HarnessFailure(f"the trusted worker did not start ({err}"
                                 f"{': ' + words if words else ''})") from err
        self.ready = True

    def last_words(self) -> str:
        """The last line it wrote (a traceback's last line, when it died of one)."""
        return self.output.last_line() if self.output is not None else ""

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()  # it exits when its socket closes
            self.sock = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=QUIT_WAIT_S)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                try:
                    self.proc.wait(timeout=KILL_WAIT_S)
                except subprocess.TimeoutExpired:
                    pass  # stuck in the kernel (a GPU driver): nothing more to do from here
            self.proc = None
            # one killed inside PoolGate.hold (at the backstop, or after its QUIT_WAIT_S) left the
            # compile pool frozen: thaw it unless another lane is timing
            thaw_run_pool()
        if self.output is not None:
            self.output.close()
            self.output = None
        if self.home is not None:
            remove_tree(self.home)  # in `process` mode a candidate can write here too
            self.home = None
