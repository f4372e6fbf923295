"""The sandbox's seccomp filter (`bwrap --seccomp`): the kernel keyring's and System V / POSIX
message-queue IPC's calls fail with EPERM, and the others named below.

The kernel keyring is no namespace: sandboxes alive at once (a compile worker and a timed lane
worker of different sources; two lanes) could read and write each other's keys and pass a timed
call's work through them, 1.60x for a copy of the reference (red team round 7, 2026-12-05). The
filter makes add_key, request_key and keyctl fail with EPERM, as Docker's default profile does,
and every call of another ABI (i386 through int 0x80, x32) too. SysV shared memory, semaphores
and message queues and POSIX message queues live in the sandbox's IPC namespace, in no process's
memory, and the kernel frees them from a worker thread on the lane's core after the sandbox is
gone (red team round 29: 2 GiB of SysV memory slowed that core 2x for 1.5 s after the kill, and
3.3M empty messages held it for 0.5 s without preemption); torch, CUDA and Triton use none of
them, so shmget, semget, msgget and mq_open fail with EPERM. io_uring too (io_uring_setup, _enter,
_register): a multishot timeout re-arms itself in the kernel and wakes a frozen sandbox at every
expiry, so its work ran on the lane's core for the whole time the reference was timed (red team
round 37: a busy loop beside it 2x slower); torch, CUDA and Triton do not use it, and Docker's
default profile denies it too. And setsockopt(SOL_SOCKET, SO_LINGER): a TCP socket that lingers
with unsent data blocks its last close until its peer goes, for ever where the peer is queued
beside it; sent to the trusted side, inside another socket, or after a worker's last frame, it
held a trusted thread for ever, the lane until its backstop, or the parent's compile pool, and
so the whole run, for ever (red team rounds 38-39). Without it a close never waits. And io_setup:
a pending AIO poll keeps its file open after the fd is closed, in no fd table or mapping the
file-table guard counts (warpk.evaluator.filetable; red team round 44: 2,000 files for 2,000
requests, bounded by the host's fs.aio-max-nr, itself a host-wide limit); nothing we run uses
Linux AIO (glibc's aio_* use threads). And sharing memory or an fd table with a process or thread
that can outlive its holder's look: clone with CLONE_VM or CLONE_FILES is refused unless it makes a
thread that shares the fd table too (pthreads) or a vfork child (posix_spawn and subprocess need
it), unshare(CLONE_FILES) is refused, and clone3, whose flags a filter cannot read, fails with
ENOSYS so glibc falls back to clone (as in Docker's default profile): chains of processes sharing
one address space, or of threads sharing a private fd table, each living microseconds, held files
that no look at /proc could see (red team round 46). A vfork child can still kill its waiting
parent and vfork again, a chain in one address space (round 47): that one the guard's look at the
sandbox's kernel memory ends, not this filter. And fcntl(F_SETLEASE): a lease needs only the file's
uid, which the sandbox shares with the host's root where the evaluator runs as root; a write lease
on a host file the sandbox sees read-only (ld.so.cache, torch's own files) made every open of it
on the host wait fs.lease-break-time, 45 s (red team round 69). And inotify_init, inotify_init1 and
fanotify_init: their instances are counted per uid host-wide (128 each), so a root sandbox took
all of root's, and the host's root processes and the sandboxes beside it got EMFILE; their watches
also saw the host open files in the folders it reads (round 70). And clone or unshare with
CLONE_NEWUSER: a sandbox dropped to nobody (warpk.evaluator.identity) has no user namespace of
bwrap's to forbid new ones; in its own it would hold every capability over the namespaces it
makes there. And memfd_secret: each page it hands out is taken out of the kernel's direct map of
all RAM, splitting a 1 GiB or 2 MiB mapping that is never merged back (red team round 73: 28 MiB of
it left 11 GiB of the host's RAM on smaller pages until a reboot). And, in a sandbox without a GPU,
sockets of any domain but AF_UNIX (EAFNOSUPPORT): the kernel's TCP and UDP memory is one pool for
every network namespace, and loopback pairs never read took all of it, so the host's own
connections were reset (round 73); replies a netlink socket never reads are host memory no memory
group counts (round 74: 1.28 GiB from 50 sockets). A GPU lane's filter keeps every family until
CUDA is tried under the strict one (the threat model). And setting extended attributes (EOPNOTSUPP,
as a filesystem without them says): a default POSIX ACL on a tmpfs folder is copied into kernel
memory no group counts for every file made there (round 75: 1.6 GiB over a 1.5 GiB memory.max).
Every other call is allowed.

Non-goals: no other syscall policy (the threat model in warpk.evaluator.sandbox says what is open).
"""

