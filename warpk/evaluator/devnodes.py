"""Device nodes of a sandbox's own, where the evaluator runs as root.

bwrap's `--dev /dev` binds the host's /dev/null, zero, full, random, urandom and tty into the
sandbox. Where the evaluator runs as root the sandbox's uid 0 is the host's, and changing a file's
mode, owner, times or ACL needs only its uid: from a sandbox /dev/full became `crw------- root`
on the host, so a candidate could make /dev/null unusable for every other user of the host until a
reboot (red team round 69). A read-only bind would refuse that, but bwrap adds nodev to it, and a
node on a nodev mount does not open. So each sandbox gets copies of those nodes (the same device
numbers and mode), made here in a folder of its own, bound over bwrap's, removed when it closes:
what it changes is its copy.

The copies live in a folder on the evaluator's cache filesystem (the default cache dir, 0700),
which must allow device nodes; where it does not, or the evaluator is not root (the host's nodes
are not the sandbox's then), there are no copies, and `unshared_reason` says why in one line.
A GPU lane's /dev/nvidia* nodes are still the host's (not tried on a GPU: the threat model).

Non-goals: no other device (bwrap makes /dev/pts, /dev/shm and the links itself).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from warpk.evaluator.hostside import remove_tree
from warpk.paths import default_cache_dir

HOST_NODES = ("null", "zero", "full", "random", "urandom", "tty")


def unshared_reason() -> str | None:
    """Why sandboxes would see the host's own nodes here, or None where they get copies."""
    if os.geteuid() != 0:
        return None
    base = default_cache_dir()
    base.mkdir(parents=True, exist_ok=True)
    if os.statvfs(base).f_flag & os.ST_NODEV:
        return (f"running as root with the cache dir {base} on a nodev filesystem: sandboxes share "
                "the host's /dev/null and its siblings, whose modes a candidate can change; run as "
                "another user, or set WARPK_CACHE_DIR to a folder on a filesystem with device nodes")
    return None


class DeviceCopies:
    """One sandbox's copies of HOST_NODES (none where `unshared_reason` is not None)."""

    def __init__(self):
        self.folder: Path | None = None
        if os.geteuid() != 0 or unshared_reason() is not None:
            return
        base = default_cache_dir() / "devnodes"
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix="sandbox-", dir=base))
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
