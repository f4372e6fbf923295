"""Reading a worker's outputs straight out of its memory (CPU lanes, evaluator v3).

A round trip that the worker's own code carries can be made cheaper by a candidate that rewrites
that code (corpus 51: zero-copy inputs and outputs computed straight into the send buffer made a
plain copy of the reference 1.3-1.8x "faster" than the reference worker's honest harness). So on
the CPU the worker copies nothing: it computes on its inputs where they lie (a shared memfd) and
answers with where its outputs are in its own memory; the trusted worker, with the answering
process frozen, copies them out with process_vm_readv(2). Both sides' delivery is then done by the
same trusted code, and nothing of it can be skipped.

Where outputs travel in a memfd or a CUDA VMM fd (GPU lanes), the worker names that fd's number
and the trusted side takes a copy of it with pidfd_getfd(2) (`take_fd`), through a pidfd opened
while the worker was still our idle harness: no sandboxed process passes an fd over a socket.
Linux counts fds in flight over Unix sockets per user and refuses a sender past its own
RLIMIT_NOFILE (ETOOMANYREFS); every sandbox runs as the evaluator's user, so a candidate that
parked 1100 fds in a socketpair of its own made every other sandbox's fd-passing send fail: the
reference worker's answer on a GPU lane (a harness failure: the run stopped) and other lanes'
candidates' answers (red team round 37, corpus 60). The trusted side's own sends run with its
hard open-file limit (`raise_open_files`), far above what a candidate can put in flight.

Non-goals: no GPU memory itself (warpk.evaluator.cudashare).
"""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import select
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from warpk.evaluator.errors import HarnessError
from warpk.evaluator.fds import dispose
from warpk.evaluator.protocol import ProtocolError
from warpk.evaluator.resources import FILES_PER_PROCESS
from warpk.evaluator.touched import untouched_page

IOV_MAX = 1024
WORKER_MODULE = b"warpk.evaluator.untrusted"


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


# not ctypes.util.find_library: it forks `ldconfig -p` in every worker at import, and that child
# carries the worker's command line until its exec (`worker_pid`)
_libc = ctypes.CDLL(None, use_errno=True)
_readv = _libc.process_vm_readv
_readv.restype = ctypes.c_ssize_t
_readv.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.POINTER(_IoVec),
                   ctypes.c_ulong, ctypes.c_ulong]
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
PIDFD_GETFD = 438  # the same number on x86_64 and aarch64 (Linux 5.6)
FD_NUMBER_LIMIT = 1 << 20  # no fd number of a worker's (RLIMIT_NOFILE 1024) is near this


def take_fd(pidfd: int | None, number: int) -> int:
    """A copy here of fd `number` of the process behind `pidfd` (pidfd_getfd: the same open file,
    close-on-exec), or ProtocolError. What it is the caller checks (a sealed memfd, a CUDA handle)."""
    if pidfd is None:
        raise ProtocolError("the worker named an fd, but its process is not known here")
    if not 0 <= number < FD_NUMBER_LIMIT:
        raise ProtocolError(f"the worker named fd {number}")
    fd = _syscall(ctypes.c_long(PIDFD_GETFD), ctypes.c_long(pidfd), ctypes.c_long(number), ctypes.c_long(0))
    if fd < 0:
        err = ctypes.get_errno()
        raise ProtocolError(f"the worker's fd {number} cannot be taken (pidfd_getfd: {os.strerror(err)})")
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):  # a memfd, or a CUDA export (the driver's)
        dispose([fd])  # a lingering socket's close blocks while its peer lives (round 38)
        raise ProtocolError(f"the worker's fd {number} is neither a memfd nor a device handle")
    return fd


def open_pidfd(pid: int | None) -> int | None:
    """A pidfd of the worker `pid` (None if there is none, or it is gone): it names that process
    for as long as it is open, whatever the number is reused for later. HarnessError where this
    machine has no pidfds (Linux before 5.3)."""
    if pid is None:
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    except OSError as err:
        raise HarnessError(f"pidfd_open of a worker failed ({err}): the evaluator needs Linux 5.6 or "
                           "later (pidfd_open, pidfd_getfd)") from err


