"""Who a bwrap sandbox is on the host: where the evaluator runs as root, not root.

bwrap run by root maps the sandbox's uid 0 to the host's, and whatever the kernel checks by uid
alone then went to the candidate: sysctls, leases, device nodes' modes, root-only files, root's
host-wide per-user budgets (inotify instances, queued signals, epoll watches, pipe pages: red team
rounds 68-70). So where the evaluator is root, bwrap sets the sandbox up as root without a user
namespace (it can mount what only root can reach, a Python under /root) and `setpriv` then runs
the worker as SANDBOX_UID:SANDBOX_GID, `nobody`, with no capabilities and no supplementary group
but a GPU lane's device nodes' (where those are not open to all). Its processes count against
nobody's per-user budgets, not root's; it owns nothing on the host but its build dir (made here
and given to it: `own_folder`), and every uid check fails for it as for any other user.
Without a user namespace bwrap cannot stop it making its own; the seccomp filter refuses
CLONE_NEWUSER instead (warpk.evaluator.seccomp).

Where the evaluator is not root, bwrap maps the sandbox to the evaluator's own uid, as before.
Where it is root but cannot drop (no `setpriv`; nobody not mapped in its user namespace; no
seccomp filter for the machine, whose CLONE_NEWUSER refusal replaces bwrap's --disable-userns: red
team round 71), the sandbox stays the host's root, said in one line at the preflight
(`undropped_reason`). Either way the host's root's sandboxes get their own copies of the host's
device nodes (warpk.evaluator.devnodes: nobody may still set a 0666 node's times to now) and a
private mount namespace (entry.private_mounts: nothing the host mounts later reaches them).

Non-goals: no uid per sandbox (sandboxes of one evaluator share nobody's per-user budgets: what
one candidate holds of them, the others lose while it lives: the threat model).
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
from pathlib import Path

from warpk.evaluator.hostside import remove_tree
from warpk.evaluator.seccomp import seccomp_program

SANDBOX_UID = SANDBOX_GID = 65534  # nobody / nogroup on Debian and Red Hat alike


def host_root() -> bool:
    """Whether this process's uid 0 is the host's (not root inside a user namespace of its own)."""
    if os.geteuid() != 0:
        return False
    try:
        first = Path("/proc/self/uid_map").read_text().split()
    except OSError:
        return True
    return first[:3] == ["0", "0", "4294967295"]


@functools.cache
def undropped_reason() -> str | None:
    """Why a root evaluator's sandboxes would stay the host's root, or None (dropped, or not root)."""
    if os.geteuid() != 0:
        return None
    if shutil.which("setpriv") is None:
        return "no `setpriv` (util-linux) on PATH"
    if seccomp_program() is None:  # its CLONE_NEWUSER refusal stands in for bwrap's --disable-userns
        return f"no seccomp filter for {os.uname().machine} to refuse it user namespaces"
    try:
        ranges = [line.split() for line in Path("/proc/self/uid_map").read_text().splitlines()]
    except OSError:
        return None  # no user namespaces at all: uid 65534 is the host's
    if not any(int(inside) <= SANDBOX_UID < int(inside) + int(count) for inside, _, count in ranges):
        return f"uid {SANDBOX_UID} is not mapped in this user namespace"
    return None


def drops() -> bool:
    """Whether sandboxes run as SANDBOX_UID (the evaluator is root and can drop to it)."""
    return os.geteuid() == 0 and undropped_reason() is None


def drop_command(device_nodes: list[str] | tuple = ()) -> list[str]:
    """The `setpriv` prefix bwrap runs the worker through: nobody, no capabilities, the groups of
    those character device nodes that others may not open but the group may (a cluster's `video`
    group; never root's group), no other group."""
    found = [os.stat(node) for node in device_nodes]
    groups = sorted({st.st_gid for st in found if stat.S_ISCHR(st.st_mode) and st.st_gid != 0
                     and st.st_mode & 0o006 != 0o006 and st.st_mode & 0o060 == 0o060})
    group_arg = f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups"
    return ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_GID}", group_arg,
            "--inh-caps=-all", "--bounding-set=-all", "--"]


def own_folder(folder: Path, sandbox: str) -> None:
    """Make a build dir for a sandbox of mode `sandbox` and, where that sandbox drops (bwrap, and
    `drops`), give it to SANDBOX_UID. One another owner wrote (an older run's root sandbox, or a
    `process` mode run's: nobody could not build in it) is removed first, without following links;
    a `process` mode worker (root) gets a folder of root's. Its parent is the host's and private
    (dispatch.folder_alone, held by the caller), so no candidate can have replaced the folder."""
    owner = (SANDBOX_UID, SANDBOX_GID) if sandbox == "bwrap" and drops() else (os.geteuid(), os.getegid())
    try:
        kept = folder.lstat()
    except FileNotFoundError:
        kept = None
    if kept is not None and (kept.st_uid, kept.st_gid) != owner:
        remove_tree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if owner != (os.geteuid(), os.getegid()):
        os.chown(folder, *owner, follow_symlinks=False)
