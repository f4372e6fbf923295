"""Reading a worker's outputs straight out of its memory (CPU lanes, evaluator v3).

A round trip that the worker's own code carries can be made cheaper by a candidate that rewrites
that code (corpus 51: zero-copy inputs and outputs computed straight into the send buffer made a
plain copy of the reference 1.3-1.8x "faster" than the reference worker's honest harness). So on
the CPU the worker copies nothing: it computes on its inputs where they lie (a shared memfd) and
answers with where its outputs are in its own memory; the trusted worker, with the answering
process frozen, copies them out with process_vm_readv(2). Both sides' delivery is then done by the
same trusted code, and nothing of it can be skipped.

Non-goals: no GPU memory (device outputs travel as CUDA VMM fds, warpk.evaluator.cudashare).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from pathlib import Path

from warpk.evaluator.errors import HarnessError
from warpk.evaluator.protocol import ProtocolError

IOV_MAX = 1024
WORKER_MODULE = b"warpk.evaluator.untrusted"


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_readv = _libc.process_vm_readv
_readv.restype = ctypes.c_ssize_t
_readv.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.POINTER(_IoVec),
                   ctypes.c_ulong, ctypes.c_ulong]


def read_into(pid: int, address: int, nbytes: int, into_address: int) -> None:
    """Copy `nbytes` at `address` in process `pid` to `into_address` here (ProtocolError if the
    worker's memory does not hold them)."""
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
    `python -m warpk.evaluator.untrusted` (bwrap's own processes carry it after their options)."""
    from warpk.evaluator.freeze import process_tree

    found = []
    for pid in process_tree(root):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.split(b"\0")[1:3] == [b"-m", WORKER_MODULE]:  # the interpreter, not bwrap's line
            found.append(pid)
    return max(found) if found else None


def check_readable(pid: int) -> None:
    """The trusted side can read the worker's memory (HarnessError, with what to do, if not):
    checked before the candidate loads, so a machine that refuses it (Yama ptrace_scope, no
    CAP_SYS_PTRACE) stops the run instead of scoring every candidate `crashed`."""
    try:
        first = Path(f"/proc/{pid}/maps").read_text().split("-", 1)[0]
        probe = ctypes.create_string_buffer(1)
        read_into(pid, int(first, 16), 1, ctypes.addressof(probe))
    except (OSError, ValueError, ProtocolError) as err:
        why = (f"the trusted worker cannot read the worker's memory (process_vm_readv: {err}); allow it "
               "(kernel.yama.ptrace_scope=0, or root with CAP_SYS_PTRACE)")
        raise HarnessError(why) from err
