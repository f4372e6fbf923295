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
of those sandboxes holds (the fds of every thread and the mappings of its processes as their
main threads see them, from /proc: an upper bound, as anonymous mappings count too; an honest torch
worker has ~400) and kills each one over FLOOR_FILES as soon as it is counted, a count cut short
at the floor or at COUNT_BUDGET_S (the reading time of a mapping's line grows with its path, which
the candidate chooses), giving the reason in `guard_verdict` (the lane's record: `crashed`; a
compile worker killed this way leaves the candidate to its lane, as any pool failure does). Where
none of them holds that many, the table is filling for other reasons: said once on stderr.
Round 44 (red team): an exited main thread hid every mapping from the process's own maps, and
paths 40,000 folders deep made one count take 31.6 s; round 45: a chain of threads living
microseconds each hid them from every live thread's look too. Now a count is cut at the floor or
the budget, and a process whose main thread left while others run counts as over (`_mappings`).
Round 46: chains of processes sharing one address space, or of threads sharing a private fd
table, escape any look by pid; the sandbox's seccomp filter refuses both (warpk.evaluator.seccomp).
Round 47: a chain of plain forked processes, each exiting as its child goes on, with paths deep
enough that a holder is gone before its maps are read, and a chain of vfork children each
killing its waiting parent, hidden behind 800 zombies, held 30,000 files for 15 s past a lowered
trigger unseen (`ok`): any look by pid races the churn. So every look first asks the kernel
what the sandbox's memory cgroup holds in kernel memory besides page tables (`kernel_bytes`:
each file held costs 220-400 bytes of it, a file object and maybe a mapping, charged to the
group that made them whichever process holds them now; round 48 measured fds, O_PATH, eventfd,
epoll, pipes, sockets and mappings, none cheaper) and kills past KERNEL_FLOOR_BYTES (measured on
the 2-core VM, cgroup v1: an honest torch worker ~1.3 MiB, a sandbox building a C++ extension
5.4 MiB at most; the fork-chain hoarder 11-31 MiB for 30,000 files). Page tables are left out:
an honest worker's grow with the memory it touches (~2 MiB a GiB; a 4 GiB workspace was killed
at a scaled floor, round 48).

