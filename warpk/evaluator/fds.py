"""Fds that arrive with a frame's bytes: every read takes them, and those not wanted are closed
apart, without waiting.

A peer can attach fds (SCM_RIGHTS) to any byte of a frame. A plain recv lets the kernel drop
them in the receiving thread, and the last close of some files blocks: a TCP socket lingering
with unsent data until its peer goes, for ever where the peer is another fd sent along. A
candidate that attached one held the trusted worker until its backstop, about 38 minutes at the
defaults (red team round 38), and queued after its last frame or inside another socket held a
lane, a trusted thread or the parent's compile pool for ever (round 39; the sandbox also refuses
SO_LINGER now, warpk.evaluator.seccomp). So every read uses recvmsg with room for one message's
fds (SCM_MAX_FD), and what is not kept goes to `dispose`, as does the last close of a socket a
worker could have filled (`close_apart`).

Non-goals: no framing (warpk.evaluator.protocol).
"""

from __future__ import annotations

import array
import os
import socket
import stat
import struct
import threading
import time

_FDS_MAX = 253  # SCM_MAX_FD: the fds one message may carry
# No close here blocks for long (a sandbox cannot make a socket linger: warpk.evaluator.seccomp),
# so a wait this long means something else: the lane goes on and the time shows in its record.
SETTLE_TIMEOUT_S = 10.0
_LOCK = threading.Lock()
_CLOSING: set[threading.Thread] = set()  # dispose's threads still closing


def recv_some(sock: socket.socket, n: int) -> tuple[bytes, list[int]]:
    """Up to n bytes and the fds that came with them (close-on-exec)."""
    data, ancillary, _flags, _addr = sock.recvmsg(n, socket.CMSG_SPACE(_FDS_MAX * 4), socket.MSG_CMSG_CLOEXEC)
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += array.array("i", payload[: len(payload) - len(payload) % 4]).tolist()
    return data, fds


def dispose(fds: list[int]) -> None:
    """Close fds a peer sent where none belongs, without waiting: a socket's lingering is switched
    off first (a TCP socket with SO_LINGER and unsent data blocks its last close until the peer
    goes, for ever when the peer is another fd sent along), the rest on a thread of their own
    (a device's close is its driver's business). `settle` waits for them."""
    if fds:
        thread = threading.Thread(target=_close_all, args=(list(fds),), name="dispose-fds", daemon=True)
        with _LOCK:  # started first (a thread that never started cannot be joined), the lock held
            thread.start()  # until it is in the set, so its own discard comes after the add
            _CLOSING.add(thread)


def settle(timeout_s: float = SETTLE_TIMEOUT_S) -> bool:
    """Wait for the closes `dispose` started (True), or `timeout_s` (False): freeing what a
    candidate sent (a large memfd, a tmpfs kept alive) runs before the next timed batch and
    before the lane moves on, not beside them (red team round 41)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with _LOCK:
            pending = next(iter(_CLOSING), None)
        if pending is None:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        pending.join(left)


_NO_LINGER = struct.pack("ii", 1, 0)  # close at once, resetting the connection


def _close_all(fds: list[int]) -> None:
    try:
        for fd in fds:
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    _no_linger(fd)
            except OSError:
                pass
            _close(fd)
    finally:
        with _LOCK:
            _CLOSING.discard(threading.current_thread())


def _no_linger(fd: int) -> None:
    sock = socket.socket(fileno=os.dup(fd))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _NO_LINGER)
    finally:
        sock.close()


def close_apart(sock: socket.socket) -> None:
    """Close our end of a worker's socket without waiting: whatever is still queued in it (fds
    sent after its last frame, a tmpfs kept alive by an O_PATH fd: round 40) is freed on a
    thread of its own."""
    fd = sock.detach()
    if fd >= 0:
        dispose([fd])


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
