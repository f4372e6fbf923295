"""What a sandbox's first process does before exec (`preexec_fn` of warpk.evaluator.sandbox's
UntrustedProcess): into its cgroups, its OOM score, its rlimits, and death with the thread that
started it.

Non-goals: no namespaces (bwrap's), no seccomp (warpk.evaluator.seccomp).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal

from warpk.evaluator.resources import FILE_SIZE_LIMIT_BYTES, FILES_PER_PROCESS, ResourceGroup

# Which sandbox the kernel's OOM killer takes when all of them together reach their budget
# (hostmem.sandbox_budget_bytes): memory in unmapped memfds or tmpfs counts in no process's
# badness, so candidates and builds are marked first, the task's reference worker next (red team
# round 13); the trusted worker and the parent are outside the budget's group. A candidate can
# write its own score back down (Linux 6.18 allows it unprivileged, measured): an ordering, not
# a limit.
OOM_SCORE_ADJ = {"candidate": 1000, "reference": 500}
SIGNALS_PENDING = 1024  # RLIMIT_SIGPENDING of a sandbox (the host's root: ~96k)


def enter_limits(group: ResourceGroup, address_space_bytes: int = 0, oom_score_adj: int = 1000) -> None:
    """Runs in a sandbox's first process before exec (inherited by bwrap's children): into its
    cgroups, so all it spawns is born inside, then its OOM score adjustment and its rlimits
    (`address_space_bytes` 0: none)."""
    group.join()
    try:  # an ordering for accidents, not a limit: where /proc refuses it, the sandbox still runs
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write(str(oom_score_adj))
    except OSError:
        pass
    resource.setrlimit(resource.RLIMIT_NICE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (86400, 86400))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT_BYTES, FILE_SIZE_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILES_PER_PROCESS, FILES_PER_PROCESS))
    # queued signals (and POSIX timers) count against the uid's host-wide tally, checked against
    # the queueing task's limit: a root sandbox queued 96k and the host's root got EAGAIN from
    # timer_create (red team round 70); bwrap and the worker inherit it
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (SIGNALS_PENDING, SIGNALS_PENDING))
    lift_process_limit()
    if address_space_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))


def lift_process_limit() -> None:
    """Processes count against their uid's host-wide tally, checked against the forking task's
    RLIMIT_NPROC: sandboxes dropped to nobody share one tally, so none may stop another's start
    (red team round 71: a sandbox holding 250 made the next one's exec fail at a limit of 200).
    Unlimited where this process may raise it (CAP_SYS_RESOURCE), else its soft limit up to its
    hard one (round 72: a root without that capability, as in Docker's defaults); pids.max bounds
    each sandbox. Only a root evaluator's: another user's sandboxes are that user."""
    if os.geteuid() != 0:  # its sandboxes are its own uid: the admin's soft limit stands
        return
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))


def enter_preflight(host_root: bool) -> None:
    """The preflight sandbox's first process, before exec: as a worker's (`enter_sandbox`), less
    its cgroups and limits."""
    if host_root:
        private_mounts()
    lift_process_limit()


# resolved once: `CDLL(None)` in the child between fork and exec would hang it for good if another
# thread held the loader's lock at the fork (red team round 32, by reading)
_LIBC = ctypes.CDLL(None, use_errno=True)
_PRCTL, _UNSHARE, _MOUNT = _LIBC.prctl, _LIBC.unshare, _LIBC.mount
_MOUNT.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_CLONE_NEWNS, _MS_REC, _MS_PRIVATE = 0x20000, 0x4000, 1 << 18


def private_mounts() -> None:
    """A mount namespace of its own whose mounts receive nothing from the host's: bwrap makes its
    mounts slaves of the ones it copies, so a mount the host adds later under a read-only bind
    (systemd's automount of /proc/sys/fs/binfmt_misc) would appear in a live sandbox writable,
    and as the host's root it could register an interpreter for the host (review, session 39,
    reproduced with a stand-in mount). Only the host's root may; another user's sandbox cannot
    write there anyway."""
    if _UNSHARE(_CLONE_NEWNS) != 0 or _MOUNT(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "a private mount namespace for the sandbox")


def enter_sandbox(parent: int, group, address_space_bytes: int, oom_score_adj: int,
                  host_root: bool = False) -> None:
    """The worker's first process, before exec: its limits, and SIGKILL when the thread that
    started it ends (PR_SET_PDEATHSIG; bwrap's --die-with-parent does the same for the sandbox),
    so a worker frozen when its parent was killed does not stay frozen for ever (a `process`
    mode reference worker outlived its killed trusted worker, 2026-12-06); where the evaluator
    is the host's root, `private_mounts`."""
    if host_root:
        private_mounts()
    enter_limits(group, address_space_bytes, oom_score_adj)
    _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before the signal was asked for
        os._exit(1)