Not covered: where the memory cgroup does not account kernel memory (no cgroup, or
cgroup.memory=nokmem: reads as 0), a chain outruns the look by pid; sandboxes of other processes
(each evaluating process guards its own), reference workers (trusted code, in the trusted worker's
process), a sandbox whose /proc this process cannot read (counted as 0: a non-root parent with
non-dumpable workers), files kept open by kernel objects other than fd tables and mappings (fds in
flight: bounded per user by RLIMIT_NOFILE, round 37; AIO: io_setup refused,
warpk.evaluator.seccomp), up to KERNEL_FLOOR_BYTES of files per sandbox behind a churning chain
(~30,000-60,000), honest workers over that floor on a GPU host (not measured there: CUDA's own
kernel memory), and a fill faster than the poll and the count (measured on the 2-core VM: ~200k
files/s from C on both cores, so the table's last three quarters take ~9 s; poll and count ~1-3 s).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from warpk.evaluator.freeze import live_view, process_tree

FILE_NR = Path("/proc/sys/fs/file-nr")  # allocated, free (always 0 since 2.6), fs.file-max
TRIGGER_SHARE = 0.25  # of fs.file-max in use on the host: count and kill from here
FLOOR_FILES = 16384  # no sandbox holding fewer is killed (an honest one holds hundreds)
POLL_S = 0.2
HIDDEN = 1 << 40  # the count of a process hiding its mappings (`_mappings`)
SETTLE_S = 0.05
COUNT_BUDGET_S = 1.0  # to count one sandbox (an honest one: ~1 ms); past it, it is over the floor
KERNEL_FLOOR_BYTES = 32 << 20  # kernel memory of a sandbox's group past which it is killed
PAGE_TABLE_ALLOWANCE = 1.01 / 512  # of its anonymous memory: 8 bytes a 4 KiB page, and the levels above

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


def files_held(pids, limit: int | None = None, budget_s: float | None = None) -> int:
    """Open files the processes `pids` hold: the fds of each of their threads (a thread may have
    an fd table of its own where the filter lets it) and their mappings as the main thread sees
    them (`_mappings`); an upper bound (a shared table counts once per thread, anonymous mappings
    count). Stops once past `limit` or `budget_s` (the candidate
    chooses how long its maps take to read: a path thousands of folders deep costs ~3 ms a line,
    red team round 44), returning `limit + 1`."""
    total, deadline = 0, time.monotonic() + (budget_s or float("inf"))
    for pid in pids:
        for tid in _tasks(pid):
            try:
                total += len(os.listdir(f"/proc/{pid}/task/{tid}/fd"))
            except OSError:
                continue
        total += _mappings(pid, limit - total if limit is not None else None, deadline)
        if limit is not None and (total > limit or time.monotonic() > deadline):
            return limit + 1
    return total


def _mappings(pid: int, limit: int | None, deadline: float) -> int:
    """Lines of `pid`'s maps as its main thread sees them, read until past `limit` or `deadline`.
    A main thread that left while others run on sees no memory (its maps read empty) and hides
    the process's mappings from every look but a live thread's, which a chain of threads living
    microseconds each outruns (red team rounds 44-45): no honest worker's main thread leaves
    first, so such a process counts as over any limit (HIDDEN) once it stays so for SETTLE_S (a
    process that is exiting passes through that state briefly)."""
    for attempt in range(2):
        lines = 0
        try:
            with open(f"/proc/{pid}/task/{pid}/maps", "rb", buffering=0) as maps:
                while chunk := maps.read(1 << 16):
                    lines += chunk.count(b"\n")
                    if (limit is not None and lines > limit) or time.monotonic() > deadline:
                        return lines
        except OSError:  # gone
            return 0
        if lines or len(_tasks(pid)) < 2:
            return lines
        if attempt == 0:
            time.sleep(SETTLE_S)
    return HIDDEN


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def kernel_bytes(worker, pids: set[int] = frozenset()) -> int:
    """Kernel memory charged to the sandbox's memory cgroup less its page tables (file objects,
    mappings, stacks: what it made, whichever of its processes holds it now); 0 where not
    accounted. Page tables grow with the memory an honest worker touches (~2 MiB a GiB in 4 KiB
    pages: a 4 GiB workspace alone crossed a scaled floor, red team round 48), so they are left
    out: cgroup v2 names them; v1 does not, so the page tables of its largest address space (the
    most VmPTE of its processes `pids`) come off, at most PAGE_TABLE_ALLOWANCE of the memory they
    map. Not a sum: vfork children sharing one address space each report its tables (red team
    round 50: 24 of them made 0.5 MiB of tables read as 12 MiB); and not the allowance alone: a
    file mapped in 2 MiB folios needs no tables (round 49: 3.3 GiB of host libraries earned 7.4
    MiB). Of anonymous memory only (rss, its 2 MiB pages included: each keeps one 4 KiB table
    aside, round 52): the trusted worker's reads of a worker's outputs (process_vm_readv) make
    tables charged to the reader that show in the worker's VmPTE, over memory a candidate can
    leave untouched, mapped from a memfd or zero pages counted in no rss (round 51); and no
    output is read off a private page the worker never touched (warpk.evaluator.touched: memory
    written after such a read sat on the reader's tables, round 52). A process the look misses,
    or a second address space, only makes the figure larger."""
    memory = worker.group.dirs.get("memory")
    if memory is None:
        return 0
    try:
        stat = dict(line.split() for line in (memory / "memory.stat").read_text().splitlines())
        if (memory / "memory.kmem.usage_in_bytes").exists():  # cgroup v1
            mapped = int(stat.get("rss", 0))  # anonymous, huge pages included (one table each 2 MiB)
            kmem = int((memory / "memory.kmem.usage_in_bytes").read_text())
            return max(0, kmem - min(int(mapped * PAGE_TABLE_ALLOWANCE), page_tables(pids)))
        if "kernel" in stat:  # cgroup v2, Linux 5.18 and later
            return int(stat["kernel"]) - int(stat.get("pagetables", 0)) - int(stat.get("sec_pagetables", 0))
        return sum(int(stat.get(k, 0)) for k in ("slab", "kernel_stack", "percpu"))
    except (OSError, ValueError):
        return 0


def page_tables(pids) -> int:
    """Bytes of page tables of the largest address space among the processes `pids` (VmPTE, as a
    live thread sees it; the kernel escapes a process's name, so no line of it starts so)."""
    most = 0
    for pid in pids:
        for line in live_view(pid, "status", b"VmPTE:").splitlines():
            if line.startswith(b"VmPTE:"):
                most = max(most, int(line.split()[1]) * 1024)
    return most


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
        try:
            check()
        except Exception as err:  # noqa: BLE001 - ours: said, and the guard goes on
            print(f"warpk: the file-table guard failed once ({type(err).__name__}: {err}); it goes on",
                  file=sys.stderr, flush=True)


def check() -> None:
    """One look at the table: past the trigger, every sandbox over either floor (kernel memory,
    then files counted by pid; or whose count outlasts COUNT_BUDGET_S) is killed as soon as it is
    looked at."""
    global _warned
    use = files_in_use()
    if use is None or use[0] < use[1] * TRIGGER_SHARE:
        return
    with _changed:
        workers = [w for w in _watched if w.guard_verdict is None]
        dying = len(workers) < len(_watched)  # killed here, its files still being freed
    for worker in workers:
        pids = sandbox_pids(worker)
        kernel = kernel_bytes(worker, pids)  # first: no churn of processes hides from it
        if kernel > KERNEL_FLOOR_BYTES or files_held(pids, FLOOR_FILES, COUNT_BUDGET_S) > FLOOR_FILES:
            kill(worker, use, kernel)
            dying = True
    if not dying and not _warned:
        _warned = True
        print(f"warpk: the host's file table is {use[0]} of {use[1]} (fs.file-max) and no sandbox "
              f"of this run holds more than {FLOOR_FILES}: other processes are filling it; raise "
              f"fs.file-max (sysctl) if evaluations start failing with 'Too many open files in "
              f"system'", file=sys.stderr, flush=True)


def kill(worker, use: tuple[int, int], kernel: int = 0) -> None:
    """SIGKILL the sandbox, its reason first (the lane reads it once the worker is gone)."""
    worker.guard_verdict = (
        f"the candidate's sandbox held more than {FLOOR_FILES} open files (fds and file mappings; "
        f"or hid its mappings behind an exited main thread, or took over {COUNT_BUDGET_S:g} s to "
        f"count), or more than {KERNEL_FLOOR_BYTES} bytes of kernel memory besides page tables "
        f"(it held {kernel}), once the host's file table had reached "
        f"{use[0]} of {use[1]} (fs.file-max, past {TRIGGER_SHARE:.0%}), and was killed")
    try:
        if worker.proc.poll() is None:
            os.killpg(worker.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    worker.group.kill()
