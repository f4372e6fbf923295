"""Device nodes of a sandbox's own, where the evaluator is the host's root.

bwrap's `--dev /dev` binds the host's /dev/null, zero, full, random, urandom and tty into the
sandbox. Where the evaluator runs as root the sandbox's uid 0 is the host's, and changing a file's
mode, owner, times or ACL needs only its uid: from a sandbox /dev/full became `crw------- root`
on the host, so a candidate could make /dev/null unusable for every other user of the host until a
reboot (red team round 69). A read-only bind would refuse that, but bwrap adds nodev to it, and a
node on a nodev mount does not open. So each sandbox gets copies of those nodes (the same device
numbers and mode), made here in a folder of its own, bound over bwrap's, removed when it closes:
what it changes is its copy.

The copies live in a folder of root's alone under the evaluator's cache dir, whose filesystem
must allow device nodes; where a trial copy cannot be made and opened there, there are none, and
`unshared_reason` says why in one line (the run says it once). A sandbox dropped to nobody
(warpk.evaluator.identity) gets them too: the nodes are 0666, and anyone who may write a file may
set its times to now (red team round 71: the host's /dev/null, zero, full and urandom touched from
a nobody sandbox). A GPU lane's character nodes (/dev/nvidia<i>, nvidiactl, nvidia-uvm...) are
copied as well; /dev/nvidia-caps (a folder of root's MIG capability nodes, 0400 or 0444) is bound
as it is. Where the evaluator is another user (or root in a user namespace) no node can be made:
its sandboxes share the host's nodes and may touch their times, as that user may (the threat
model).

Non-goals: no other device (bwrap makes the links; /dev/pts and /dev/shm are tmpfs: sandbox.py).
"""

from __future__ import annotations

import functools
import os
import stat
import tempfile
from pathlib import Path

from warpk.evaluator.hostside import remove_tree
from warpk.evaluator.identity import host_root
from warpk.paths import default_cache_dir

HOST_NODES = ("null", "zero", "full", "random", "urandom", "tty")
NVIDIA_SHARED_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps", "nvidia-modeset")


def gpu_nodes(gpu: str | None) -> list[str]:
    """The host's device nodes a lane on GPUs `gpu` ("0" or "0,1") needs, those that exist."""
    if not gpu:
        return []
    nodes = [f"/dev/nvidia{int(i)}" for i in gpu.split(",")] + [f"/dev/{n}" for n in NVIDIA_SHARED_NODES]
    return [node for node in nodes if os.path.exists(node)]  # a dangling link: none


def unshared_reason() -> str | None:
    """Why sandboxes would see the host's own nodes here, or None where they get copies (or need
    none): a trial copy of /dev/null is made, opened for writing and removed, once per process
    and cache dir."""
    return _reason(default_cache_dir() / "devnodes") if host_root() else None


@functools.cache
def _reason(base: Path) -> str | None:
    why = None
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = base.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o077:
            why = f"{base} is not a folder of root's alone"
        else:
            with tempfile.TemporaryDirectory(dir=base) as trial:
                os.mknod(Path(trial) / "null", stat.S_IFCHR | 0o600, os.stat("/dev/null").st_rdev)
                os.close(os.open(Path(trial) / "null", os.O_WRONLY))
    except OSError as err:
        why = f"no device node could be made and opened in {base} ({err.strerror})"
    if why is None:
        return None
    return (f"running as root, sandboxes share the host's /dev/null and its siblings, whose modes a "
            f"candidate can change: {why}; run as another user, or set WARPK_CACHE_DIR to a folder "
            "on a local filesystem with device nodes")


class DeviceCopies:
    """One sandbox's copies of HOST_NODES and of the character nodes among `gpu_nodes` (none
    where `unshared_reason` is not None)."""

    def __init__(self, gpu_nodes: list[str] | tuple = ()):
        self.folder: Path | None = None
        self.copied: dict[str, str] = {}  # the sandbox's path: the copy's
        if not host_root() or unshared_reason() is not None:
            return
        self.folder = Path(tempfile.mkdtemp(prefix="sandbox-", dir=default_cache_dir() / "devnodes"))
        try:
            for node in [f"/dev/{name}" for name in HOST_NODES] + list(gpu_nodes):
                host = os.stat(node)
                if not stat.S_ISCHR(host.st_mode):  # /dev/nvidia-caps, a folder: bound as it is
                    continue
                copy = self.folder / os.path.basename(node)
                os.mknod(copy, stat.S_IFCHR | 0o600, host.st_rdev)
                os.chown(copy, host.st_uid, host.st_gid)
                os.chmod(copy, stat.S_IMODE(host.st_mode))  # past the umask
                self.copied[node] = str(copy)
        except OSError:
            self.close()
            raise

    def binds(self) -> list[str]:
        """bwrap arguments that put the copies over bwrap's binds of the host's nodes."""
        return [arg for node, copy in self.copied.items() for arg in ("--dev-bind", copy, node)]

    def close(self) -> None:
        if self.folder is not None:
            remove_tree(self.folder)
            self.folder = None