from __future__ import annotations

import os
import struct

# Per machine: (AUDIT_ARCH, (add_key, request_key, keyctl)).
KEYRING_CALLS = {"x86_64": (0xC000003E, (248, 249, 250)), "aarch64": (0xC00000B7, (217, 218, 219))}
# Per machine: (shmget, semget, msgget, mq_open).
IPC_CALLS = {"x86_64": (29, 64, 68, 240), "aarch64": (194, 190, 186, 180)}
# io_uring_setup, io_uring_enter, io_uring_register: numbered alike on every machine (Linux 5.1)
URING_CALLS = (425, 426, 427)
# io_setup per machine: no AIO context, no request
AIO_CALLS = {"x86_64": (206,), "aarch64": (0,)}
# inotify_init(1) and fanotify_init per machine: their instances count against the uid's host-wide
# limit (128 each), which a root sandbox shares with the host's root (red team round 70)
NOTIFY_CALLS = {"x86_64": (253, 294, 300), "aarch64": (26, 262)}
# memfd_secret, alike on both machines (Linux 5.14): each page it hands out splits the kernel's
# direct map of all RAM for good (red team round 73: DirectMap1G 24 -> 13 GiB from 28 MiB of it)
SECRET_CALLS = (447,)
# setxattr, lsetxattr, fsetxattr and setxattrat per machine, all failing with EOPNOTSUPP (a filter
# cannot read the name): tmpfs keeps a file's POSIX ACL in kernel memory no group is charged for,
# and a folder's default ACL of 8,191 entries gave each file made in it a 128 KiB copy (red team
# round 75: 1.6 GiB of slab over a 1.5 GiB memory.max, never stopped)
XATTR_CALLS = {"x86_64": (188, 189, 190, 463), "aarch64": (5, 6, 7, 463)}
# socket per machine; in a sandbox without a GPU (`local_only`) only AF_UNIX sockets are made: the
# kernel's TCP and UDP memory is one pool for every network namespace, and 600 loopback pairs never
# read took all of it, so the host's own connections were reset (round 73); netlink's replies queue
# in memory no group counts (round 74: 50 route sockets, 1.28 GiB of the host's; its group 6 MiB),
# and its uevents bring the host's device events
SOCKET = {"x86_64": 41, "aarch64": 198}
_AF_UNIX = 1
# clone and unshare per machine; clone3 alike everywhere (Linux 5.3), its flags out of reach
CLONE_CALLS = {"x86_64": (56, 272), "aarch64": (220, 97)}
_CLONE3 = 435
_CLONE_VM, _CLONE_FILES, _CLONE_VFORK, _CLONE_THREAD = 0x100, 0x400, 0x4000, 0x10000
_CLONE_NEWUSER = 0x10000000  # refused in clone and unshare: a sandbox dropped to nobody has no
# user namespace of bwrap's whose --disable-userns would (warpk.evaluator.identity)
# fcntl per machine, refused for F_SETLEASE only (1024): a lease needs only the file's uid, and the
# sandbox's uid 0 is the host's where the evaluator runs as root (red team round 69)
FCNTL = {"x86_64": 72, "aarch64": 25}
_F_SETLEASE = 1024
# setsockopt per machine, refused for SOL_SOCKET/SO_LINGER only (1 and 13 on both machines)
SETSOCKOPT = {"x86_64": 54, "aarch64": 208}
_SOL_SOCKET, _SO_LINGER = 1, 13
_BPF_LD_ABS, _BPF_JEQ, _BPF_JGE, _BPF_JSET, _BPF_RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_EPERM, _RET_ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
_RET_EAFNOSUPPORT, _RET_EOPNOTSUPP = 0x00050000 | 97, 0x00050000 | 95
_OTHER_ABI = 0x40000000  # x32 syscall numbers; none of this machine's own is this high


