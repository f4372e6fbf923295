"""Device nodes of a sandbox's own, where the evaluator runs as root.

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
`unshared_reason` says why in one line (the run says it once). Where the evaluator is not the
host's root (another user, or root in a user namespace) the host's nodes are not the sandbox's,
and none are needed.
A GPU lane's /dev/nvidia* nodes are still the host's (not tried on a GPU: the threat model).

Non-goals: no other device (bwrap makes /dev/pts, /dev/shm and the links itself).
"""

from __future__ import annotations

import functools
import os
import stat
import tempfile
from pathlib import Path

from warpk.evaluator.hostside import remove_tree
from warpk.paths import default_cache_dir

HOST_NODES = ("null", "zero", "full", "random", "urandom", "tty")


def host_root() -> bool:
    """Whether this process's uid 0 is the host's (not root inside a user namespace of its own)."""
    if os.geteuid() != 0:
        return False
    try:
        first = Path("/proc/self/uid_map").read_text().split()
    except OSError:
        return True
    return first[:3] == ["0", "0", "4294967295"]


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
    """One sandbox's copies of HOST_NODES (none where `unshared_reason` is not None)."""

    def __init__(self):
        self.folder: Path | None = None
        if not host_root() or unshared_reason() is not None:
            return
        self.folder = Path(tempfile.mkdtemp(prefix="sandbox-", dir=default_cache_dir() / "devnodes"))
        try:
            for name in HOST_NODES:
                host = os.stat(f"/dev/{name}")
                os.mknod(self.folder / name, stat.S_IFCHR | 0o600, host.st_rdev)
                os.chmod(self.folder / name, stat.S_IMODE(host.st_mode))  # past the umask
        except OSError:
            self.close()
            raise

    def binds(self) -> list[str]:
        """bwrap arguments that put the copies over bwrap's binds of the host's nodes."""
        if self.folder is None:
            return []
        return [arg for name in HOST_NODES for arg in ("--dev-bind", str(self.folder / name), f"/dev/{name}")]

    def close(self) -> None:
        if self.folder is not None:
            remove_tree(self.folder)
            self.folder = None
