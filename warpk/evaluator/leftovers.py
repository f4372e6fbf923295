"""What a dead sandbox leaves to the kernel, waited for before its memory group goes (called by
resources.ResourceGroup.close once its processes are gone).

An fd sent into a unix socket's own queue outlives every process of the sandbox: a garbage cycle
the kernel's unix collector frees only when some unix socket is next closed, anywhere, from a
worker thread outside the sandbox's cgroup. An `O_PATH` fd of the sandbox's /tmp kept so took the
teardown of 700k empty files (~1-2 s of kernel work) into the next candidate's baseline, 1.3-2.5x
too slow and cached a minute (red team round 65, corpus 65). Refusing unix sockets in the sandbox
was withdrawn: libcuda makes one to look for an MPS daemon (CUDA did not start in a probe with it
refused on the H100, the cause not read). What the cycle holds is charged to
the sandbox's memory group (the tmpfs's inodes and pages; on this VM 274 MiB for 300k files, kept
for seconds until something closed a unix socket, then freed in 0.5 s: benchmarks/
bench_leftovers.py). So the lane closes one itself with an fd in flight, which runs the collector
now, and waits while the group's memory
that is not page cache falls, until it is under KERNEL_FLOOR_BYTES (a sandbox that ran torch
leaves ~1 MiB), stops falling for STUCK_S (nothing is being freed: what stays has no work left to
do), or SETTLE_WAIT_S. The wait is the dead candidate's, before the next one's baseline.

The same holds for pages it dirtied in its build dir (a host folder on disk, bound read-write):
the kernel's flusher writes them back ~30 s later, outside its cgroup (300k 4 KiB files: ~6 s of
a core over 30 s; once in 4 tries it hit the next baseline, 2.2x too slow: red team round 66,
corpus 66). Dirty and written-back pages are charged to its group too, so where they are over
DIRTY_FLUSH_BYTES the lane syncs the build dir's filesystem (`syncfs`) before the wait; an honest
build's few MB are left to the flusher. Not always: syncfs writes back everything on that
filesystem, other processes' too; with it at every close, the full test suite's corpus fixture
took 481 s against 350 and a C++ candidate's load timed out (120 s; session 38, one run each, not
taken apart further). Open (round 67): pages first charged to another
group (the compile pool's sandbox imports the same source into the same folder) and dirtied again
here are not in this group's count (800 MB dirty on the host, 2-5 MiB held); no baseline was seen
slowed by it (rewriting pages that have their disk blocks is cheap to write back).

Non-goals: no limits (resources), no killing (resources.kill_group).
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

KERNEL_FLOOR_BYTES = 8 << 20
STUCK_S = 0.25
SETTLE_WAIT_S = 30.0
POLL_S = 0.02
FALLING_BYTES = 1 << 20  # less than this between looks is not falling
DIRTY_FLUSH_BYTES = 64 << 20


def run_unix_collector() -> None:
    """Close a unix socket with an fd in flight: the kernel runs its garbage collector of
    in-flight fds (queued on the release of a unix socket while any are in flight)."""
    try:
        a, b = socket.socketpair()
        fd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # out of fds: the wait below still sees what is freed without it
        return
    try:
        socket.send_fds(a, [b"x"], [fd])
    except OSError:
        pass
    finally:
        os.close(fd)
        a.close()
        b.close()


def held_bytes(memory: Path, v2: bool) -> int | None:
    """The group's memory that is not clean page cache: kernel objects, tmpfs and shared pages,
    dirty pages and those being written back, any anonymous memory (None where unreadable)."""
    try:
        return _held(memory, v2)[0]
    except (OSError, ValueError):
        return None


def _held(memory: Path, v2: bool) -> tuple[int, int]:
    lines = (memory / "memory.stat").read_text().splitlines()
    stat = {k: int(v) for k, v in (line.split() for line in lines)}
    names = ("memory.current", "file", "file_dirty", "file_writeback") if v2 else (
        "memory.usage_in_bytes", "cache", "dirty", "writeback")
    used = int((memory / names[0]).read_text())
    dirty = stat.get(names[2], 0) + stat.get(names[3], 0)
    return used - stat.get(names[1], 0) + stat.get("shmem", 0) + dirty, dirty


def dirty_bytes(memory: Path, v2: bool) -> int:
    try:
        return _held(memory, v2)[1]
    except (OSError, ValueError):
        return 0


def sync_folder(folder: Path | None) -> None:
    """syncfs of the filesystem holding `folder` (a host folder the parent made and bound into a
    sandbox, which could change what is in it, not the folder: opened as a directory, no link
    followed); None: the sandbox wrote in no host folder, nothing to do."""
    if folder is None:
        return
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # gone (the caller removed it) or not a folder: nothing to sync through it
        return
    try:
        ctypes.CDLL(None, use_errno=True).syncfs(fd)
    finally:
        os.close(fd)


def settle(memory: Path, v2: bool, flush: Callable[[], None] | None = None, clock=time.monotonic,
           sleep=time.sleep) -> tuple[float, int | None]:
    """Run the collector (and `flush` where the group holds many dirty pages), then wait while
    the group's held memory falls (see the module): the seconds waited and the bytes still held."""
    start = clock()
    run_unix_collector()
    if flush is not None and dirty_bytes(memory, v2) > DIRTY_FLUSH_BYTES:
        flusher = threading.Thread(target=flush, name="leftovers-syncfs", daemon=True)
        flusher.start()
        flusher.join(SETTLE_WAIT_S)
    held = last = held_bytes(memory, v2)
    last_fall = start
    while held is not None and held > KERNEL_FLOOR_BYTES:
        now = clock()
        if now - last_fall > STUCK_S or now - start > SETTLE_WAIT_S:
            break
        sleep(POLL_S)
        held = held_bytes(memory, v2)
        if held is not None and held < last - FALLING_BYTES:
            last, last_fall = held, clock()
    return clock() - start, held