def seccomp_program(machine: str | None = None, local_only: bool = True) -> bytes | None:
    """The classic-BPF filter `bwrap --seccomp` loads, or None on a machine not in KEYRING_CALLS
    (said in the threat model: the keyring and IPC stay open there). `local_only`: AF_UNIX
    sockets only (a GPU lane's sandbox keeps the others until CUDA is tried under it: the threat
    model)."""
    machine = machine or os.uname().machine
    found = KEYRING_CALLS.get(machine)
    if found is None:
        return None
    arch, keyring = found
    calls = (keyring + IPC_CALLS[machine] + URING_CALLS + AIO_CALLS[machine] + NOTIFY_CALLS[machine]
             + SECRET_CALLS)
    # (op, jump if true, jump if false, k), jumps as labels resolved below
    program = [(_BPF_LD_ABS, 0, 0, 4),  # seccomp_data.arch
               (_BPF_JEQ, 0, "deny", arch),
               (_BPF_LD_ABS, 0, 0, 0),  # seccomp_data.nr
               (_BPF_JGE, "deny", 0, _OTHER_ABI)]
    program += [(_BPF_JEQ, "deny", 0, nr) for nr in calls]
    program += [(_BPF_JEQ, "noxattr", 0, nr) for nr in XATTR_CALLS[machine]]
    clone, unshare = CLONE_CALLS[machine]
    program += [(_BPF_JEQ, "nosys", 0, _CLONE3),
                (_BPF_JEQ, 0, "clone", unshare),
                (_BPF_LD_ABS, 0, 0, 16),  # args[0], the flags (the low half)
                (_BPF_JSET, "deny", "allow", _CLONE_FILES | _CLONE_NEWUSER),
                "clone",
                (_BPF_JEQ, 0, "setsockopt", clone),
                (_BPF_LD_ABS, 0, 0, 16),  # args[0], the flags
                (_BPF_JSET, "deny", 0, _CLONE_NEWUSER),
                (_BPF_JSET, 0, "process", _CLONE_THREAD),
                (_BPF_JSET, "allow", "deny", _CLONE_FILES),  # a thread shares the fd table
                "process",
                (_BPF_JSET, "allow", 0, _CLONE_VFORK),  # its parent waits, holding what it shares
                (_BPF_JSET, "deny", "allow", _CLONE_VM | _CLONE_FILES),
                "setsockopt",
                (_BPF_JEQ, 0, "fcntl", SETSOCKOPT[machine]),
                (_BPF_LD_ABS, 0, 0, 24),  # args[1], the level (an int: the low half)
                (_BPF_JEQ, 0, "allow", _SOL_SOCKET),
                (_BPF_LD_ABS, 0, 0, 32),  # args[2], the option
                (_BPF_JEQ, "deny", "allow", _SO_LINGER),
                "fcntl",
                (_BPF_JEQ, 0, "socket", FCNTL[machine]),
                (_BPF_LD_ABS, 0, 0, 24),  # args[1], the command
                (_BPF_JEQ, "deny", "allow", _F_SETLEASE),
                "socket"]
    if local_only:
        program += [(_BPF_JEQ, 0, "allow", SOCKET[machine]),
                    (_BPF_LD_ABS, 0, 0, 16),  # args[0], the domain
                    (_BPF_JEQ, "allow", "nofamily", _AF_UNIX)]
    program += ["allow", (_BPF_RET, 0, 0, _RET_ALLOW),
                "deny", (_BPF_RET, 0, 0, _RET_EPERM),
                "nosys", (_BPF_RET, 0, 0, _RET_ENOSYS),
                "nofamily", (_BPF_RET, 0, 0, _RET_EAFNOSUPPORT),
                "noxattr", (_BPF_RET, 0, 0, _RET_EOPNOTSUPP)]
    labels, code = {}, []
    for step in program:  # a string names the instruction after it
        if isinstance(step, str):
            labels[step] = len(code)
        else:
            code.append(step)

    def offset(at: int, to) -> int:
        return labels[to] - at - 1 if isinstance(to, str) else to

    return b"".join(struct.pack("<HBBI", op, offset(i, jt), offset(i, jf), k)
                    for i, (op, jt, jf, k) in enumerate(code))


def seccomp_fd(local_only: bool = True) -> int | None:
    """A fresh fd holding the filter, read from its start by one bwrap (the caller passes it
    and closes it after the spawn), or None where there is no filter for this machine."""
    program = seccomp_program(local_only=local_only)
    if program is None:
        return None
    fd = os.memfd_create("warpk-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
