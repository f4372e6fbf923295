"""Can a sandboxed template that has imported torch fork each candidate's worker into a sandbox of
its own, and how long does that take next to a fresh sandboxed interpreter? A feasibility probe for
issue #31 (the test suite and the CPU goals spend most of a short candidate's time on the next
worker's torch import: 0.77-0.94 s a candidate on the 2-core VM, 2026-12-07); nothing here is
used by the evaluator.

    python benchmarks/probe_fork_sandbox.py [--forks 10] [--out FILE]

The template runs in bwrap as the evaluator's workers do (`sandbox.bwrap_command`, no build dir,
no GPU) but keeps CAP_SYS_ADMIN and CAP_SETPCAP (to empty the forks' bounding sets) inside the
sandbox's user namespace, gets no seccomp filter, and
runs without `--disable-userns` (that option nests a user namespace, which locks bwrap's covers of
/proc, and then no fork can have a /proc of its own: measured, see `template_command`). It imports
torch, then for each fork: the child closes every fd but its report pipe, unshares mount, IPC,
network, UTS and PID namespaces, mounts a fresh tmpfs on /tmp and works in a folder on it, forks
once more to be PID 1 of the new namespace, unmounts bwrap's covers of /proc, mounts its own /proc
and binds its host knobs read-only again (/proc/sys, sysrq-trigger, pressure, irq, bus: red team
round 68), drops every capability
(bounding set, effective, permitted, inheritable, ambient), sets no_new_privs and loads the
evaluator's seccomp filter and one that refuses new user namespaces (`no_user_namespaces`, in
place of `--disable-userns`), then checks what it can see and do and runs a torch op. Each fork
reports the seconds from fork to that report (the template's monotonic clock) and the checks:

    procs     the PIDs its /proc lists (only itself: it sees neither the template nor siblings)
    tmp       what its /tmp holds (its working dir only, though the template and earlier forks wrote)
    cwd       what its working dir holds (nothing: its own, not the template's)
    sysctl    opening kernel.core_pattern for writing (EROFS: the host's knobs bound read-only)
    bounding  its bounding set of capabilities (empty)
    unshare   unshare(CLONE_NEWNS) after the drop (EPERM: no namespace of its own any more)
    mount     mounting a tmpfs after the drop (EPERM)
    userns    unshare(CLONE_NEWUSER) (EPERM: the stacked filter)
    keyctl    a keyring call (EPERM: the evaluator's filter is loaded)
    torch     torch.ones(4).sum() (4.0)

and, as the baseline, a fresh `sandbox.UntrustedProcess` to its Ready (torch imported) as the
evaluator starts one today. Prints one line per fork and the medians; --out writes them as JSON.
Exit 1 where a check fails, 2 where the sandbox cannot be made here (the reason on one line).

Non-goals: no cgroup per fork, no freezer, no GPU, no candidate code: a probe, not the design.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from warpk.evaluator.sandbox import SANDBOX_HOME, Limits, UntrustedProcess, bwrap_command, worker_env  # noqa: E402
from warpk.evaluator.seccomp import seccomp_program  # noqa: E402

# What runs inside the template's sandbox: argv[1] the fork count, argv[2] the filter's hex.
TEMPLATE = r'''
import ctypes, errno, json, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
NEWNS, NEWUTS, NEWIPC, NEWPID, NEWNET = 0x20000, 0x4000000, 0x8000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 0x20, 0x1000
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAP_AMBIENT = 1, 24, 38, 22, 47

def check(rc, what):
    if rc != 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")

def drop_and_filter(programs):
    for cap in range(64):  # needs CAP_SETPCAP (kept for this); past the last cap: EINVAL
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break
            check(-1, f"drop capability {cap} from the bounding set")
    check(libc.prctl(PR_CAP_AMBIENT, 4, 0, 0, 0), "clear ambient")  # PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    check(libc.syscall(126, header, data), "capset")  # x86_64
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
    for program in programs:
        check(libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(Prog(len(program) // 8, program)), 0, 0), "seccomp")

def opens_for_writing(path):
    try:
        os.close(os.open(path, os.O_WRONLY))
        return "ok"
    except OSError as err:
        return errno.errorcode.get(err.errno, str(err.errno))

def errno_of(call):
    rc = call()
    return "ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

def own_proc():
    """bwrap covers parts of its /proc (sys, sysrq-trigger, ...): a proc with covered parts is not
    fully visible, and the kernel mounts no new proc where none is; those covers go first (in this
    mount namespace only), then the new proc goes on top and the old is detached."""
    covers = [line.split()[4] for line in open("/proc/self/mountinfo")]
    for target in sorted((t for t in covers if t.startswith("/proc/")), key=len, reverse=True):
        check(libc.umount2(target.encode(), 2), f"umount {target}")  # MNT_DETACH
    check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
    for knob in (b"/proc/sys", b"/proc/sysrq-trigger", b"/proc/pressure", b"/proc/irq", b"/proc/bus"):
        if os.path.exists(knob):  # the host's knobs read-only again (red team round 68: core_pattern)
            check(libc.mount(knob, knob, None, MS_BIND, None), f"bind {knob}")
            check(libc.mount(None, knob, None, MS_BIND | MS_REMOUNT | MS_RDONLY, None), f"read-only {knob}")

def worker(report, program, start):
    own_proc()
    check(libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0), "pdeathsig")
    drop_and_filter(program)
    import torch
    seen = dict(
        procs=sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        tmp=sorted(os.listdir("/tmp")),
        unshare=errno_of(lambda: libc.unshare(NEWNS)),
        mount=errno_of(lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
        userns=errno_of(lambda: libc.unshare(0x10000000)),
        sysctl=opens_for_writing("/proc/sys/kernel/core_pattern"),
        bounding=[line.split()[1] for line in open("/proc/self/status") if line.startswith("CapBnd")][0],
        cwd=sorted(os.listdir(".")),
        keyctl=errno_of(lambda: libc.syscall(250, 0, 0, 0, 0, 0)),
        torch=float(torch.ones(4).sum()),
    )
    open(f"/tmp/left-by-{os.getpid()}", "w").close()  # what the next fork must not see
    os.write(report, (json.dumps({"ready_s": time.monotonic() - start, **seen}) + "\n").encode())

def fork_one(program):
    read, write = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.closerange(3, write)
            os.closerange(write + 1, 1 << 16)
            check(libc.unshare(NEWNS | NEWUTS | NEWIPC | NEWNET | NEWPID), "unshare")
            check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
            check(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64m"), "tmpfs /tmp")
            os.makedirs(os.environ["HOME"])  # its working dir on its own tmpfs, not the template's
            os.chdir(os.environ["HOME"])  # (round 68: a module planted there, the template imported)
            inner = os.fork()  # PID 1 of the new namespace
            if inner == 0:
                try:
                    worker(write, program, start)
                    os._exit(0)
                except BaseException as err:
                    os.write(write, (json.dumps({"error": f"{type(err).__name__}: {err}"}) + "\n").encode())
                    os._exit(1)
            code = os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1])
        except BaseException as err:
            os.write(write, (json.dumps({"error": f"{type(err).__name__}: {err}"}) + "\n").encode())
        os._exit(code)
    os.close(write)
    line = os.read(read, 1 << 16)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(line) if line else {"error": "no report"}

start = time.monotonic()
import torch
import_s = time.monotonic() - start
open("/tmp/left-by-template", "w").close()
program = [bytes.fromhex(h) for h in sys.argv[2].split(",") if h]
print(json.dumps({"template_import_s": import_s}), flush=True)
for _ in range(int(sys.argv[1])):
    print(json.dumps(fork_one(program)), flush=True)
'''

EXPECTED = dict(procs=[1], tmp=["warpk-worker"], cwd=[], unshare="EPERM", mount="EPERM", userns="EPERM",
                sysctl="EROFS", bounding="0000000000000000", keyctl="EPERM", torch=4.0)


def template_command() -> list[str]:
    """bwrap as the evaluator runs it, with CAP_SYS_ADMIN kept and without --disable-userns: that
    option makes bwrap nest a user namespace, which locks its covers of /proc (sys, irq, ...), so
    no fork could unmount them, and the kernel mounts no new proc where no proc is fully visible
    (EINVAL and EPERM, measured). The forks refuse new user namespaces with a filter instead."""
    # the userns mode it was measured in (session 39): not the drop to nobody (identity.py)
    cmd = [c for c in bwrap_command(None, None, drop=False)[:-1] if c != "--disable-userns"]  # no "--"
    return [*cmd, "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP", "--"]


def no_user_namespaces() -> bytes:
    """A filter stacked on the evaluator's: clone and unshare with CLONE_NEWUSER fail with EPERM
    (what --disable-userns did; clone3 already fails with ENOSYS under the evaluator's filter)."""
    clone, unshare = 56, 272  # x86_64
    code = [(0x20, 0, 0, 0),  # load the call's number
            (0x15, 2, 0, unshare), (0x15, 1, 0, clone),
            (0x06, 0, 0, 0x7FFF0000),  # allow
            (0x20, 0, 0, 16),  # load args[0]'s low half: the flags
            (0x45, 0, 1, 0x10000000),  # CLONE_NEWUSER set?
            (0x06, 0, 0, 0x00050001),  # EPERM
            (0x06, 0, 0, 0x7FFF0000)]
    return b"".join(struct.pack("<HBBI", *op) for op in code)


def fresh_worker_s() -> float:
    """A fresh sandboxed worker to its Ready, as the lane starts its next worker today."""
    from warpk.evaluator import protocol as wire
    from warpk.evaluator.lane import READY_ENV

    start = time.monotonic()
    worker = UntrustedProcess("bwrap", None, Limits(2.0, 1, address_space_limit=True),
                              {READY_ENV: "1", "CUDA_VISIBLE_DEVICES": ""})
    try:
        wire.recv(worker.sock, (wire.Ready,), 120)
        return time.monotonic() - start
    finally:
        worker.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forks", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if shutil.which("bwrap") is None or os.uname().machine != "x86_64":
        print("probe_fork_sandbox: needs bwrap on x86_64 (the capset call number is x86_64's)")
        return 2
    filters = ",".join(f.hex() for f in (seccomp_program() or b"", no_user_namespaces()))
    done = subprocess.run(template_command() + [sys.executable, "-c", TEMPLATE, str(args.forks), filters],
                          env=worker_env(SANDBOX_HOME, 1, {"CUDA_VISIBLE_DEVICES": ""}), capture_output=True,
                          text=True, timeout=600)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        print(f"probe_fork_sandbox: the template failed (rc {done.returncode}): {done.stderr.strip()[-400:]}")
        return 2
    forks = lines[1:]
    fresh = [fresh_worker_s() for _ in range(min(5, args.forks))]
    failed = 0
    for i, fork in enumerate(forks):
        wrong = {k: fork.get(k) for k, v in EXPECTED.items() if fork.get(k) != v}
        failed += bool(wrong) or "error" in fork
        said = f"  WRONG {wrong}" if wrong else "  checks as expected"
        print(f"fork {i}: {fork.get('ready_s', float('nan')):.3f} s{said}  {fork.get('error', '')}".rstrip())
    ready = [f["ready_s"] for f in forks if "ready_s" in f]
    if not ready:
        return 1
    print(f"template's torch import {lines[0]['template_import_s']:.3f} s; fork to ready: median "
          f"{statistics.median(ready):.3f} s ({min(ready):.3f}-{max(ready):.3f}, {len(ready)} forks); "
          f"a fresh sandboxed worker to Ready: median {statistics.median(fresh):.3f} s ({len(fresh)} starts)")
    if args.out:
        found = {"template": lines[0], "forks": forks, "fresh_worker_s": fresh}
        args.out.write_text(json.dumps(found, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
