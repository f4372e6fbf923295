"""The host's file table, which no sandbox limit bounds: a guard that kills the sandbox filling it.

Linux counts every open file of the host against one limit, fs.file-max, and past it refuses a
new one (ENFILE) to every process without CAP_SYS_ADMIN in the first user namespace: every
sandbox, our reference worker and the next candidate's worker included. RLIMIT_NOFILE x pids.max
does not bound what a sandbox holds: a file mapped and then closed stays open with no fd (up to
vm.max_map_count, 65530, per process) for ~400 bytes of kernel memory, so a few dozen processes
under a 2 GB memory limit held all 2.47M of a 24 GiB host's table (red team round 43: an honest
candidate's import failed with ENFILE, and the reference worker's load of the next task too, a
harness failure that stopped the run). Hosts whose fs.file-max is LONG_MAX (systemd's default)
are out of reach; this one's is not.

The guard: one daemon thread per evaluating process, awake while a candidate's sandbox of this
process is alive (`watch` .. `forget`, from warpk.evaluator.sandbox), reads /proc/sys/fs/file-nr
every POLL_S. Once the host's files in use pass TRIGGER_SHARE of fs.file-max, it counts what each
of those sandboxes holds (fds and mappings of its processes, from /proc: an upper bound, as
anonymous mappings count too; an honest torch worker has ~400) and kills the largest holder if it
holds more than FLOOR_FILES, giving its reason in `guard_verdict` (the lane's record: `crashed`;
a compile worker killed this way leaves the candidate to its lane, as any pool failure does).
Where none of them holds that many, the table is filling for other reasons: said once on stderr.

Not covered: sandboxes of other processes (each evaluating process guards its own), reference
workers (trusted code, in the trusted worker's process), a sandbox whose /proc this process
cannot read (counted as 0: a non-root parent with non-dumpable workers), and a fill faster than
the poll and the count (a 2-core VM took ~32 s for the whole table).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from warpk.evaluator.freeze import process_tree

FILE_NR = Path("/proc/sys/fs/file-nr")  # allocated, free (always 0 since 2.6), fs.file-max
TRIGGER_SHARE = 0.25  # of fs.file-max in use on the host: count and kill from here
FLOOR_FILES = 16384  # no sandbox holding fewer is killed (an honest one holds hundreds)
POLL_S = 0.2

_watched: set = set()  # the candidates' UntrustedProcess objects alive in this process
_changed = threading.Condition()
_started = False
_warned = False


def files_in_use() -> tuple[int, int] | None:
    """(open files on the host, fs.file-max), or None where /proc does not say."""
    try:
        allocated, _, maximum = (int(x) for x in FILE_NR.read_text().split())
    except (OSError, ValueError):
        return None
    return allocated, maximum


def files_held(pids) -> int:
    """Open files the processes `pids` hold: the fds of each of their threads (a thread may have
    an fd table of its own: unshare(CLONE_FILES)) and their mappings; an upper bound (a shared
    table counts once per thread, anonymous mappings count)."""
    total = 0
    for pid in pids:
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                try:
                    total += len(os.listdir(f"/proc/{pid}/task/{tid}/fd"))
                except OSError:
                    continue
            with open(f"/proc/{pid}/maps", "rb") as maps:
                while chunk := maps.read(1 << 20):
                    total += chunk.count(b"\n")
        except OSError:  # gone, or not ours to read
            continue
    return total


def sandbox_pids(worker) -> set[int]:
    """Every process of one sandbox: below its first process, and in its cgroups (new sessions)."""
    pids = process_tree(worker.proc.pid)
    for procs in worker.group.procs:
        try:
            pids |= {int(p) for p in Path(procs).read_text().split()}
        except (OSError, ValueError):
            continue
    return pids


def watch(worker) -> None:
    """Guard the host's file table from `worker`'s sandbox until `forget(worker)`."""
    global _started
    with _changed:
        _watched.add(worker)
        _changed.notify()
        if not _started:
            threading.Thread(target=_run, name="warpk-file-table", daemon=True).start()
            _started = True


def forget(worker) -> None:
    with _changed:
        _watched.discard(worker)


def _run() -> None:
    while True:
        with _changed:
            while not _watched:
                _changed.wait()
        time.sleep(POLL_S)
        check()


def check() -> None:
    """One look at the table; kills the largest holder where it is past the trigger (see above)."""
    global _warned
    use = files_in_use()
    if use is None or use[0] < use[1] * TRIGGER_SHARE:
        return
    with _changed:
        workers = [w for w in _watched if w.guard_verdict is None]
        dying = len(workers) < len(_watched)  # killed here, its files still being freed
    held = sorted(((files_held(sandbox_pids(w)), id(w), w) for w in workers), reverse=True)
    if held and held[0][0] > FLOOR_FILES:
        kill(held[0][2], held[0][0], use)
    elif not _warned and not dying:
        _warned = True
        print(f"warpk: the host's file table is {use[0]} of {use[1]} (fs.file-max) and no sandbox "
              f"of this run holds more than {FLOOR_FILES}: other processes are filling it; raise "
              f"fs.file-max (sysctl) if evaluations start failing with 'Too many open files in "
              f"system'", file=sys.stderr, flush=True)


def kill(worker, held: int, use: tuple[int, int]) -> None:
    """SIGKILL the sandbox, its reason first (the lane reads it once the worker is gone)."""
    worker.guard_verdict = (
        f"the candidate's sandbox held {held} open files (fds and file mappings) once the host's "
        f"file table had reached {use[0]} of {use[1]} (fs.file-max), more than the {FLOOR_FILES} a "
        f"sandbox may hold past {TRIGGER_SHARE:.0%} of it, and was killed")
    try:
        if worker.proc.poll() is None:
            os.killpg(worker.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    worker.group.kill()
