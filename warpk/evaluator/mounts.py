"""What of the host a bwrap sandbox sees: the folders `host_folders` mounts read-only.

The system's programs and libraries (/usr, /bin, /lib..., read-only /sys), the few /etc files
they read, this Python installation, the install prefixes of the compilers on PATH and CUDA_HOME,
and the `warpk` package. Never a private folder (warpk.paths.private_folders: ~, /home, /root,
/tmp, the host's temp folder with the run's pool gate, the evaluator's caches) or a folder above
one, never the working folder or a script's folder (red team rounds 22-25).

Python installation: its prefixes (a venv and its base interpreter), the resolved executable's
folder, the sys.path entries that lie inside a prefix or are named site-/dist-packages, and the
folders the site-packages' .pth files add (editable installs, `conda develop`). Not the working
or a script's folder (`python -m warpk` from above the project mounted every run's outputs),
not a $PYTHONPATH folder of another kind.

Non-goals: no sandbox command line beyond these mounts (warpk.evaluator.sandbox).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from warpk.paths import REPO as PROJECT_ROOT
from warpk.paths import covers_private, private_folders

# What the sandbox's otherwise empty, read-only root holds: the system's programs and libraries
# (the compilers and CUDA for load_inline), the few /etc files they read, and /sys (read-only).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
             "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime")
# The host's knobs under the sandbox's /proc, read-only: where the evaluator runs as root, the
# sandbox's uid 0 is the host's, and a sysctl's write needs only that uid, no capability; bwrap
# covers /proc/irq and /proc/bus but not these (red team round 68: 770 files of /proc opened for
# writing, and kernel.core_pattern set to a pipe ran a program as host root in the host's
# namespaces; /proc/sysrq-trigger reboots the host). /proc/sys is the same tree from any proc
# mount (namespaced values are the reader's). /proc/pressure too: a trigger written there is polled
# by a kernel thread outside the sandbox's cgroup. And /proc/driver (the NVIDIA driver's registry
# file of every GPU takes writes from root with no capability: review, by reading its source),
# /proc/fs and /proc/tty.
PROC_READ_ONLY = ("--ro-bind", "/proc/sys", "/proc/sys",
                  *(arg for sub in ("sysrq-trigger", "pressure", "driver", "fs", "tty")
                    for arg in ("--ro-bind-try", f"/proc/{sub}", f"/proc/{sub}")))
TOOLCHAIN = ("c++", "g++", "gcc", "cc", "nvcc", "ninja")


def host_folders(package_dir: Path) -> list[str]:
    """bwrap arguments mounting what a worker needs of the host (see the module doc)."""
    cmd: list[str] = []
    mounted = [*SYSTEM_DIRS, *ETC_FILES]
    for path in mounted:
        mount(path, cmd)
    if os.path.isdir("/sys/fs/cgroup"):  # /sys carries the host's cgroup tree: every sandbox's state
        cmd += ["--size", "4096", "--tmpfs", "/sys/fs/cgroup", "--remount-ro", "/sys/fs/cgroup"]
    cuda = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda and not cuda.startswith("/usr/") and not covers_private(Path(cuda).resolve()):
        mount(cuda, cmd)
        mounted.append(cuda)
    for folder in [*python_paths(), *toolchain_prefixes()]:
        mount(str(folder), cmd)
        mounted.append(str(folder))
    cmd += interpreter_binds(mounted)
    for folder, seen in pth_paths().items():  # a .pth line through a symlink: where Python looks
        if seen != folder and mountable(folder) and mountable(seen):  # never over / or /tmp (round 27)
            cmd += ["--ro-bind", str(folder), str(seen)]
    mount(str(package_dir), cmd)
    return cmd


def python_paths() -> list[Path]:
    """Folders of this Python installation (see the module doc), none covering a private one or
    the project (only `warpk` is mounted of it, apart from a venv or site-packages inside)."""
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}

    def installed(p: Path) -> bool:
        packages = {"site-packages", "dist-packages"} & set(p.parts)
        return any(p == q or q in p.parents for q in prefixes) or bool(packages)

    paths = prefixes | {Path(os.path.realpath(sys.executable)).parent}
    paths |= {q for q in (Path(p).resolve() for p in sys.path if p and os.path.isdir(p)) if installed(q)}
    paths |= set(pth_paths())
    return sorted(p for p in paths if mountable(p))


def mountable(p: Path) -> bool:
    """Neither private nor above a private folder, nor the project or a folder above it."""
    return not covers_private(p) and p not in {PROJECT_ROOT, *PROJECT_ROOT.parents}


def pth_paths() -> dict[Path, Path]:
    """Folders the site machinery's .pth files add to sys.path (editable installs, `conda
    develop`; round 25: without them such packages were missing in the sandbox), resolved, each
    with the path Python will use for it in the sandbox (round 26: through a symlink, only the
    resolved one was mounted). A .pth that cannot be read or resolved is skipped, as site does."""
    import site

    sitedirs = [*site.getsitepackages(), site.getusersitepackages()]
    found: dict[Path, Path] = {}
    for sitedir in (Path(d) for d in sitedirs if os.path.isdir(d)):
        for pth in sitedir.glob("*.pth"):
            try:
                if not pth.is_file():  # a FIFO would block the read
                    continue
                for line in (ln.strip() for ln in pth.read_text(errors="replace").splitlines()):
                    if line and not line.startswith(("#", "import ", "import\t")):
                        folder = (sitedir / line).resolve()
                        if folder.is_dir():
                            found[folder] = Path(os.path.abspath(sitedir / line))
            except (OSError, RuntimeError, ValueError):  # unreadable, a symlink loop, a NUL byte
                continue
    return found


def interpreter_binds(mounted: list[str]) -> list[str]:
    """Binds that make `sys.executable` exist in the sandbox at the path this process runs it by.
    A venv reached through a symlink (/scratch/env -> /data/envs/x) is mounted only resolved by
    `python_paths`, but its python must be run as /scratch/env/bin/python to find pyvenv.cfg
    beside it (run resolved, it is the bare base interpreter, without the venv's packages): so
    the venv (any prefix reached through a symlink) is mounted at that path too, unless what it
    resolves to is a private folder or above one (round 25: a venv at $HOME through /home/u ->
    /nfs/u mounted all of ~). An interpreter that no mounted folder holds at its path
    (~/bin/python -> /usr/bin/python3.11) is mounted as that one file."""
    binds = []
    prefix = os.path.abspath(sys.prefix)
    resolved = os.path.realpath(prefix)
    if resolved != prefix and not covers_private(Path(resolved)):
        binds += ["--ro-bind", resolved, prefix]
        mounted = [*mounted, prefix]
    python = os.path.abspath(sys.executable)
    if not any(python.startswith(folder.rstrip("/") + "/") for folder in mounted):
        binds += ["--ro-bind", python, python]
    return binds


def toolchain_prefixes() -> list[Path]:
    """Install prefixes (.../bin/g++ -> ...) of the compilers on PATH, $CC and $CXX that lie
    outside the system folders: load_inline needs them in the sandbox. Never one inside or above
    a private folder or the project (a `pip install --user` ninja would expose all of ~; one in the
    temp folder, the pool gate), never a relative one (a relative PATH entry: `--ro-bind . .`)."""
    system = [Path(d) for d in SYSTEM_DIRS]
    private = [*private_folders(), PROJECT_ROOT]
    found = set()
    for name in (*TOOLCHAIN, os.environ.get("CC"), os.environ.get("CXX")):
        path = shutil.which(name) if name else None
        if not path or not os.path.isabs(path):
            continue
        for candidate in {Path(path), Path(os.path.realpath(path))}:
            prefix = candidate.parent.parent
            above = [prefix, *prefix.parents]
            if prefix == Path("/") or any(d in above for d in system):
                continue  # mounted already
            # private as named or resolved (round 26: ~/bin with /users -> /nfs named ~ unresolved);
            # a prefix resolving into a system folder stays (/opt/cuda -> /usr/local/cuda-12, round 27)
            forms = [above, [Path(os.path.realpath(prefix)), *Path(os.path.realpath(prefix)).parents]]
            if any(p in form or form[0] in p.parents for p in private for form in forms):
                continue  # inside a private folder, or above one
            found.add(prefix)
    return sorted(found)


def mount(path: str, cmd: list[str], mode: str = "--ro-bind") -> None:
    """Mount a host path at the same place (a symlink, e.g. /bin -> usr/bin, stays a symlink)."""
    if os.path.islink(path) and mode == "--ro-bind":
        cmd += ["--symlink", os.readlink(path), path]
    elif os.path.exists(path):
        cmd += [mode, path, path]


# bwrap options that mount a host path (or a link) over a point, and those that make a point of
# the sandbox's own
_BINDS = ("--bind", "--ro-bind", "--dev-bind", "--bind-try", "--ro-bind-try", "--dev-bind-try", "--symlink")
_OWN = ("--tmpfs", "--dir", "--proc", "--dev")


def open_parents(cmd: list[str]) -> list[str]:
    """`--perms 0755 --dir` for every folder above a mount point of `cmd` (bwrap options) that no
    bind covers: bwrap run by root makes those folders 0700, which a sandbox dropped to nobody
    could not pass to reach its Python or its build dir (warpk.evaluator.identity)."""
    binds, points, at = [], [], 0
    while at < len(cmd) and cmd[at] != "--":
        if cmd[at] in _BINDS:
            binds.append(cmd[at + 2])
            at += 3
        elif cmd[at] in _OWN:
            points.append(cmd[at + 1])
            at += 2
        else:
            at += 1

    def bound(folder: str) -> bool:
        return any(folder == b or folder.startswith(b.rstrip("/") + "/") for b in binds)

    parents = {str(up) for point in binds + points for up in Path(point).parents}
    parents = sorted((p for p in parents if p != "/" and p not in points and not bound(p)),
                     key=lambda p: (p.count("/"), p))
    return [arg for p in parents for arg in ("--perms", "0755", "--dir", p)]