def read_into(pid: int, address: int, nbytes: int, into_address: int) -> None:
    """Copy `nbytes` at `address` in process `pid` to `into_address` here (ProtocolError if the
    worker's memory does not hold them, or holds them on pages it never touched: touched.py)."""
    try:
        page = untouched_page(pid, address, nbytes)
    except OSError as err:
        raise ProtocolError(f"the worker's outputs cannot be checked at {address:#x}: {err}") from err
    if page is not None:
        raise ProtocolError(f"the worker's outputs lie on a page it never touched ({page:#x}), where "
                            "our read would make its page tables")
    done = 0
    while done < nbytes:
        chunk = min(nbytes - done, 1 << 30)
        local = (_IoVec * 1)(_IoVec(into_address + done, chunk))
        remote = (_IoVec * 1)(_IoVec(address + done, chunk))
        got = _readv(pid, local, 1, remote, 1, 0)
        if got <= 0:
            err = ctypes.get_errno()
            raise ProtocolError(f"the worker's outputs cannot be read at {address:#x} (+{nbytes} bytes): "
                                f"{os.strerror(err) if got < 0 else 'nothing read'}")
        done += got


def wait_worker_pid(root: int, timeout_s: float = 60.0) -> int | None:
    """`worker_pid`, waiting for the sandbox to start the interpreter (None if it never does)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid = worker_pid(root)
        if pid is not None or time.monotonic() > deadline:
            return pid
        time.sleep(0.01)


def worker_pid(root: int) -> int | None:
    """The host pid of the harness process under `root` (the sandbox's first process, or the
    worker itself), found while it is still our harness: the process whose command line is
    `python -m warpk.evaluator.untrusted` (bwrap's own processes carry it after their options)
    and whose parent's is not (a child it forks carries the same line until its exec: taking
    that child, gone a moment later, made honest workers `crashed` with "No such process" on a
    busy core, 2026-12-07)."""
    from warpk.evaluator.freeze import process_tree

    found = set()
    for pid in process_tree(root):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.split(b"\0")[1:3] == [b"-m", WORKER_MODULE]:  # the interpreter, not bwrap's line
            found.add(pid)
    harness = [pid for pid in found if _parent(pid) not in found]
    return harness[0] if len(harness) == 1 else None


def _parent(pid: int) -> int | None:
    from warpk.evaluator.freeze import stat_fields

    fields = stat_fields(pid)
    return int(fields[1]) if fields and len(fields) > 1 else None


# The worker lets us (a sibling, not its parent) read its memory and take its fds as the first
# thing it does after its imports (untrusted.allow_the_trusted_reader), 0.15-0.22 s after its
# command line appears (where its pid is found): until then Yama's ptrace_scope 1 refuses a
# non-root trusted side. It is still our idle harness meanwhile, so the checks wait for it.
PTRACER_WAIT_S = 10.0


def _until_allowed(attempt: Callable[[], None], what: str, gone: Callable[[], bool],
                   clock=time.monotonic) -> None:
    """`attempt` until it works; a worker that is `gone` meanwhile ends the check without a
    verdict: its Load fails, and the lane decides (a harness killed with others at the memory
    budget for all sandboxes is measured again), not the run (2026-12-07: an idle harness gone
    before its check stopped a run as the harness's own failure)."""
    deadline = clock() + PTRACER_WAIT_S
    while True:
        try:
            return attempt()
        except (OSError, ValueError, ProtocolError) as err:
            if gone():
                return
            if clock() > deadline:
                raise HarnessError(f"the trusted worker cannot {what} ({err}); allow it "
                                   "(kernel.yama.ptrace_scope 0 or 1, or root with CAP_SYS_PTRACE; "
                                   "in a container, CAP_SYS_PTRACE)") from err
            time.sleep(0.02)


def check_readable(pid: int) -> None:
    """The trusted side can read the worker's memory (HarnessError, with what to do, if not):
    checked before the candidate loads, so a machine that refuses it (Yama ptrace_scope, no
    CAP_SYS_PTRACE) stops the run instead of scoring every candidate `crashed`."""
    def attempt() -> None:
        first = Path(f"/proc/{pid}/maps").read_text().split("-", 1)[0]
        probe = ctypes.create_string_buffer(1)
        read_into(pid, int(first, 16), 1, ctypes.addressof(probe))

    _until_allowed(attempt, "read the worker's memory (process_vm_readv)", lambda: _exited(pid))


def _exited(pid: int) -> bool:
    """The process has exited (gone, or a zombie: its maps read empty)."""
    from warpk.evaluator.freeze import process_state

    return process_state(pid) in (None, "Z", "X")


def check_takeable(pidfd: int | None) -> None:
    """The trusted side can take the worker's fds (its stdin; HarnessError, with what to do, if
    not), as `check_readable` on the CPU; Linux 5.6 or later."""
    if pidfd is None:  # gone already (killed with others at the budget?): its Load fails, not the run
        return
    exited = lambda: bool(select.select([pidfd], [], [], 0)[0])  # noqa: E731 - a pidfd reads once it exits
    _until_allowed(lambda: os.close(take_fd(pidfd, 0)), "take the worker's output fds (pidfd_getfd, "
                   "Linux 5.6 or later)", exited)


# The trusted side still passes fds (inputs to the workers, requests to the trusted worker):
# without CAP_SYS_RESOURCE (not root) its sends are refused while the user's fds in flight exceed
# its own RLIMIT_NOFILE. A candidate (FILES_PER_PROCESS) may send while they are at or below its
# limit, up to 253 fds a message, so it stops a little above: 1265 with 64 threads racing on 2
# cores (2026-12-06). Four times its limit leaves room for a dozen messages racing.
SENDER_FILES_MIN = 4 * FILES_PER_PROCESS
_CAP_SYS_ADMIN, _CAP_SYS_RESOURCE = 21, 24


def raise_open_files() -> int:
    """This process's soft RLIMIT_NOFILE raised to its hard limit (inherited by the trusted
    worker) unless the kernel never refuses its fd passing (`exempt_from_fd_limits`: a higher
    soft limit would only let fd numbers pass select()'s 1024); the soft limit it has then."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if exempt_from_fd_limits():
        return soft
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def exempt_from_fd_limits() -> bool:
    """Whether this process has CAP_SYS_RESOURCE or CAP_SYS_ADMIN (root, usually): the kernel
    then never refuses its fd passing."""
    try:
        status = Path("/proc/self/status").read_text()
        caps = next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff:"))
        effective = int(caps, 16)
    except (OSError, StopIteration, ValueError):
        return False
    return bool(effective >> _CAP_SYS_RESOURCE & 1 or effective >> _CAP_SYS_ADMIN & 1)


def fd_passing_line(files: int) -> str | None:
    """One line for the user where a candidate could make the trusted side's fd passing fail
    (a harness failure that stops the run), else None."""
    if files >= SENDER_FILES_MIN or exempt_from_fd_limits():
        return None
    return (f"evaluate: open files are limited to {files} here (ulimit -Hn), under {SENDER_FILES_MIN}: a "
            "candidate that holds fds in flight over Unix sockets can make the evaluator's own fd "
            "passing fail and stop the run; raise the hard limit (limits.conf, or SLURM's "
            "PropagateResourceLimits)")


@functools.cache
def say_fd_passing(files: int) -> None:
    """Once per process, on stderr: the line `fd_passing_line` gives, if any."""
    line = fd_passing_line(files)
    if line is not None:
        print(line, file=sys.stderr, flush=True)
