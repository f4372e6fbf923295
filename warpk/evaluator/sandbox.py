"""The OS sandbox around the untrusted worker (the only process that imports candidate code).

`evaluate.sandbox`: `bwrap` runs it under bubblewrap (Debian/Ubuntu package `bubblewrap`);
`process` runs it as a plain child process (weaker: see below; every record says which);
`auto` = bwrap, and refuses to evaluate (SandboxUnavailable, with what to do) where bwrap does
not work, rather than silently falling back.

Threat model. The candidate has full Python and C++ power inside its process and has read this
code. Its verdict is decided elsewhere (warpk.evaluator.trusted): it sees inputs only when they
come with the Go that starts the trusted clock, its outputs are checked as bytes in another
process, its time is that process's clock only (evaluator v3: nothing it reports is read), and
the reference is timed through the same harness in a worker of its own, in this same sandbox
(warpk.evaluator.reference). This module limits what it can do to the machine.
  Covered (bwrap): no network (own network namespace, loopback only); an empty, read-only root that
  holds only the system's programs and libraries (/usr, /bin, /lib..., read-only /sys; /proc's host
  knobs, /proc/sys above all, read-only: mounts.PROC_READ_ONLY, round 68), the few /etc files they
  need (not /etc/shadow), this Python installation, the install prefixes of the compilers on PATH (a
  cluster's gcc or CUDA in /opt or /apps) and the `warpk` package: no $HOME, /home, /root, /run,
  /opt, /srv, /var or project tree; /tmp is a private, empty tmpfs of at most SCRATCH_LIMIT_BYTES in
  the sandbox's own mount namespace, and holds its working dir (also $HOME and $TMPDIR): nothing it
  writes there reaches the host, and it goes with the sandbox; for a CUDA candidate its own build
  dir (a host folder: the cache per source hash, shared by the compile pool and the lane, never by
  two live sandboxes at once: warpk.evaluator.dispatch.folder_alone, red team round 6) is the only
  other writable place, and the parent only makes that folder, never reads in it; own PID namespace
  (it cannot see or signal other processes, and everything it spawns dies with it:
  `--die-with-parent`, then the namespace goes); new session (no terminal injection); all
  capabilities dropped, no_new_privs; where the evaluator is root, the worker is nobody, not root
  (warpk.evaluator.identity: bwrap sets up as root, `setpriv` drops to uid and gid 65534); no user
  namespaces of its own (bwrap 0.8+ `--disable-userns`, and the filter refuses CLONE_NEWUSER:
  without them a candidate could make namespaces charged to a per-user limit until no sandbox
  on the host can start, corpus 56); on a GPU only its lane's device nodes (/dev/nvidia<i> +
  control/UVM nodes) exist, no pty (the kernel has one pool: round 72); a scrubbed environment (no
  tokens or keys), for the sandbox's init (/proc/1) too.
  Both modes: one fresh process per candidate (nothing of one candidate can reach the next); its
  stdout and stderr reach the parent through a pipe the parent made, drained without blocking into
  the last 4 KiB (warpk.evaluator.hostside): the parent never opens, follows or walks a path the
  candidate can write, and every wait of the parent has a time limit, so a candidate costs its own
  record and its compile slot, never the lane or the run; a host folder it wrote into (`process`
  mode) is removed without following links, at any depth; wall-clock limits per step (enforced by
  the trusted worker, then SIGKILL of the whole sandbox); host memory watched over its whole process
  tree (RLIMIT_AS too on CPU), no core dumps, one file at most 1 TiB.
  Resources (warpk.evaluator.resources, both modes; every record's `limits` says which apply): a
  cgroup per sandbox, joined before exec, with memory.max counting what no RSS shows (its tmpfs
  /tmp, memfds, shared memory: corpus 55), pids.max, the lane's cores as its cpuset (the reference
  worker's too: more threads buy nothing), and oom_score_adj 1000 (reference 500). While the
  reference is timed (warpk.evaluator.freeze, warpk.evaluator.timing_phase): every process of the
  sandbox is frozen (a cgroup v2 of its own, joined before the candidate loads, so all it spawns is
  inside; SIGSTOP of its process tree where no cgroup v2 is writable), and the reference is timed
  alone before any candidate code runs, so what freezing does not stop (kernels queued on the GPU,
  armed timers) is not credited to it beyond the ratio of both sides alone (corpus 45b, 54, 59);
  SysV and POSIX message queues fail with EPERM (round 29); its exit's kernel work ends before the
  lane goes on (a million tmpfs files: 3.6 s; its cgroup waited empty, up to 120 s: round 30), then
  what a unix socket's own queue kept and over 64 MiB of pages it dirtied in its build dir are freed
  and written back before its memory group goes (warpk. evaluator.leftovers, rounds 65-67); io_uring
  fails with EPERM (a multishot timer wakes a frozen sandbox); no worker passes fds over its socket
  (the trusted side takes its outbox fd with pidfd_getfd), so fds it parks in flight refuse only its
  own sends (round 37); fds it sends are closed on a thread of their own, and no socket of its
  lingers (SO_LINGER fails with EPERM), so no close of what it made waits (rounds 38-39, corpus 61,
  63); past a quarter of fs.file-max in use, every sandbox holding over 16384 files (fds, mappings)
  or 32 MiB of kernel memory besides page tables (no churn of processes hides that: round 47) is
  killed (filetable, 43-53).
  Not covered: all sandboxes of a root evaluator are one user, nobody, and share its per-user
  budgets (epoll watches, pipe pages, processes) with each other and the host's other nobody
  processes while they live; where it cannot drop (one line says why) its uid 0 is the host's: it
  can change the host's /dev/nvidia-caps (its other nodes are copies: devnodes.py),
  read root-only files (/proc/timer_list) and take root's host-wide epoll watches (round 70; leases,
  inotify, fanotify refused, 1024 queued signals, build dirs private); where no cgroup can be made
  (limits=none), memfds it keeps (in no RSS; /tmp is capped), which sandbox dies when all reach
  their budget (it can lower its oom_score_adj: the reference worker may go, a harness failure), its
  process count (RLIMIT_NPROC lifted: nobody's tally is shared, round 71), without a cpuset its
  cores (round 2: 1.1-1.3x);
  fd passing of the evaluator user's other programs whose open-file limit is under ~1300 while it
  holds fds in flight (a line says where the trusted side's own hard limit is too low to be sure);
  kernel work after it died that its group does not count (pages another sandbox charged first,
  extents freed: round 67); a fill of the file table faster than the guard's look (0.2 s and a
  count; files of other evaluating processes' sandboxes); its build dir's disk, in `process` mode
  its working dir; kernel or driver exploits (the seccomp filter blocks only the keyring, IPC,
  io_uring, AIO, SO_LINGER, user namespaces, secret memory, xattrs, non-unix sockets where no
  GPU is (a GPU lane's TCP and netlink buffers take host memory: rounds 73-74) and memory or fd
  tables shared beyond threads and vfork: warpk.evaluator.seccomp; other syscalls and the NVIDIA
  driver's ioctls are reachable); what the mounted system folders, /sys and the mounted Python
  installation reveal (warpk.evaluator.mounts: secrets in a conda env's conda-meta/state, a venv's
  bin/activate, a checkout inside /usr: red team round 25), which it can write into its error text; GPU side
  channels (it can read the energy counter through NVML and time its power to the counter's updates,
  which the windows' random phase does not stop) and a kernel left spinning after the sandbox died;
  the page size of its outputs (a CPU output on huge pages is cheaper for it to write and for the
  trusted side to read: a copy answering from a ring of such buffers got 1.03 [0.99, 1.09], red team
  round 55) and on a GPU which of two bandwidth modes its device memory falls in (~10% of a huge
  batch, held by one worker role for stretches: docs/benchmarks.md, 2026-12-07; not tried as an
  attack); on a GPU lane its harness packs its outputs into the send buffer, a copy a candidate can
  rewrite itself to skip (on the CPU the trusted side reads them out of its memory: corpus 51);
  where no cgroup v2 group can be made, a build in the compile pool timing its load to the
  reference's batches (elsewhere the lanes freeze the pool while they time, pool_gate: red team
  round 9 got 1.9x that way; what a sandbox still reads of the others, /proc/stat and locks, then
  has nothing running to act on, except another lane's candidate loading the memory bus); byte-range
  locks on shared read-only files signalling between live sandboxes (round 7, no gain); in `process`
  mode an orphan reparented outside its tree escapes the SIGSTOP freeze (not the cgroup one), and
  none of the namespace protections apply (it can write wherever the user can, reach the network and
  the sampler daemon, kill the trusted worker, or stop what holds the machine's lane locks, so that
  another run stops: round 32). Run it on a machine you can afford to lose, or under bwrap.

Preflight (`resolve_sandbox`): the real worker entry runs in the real sandbox command line first;
where it cannot, evaluation refuses with one line (SandboxUnavailable), not every candidate
`crashed`. A venv reached through a symlink is mounted at that path too (pyvenv.cfg).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from warpk.evaluator import filetable, identity, leftovers
from warpk.evaluator.devnodes import DeviceCopies, gpu_nodes, unshared_reason
from warpk.evaluator.entry import OOM_SCORE_ADJ, enter_preflight, enter_sandbox
from warpk.evaluator.fds import close_apart
from warpk.evaluator.freeze import resident_kb, resident_values
from warpk.evaluator.hostside import OutputTail, remove_tree
from warpk.evaluator.mounts import PROC_READ_ONLY, host_folders, mount, open_parents
from warpk.evaluator.resources import (
    MEMORY_HEADROOM_BYTES,
    ResourceGroup,
)
from warpk.evaluator.seccomp import seccomp_fd
from warpk.paths import KEPT_PRIVATE, private_folders
from warpk.paths import REPO as PROJECT_ROOT

PACKAGE_DIR = PROJECT_ROOT / "warpk"
# Variables a worker may inherit; everything else (tokens, W&B keys, HF tokens...) is dropped.
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CC", "CXX")
# The workers' CUDA allocator, every worker alike (a timing diagnostic), never a trainer's own setting
WORKER_ALLOC = "WARPK_WORKER_ALLOC_CONF"  # expandable segments widened GPU intervals (2026-12-07)
# The sandbox's private /tmp, its working dir included: tmpfs pages are host memory that no
# process's RSS shows, so the cap bounds them (a candidate needs a few files and compiler caches).
SCRATCH_LIMIT_BYTES = 2 << 30
SHM_LIMIT_BYTES = 1 << 30  # its /dev/shm, a tmpfs of its own that nobody can write (identity)
SANDBOX_HOME = Path("/tmp/warpk-worker")  # the working dir, $HOME and $TMPDIR inside the sandbox
KILL_WAIT_S = 10.0  # a SIGKILLed worker is reaped by then unless stuck in the kernel (a driver)
PREFLIGHT_TIMEOUT_S = 300.0  # importing torch from a slow network filesystem takes a while
PREFLIGHT_CODE = "import torch, warpk.evaluator.untrusted"  # what every worker does first


class SandboxUnavailable(RuntimeError):
    """The requested sandbox cannot run here; the message says what to do."""


@dataclass(frozen=True)
class Limits:
    memory_limit_gb: float  # host resident memory of the worker's whole process tree
    threads: int
    address_space_limit: bool  # RLIMIT_AS too (CPU workers: CUDA needs a huge address space)
    cores: tuple[int, ...] = ()  # its cpuset (a lane's cores; none for a compile worker)


def resolve_sandbox(requested: str, cache_dir: str | Path | None = None) -> str:
    """'bwrap' or 'process' for evaluate.sandbox=auto|bwrap|process, once the real worker entry
    has started in it (`worker_start_failure`); raises SandboxUnavailable with what to do.
    `cache_dir` (an evaluator's) becomes private first, so the preflight sees the mounts the
    candidates will get (red team round 25); it runs again whenever the private folders change."""
    if cache_dir is not None:
        KEPT_PRIVATE.add(Path(cache_dir).resolve())
    return _resolve_sandbox(requested, frozenset(private_folders()))


@functools.cache
def _resolve_sandbox(requested: str, private: frozenset) -> str:
    mode = "process" if requested == "process" else "bwrap"
    if mode == "bwrap" and shutil.which("bwrap") is None:
        raise SandboxUnavailable(
            f"evaluate.sandbox={requested}: bwrap is not installed. Install bubblewrap (`apt-get install "
            "bubblewrap`) or pass evaluate.sandbox=process to run candidates without OS isolation "
            "(weaker: see warpk/evaluator/sandbox.py)"
        )
    why = worker_start_failure(mode, private)
    if why is None:
        if mode == "bwrap" and (kept := identity.undropped_reason()):
            print(f"evaluate: running as root, sandboxes stay the host's root ({kept}): run as another "
                  "user where you can (warpk/evaluator/identity.py)", file=sys.stderr, flush=True)
        if mode == "bwrap" and (shared := unshared_reason()):
            print(f"evaluate: {shared}", file=sys.stderr, flush=True)
        return mode
    where = "in the bwrap sandbox" if mode == "bwrap" else "as a plain process"
    fix = "check that this python imports torch and warpk"
    if mode == "bwrap":
        fix = ("run python from a folder the sandbox mounts (warpk/evaluator/sandbox.py says which), "
               "readable by nobody where the evaluator is root (identity.py), "
               "check that bubblewrap can make namespaces here (`bwrap --ro-bind / / true`), or pass "
               "evaluate.sandbox=process (weaker)")
    raise SandboxUnavailable(f"evaluate.sandbox={requested}: the worker cannot start {where}: "
                             f"`{sys.executable} -c '{PREFLIGHT_CODE}'` failed ({why}); {fix}")


@functools.cache
def worker_start_failure(mode: str, private: frozenset = frozenset()) -> str | None:
    """None if this interpreter starts the worker's imports inside the real `mode` sandbox (the
    command line, environment and interpreter path every worker gets, with these `private`
    folders), else the last line it wrote. Its output is read from a pipe: it runs no candidate
    code."""
    host_home = None if mode == "bwrap" else Path(tempfile.mkdtemp(prefix="warpk-preflight-"))
    home = host_home or SANDBOX_HOME
    filter_fd = seccomp_fd() if mode == "bwrap" else None
    devices = None
    try:
        devices = DeviceCopies() if mode == "bwrap" else None  # its OSError: the reason, one line
        sandbox = bwrap_command(None, None, filter_fd, devices.binds()) if devices else []
        done = subprocess.run(
            [*sandbox, sys.executable, "-c", PREFLIGHT_CODE], cwd=host_home or "/",
            env=worker_env(home, 1, {}), stdin=subprocess.DEVNULL, capture_output=True,
            timeout=PREFLIGHT_TIMEOUT_S, start_new_session=True,
            pass_fds=() if filter_fd is None else (filter_fd,),
            preexec_fn=functools.partial(enter_preflight, mode == "bwrap" and identity.host_root()),
        )
    except subprocess.SubprocessError as err:  # the preexec's, which says nothing itself
        if isinstance(err, subprocess.TimeoutExpired):
            return " ".join(str(err).split())[-300:]
        return ("as root, the sandbox's first process could not take a mount namespace of its own "
                "(entry.private_mounts: unshare needs CAP_SYS_ADMIN)")
    except OSError as err:
        return " ".join(str(err).split())[-300:]
    finally:
        if filter_fd is not None:
            os.close(filter_fd)
        if devices is not None:
            devices.close()
        if host_home is not None:
            remove_tree(host_home)
    if done.returncode == 0:
        return None
    lines = [ln for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()]
    return (" ".join(lines[-1].split())[-300:] if lines else "") or f"exit code {done.returncode}"


def bwrap_command(build_dir: Path | None, gpu: str | None, filter_fd: int | None = None,
                  devices: list[str] | tuple = (), drop: bool | None = None) -> list[str]:
    """The bubblewrap command line that runs a worker (see the module doc): it starts in
    SANDBOX_HOME, on the sandbox's own capped tmpfs; `filter_fd` (seccomp_fd) goes to the
    child in pass_fds; `devices`: its own device nodes' binds (devnodes.DeviceCopies); `drop`
    (default: identity.drops()): set up as root, run as nobody (warpk.evaluator.identity)."""
    drop = identity.drops() if drop is None else drop
    cmd = ["bwrap", "--size", str(SCRATCH_LIMIT_BYTES), "--perms", "1777", "--tmpfs", "/tmp"]
    cmd += ["--perms", "1777", "--dir", str(SANDBOX_HOME)]  # first: the project, the venv or
    at = len(cmd)  # caches may live under /tmp (mounted next); their parents go here
    cmd += host_folders(PACKAGE_DIR)  # warpk.evaluator.mounts: what of the host it sees
    cmd += ["--proc", "/proc", *PROC_READ_ONLY, "--dev", "/dev", *devices]
    cmd += ["--size", str(SHM_LIMIT_BYTES), "--perms", "1777", "--tmpfs", "/dev/shm"]
    cmd += ["--size", "4096", "--tmpfs", "/dev/pts", "--remount-ro", "/dev/pts"]  # no pty: one pool
    nodes = gpu_nodes(gpu)
    for node in nodes:
        if node not in devices[2::3]:  # not copied (devnodes): the host's own
            mount(node, cmd, "--dev-bind")
    if build_dir is not None:
        cmd += ["--bind", str(build_dir), str(build_dir)]
    cmd[at:at] = open_parents(cmd)
    cmd += ["--chdir", str(SANDBOX_HOME), "--remount-ro", "/"]
    cmd += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    cmd += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if drop:  # setpriv's three, gone with the uid (no user namespace: the filter refuses new ones)
        cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    else:
        cmd += ["--unshare-user-try"]
        if _bwrap_disables_userns():  # no namespaces of its own: they count against host root's limits
            cmd += ["--unshare-user", "--disable-userns"]
    if filter_fd is not None:
        cmd += ["--seccomp", str(filter_fd)]
    cmd += ["--"]
    return cmd + identity.drop_command(nodes) if drop else cmd


@functools.cache
def _bwrap_disables_userns() -> bool:
    """bwrap 0.8+ can stop the sandbox from making user namespaces (corpus 56)."""
    try:
        shown = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--disable-userns" in shown.stdout + shown.stderr


def worker_env(home: Path, threads: int, extra: dict[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    env.update(
        HOME=str(home), TMPDIR=str(home), PYTHONPATH=str(PROJECT_ROOT), PYTHONDONTWRITEBYTECODE="1",
        OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
        TORCHINDUCTOR_CACHE_DIR=str(home / "inductor"), TRITON_CACHE_DIR=str(home / "triton"),
        # Keep freed tensors in glibc's heap instead of unmapping and re-mapping them on every
        # call: without this, CPU timings of the bundled tasks jumped between two levels (~10x).
        MALLOC_MMAP_THRESHOLD_=str(32 * 1024 * 1024),
        MALLOC_TRIM_THRESHOLD_=str(1024 * 1024 * 1024),
        MALLOC_TOP_PAD_=str(64 * 1024 * 1024),
    )
    if os.environ.get(WORKER_ALLOC):
        env["PYTORCH_CUDA_ALLOC_CONF"] = os.environ[WORKER_ALLOC]
    env.update(extra)
    return env


class UntrustedProcess:
    """One sandboxed untrusted worker; `sock` is the trusted side's end of its socket.

    Its working dir: under bwrap SANDBOX_HOME on the sandbox's own tmpfs (no host folder at all;
    a `home` given is not used); in `process` mode `home`, a host folder the caller made and
    removes, or with None a fresh one made here that `close` removes without following links.
    Its output comes through a pipe made here (`output`), never a file. `close()` when done."""

    def __init__(self, mode: str, home: Path | None, limits: Limits, env: dict[str, str],
                 build_dir: Path | None = None, gpu: str | None = None, pool: bool = False,
                 role: str = "candidate"):
        self.mode, self.limits, self.killed, self.guard_verdict = mode, limits, False, None
        self.host_home, self.made_home, self.build_dir = None, False, build_dir  # host folders it writes
        if mode != "bwrap":
            self.made_home = home is None
            self.host_home = Path(tempfile.mkdtemp(prefix="warpk-untrusted-")) if home is None else home
        home = self.host_home or SANDBOX_HOME
        self.sock, child = socket.socketpair()
        python = [sys.executable, "-m", "warpk.evaluator.untrusted"]
        filter_fd = seccomp_fd(local_only=gpu is None) if mode == "bwrap" else None  # seccomp.SOCKET
        self.devices = None
        full_env = worker_env(home, limits.threads, {**env, "WARPK_SOCKET_FD": str(child.fileno())})
        self.output = OutputTail()
        rss_limit = int(limits.memory_limit_gb * 1024**3)
        self.group = ResourceGroup(rss_limit + MEMORY_HEADROOM_BYTES if rss_limit else 0, limits.cores, pool)
        # its memory and 4 GiB more: torch's own address space
        address_space = int((limits.memory_limit_gb + 4) * 1024**3) if limits.address_space_limit else 0
        try:
            self.devices = DeviceCopies(gpu_nodes(gpu)) if mode == "bwrap" else None  # rounds 69, 71
            devices = self.devices.binds() if self.devices else []
            cmd = (bwrap_command(build_dir, gpu, filter_fd, devices) if mode == "bwrap" else []) + python
            self.proc = subprocess.Popen(
                cmd, cwd=self.host_home or "/", env=full_env, stdin=subprocess.DEVNULL,
                stdout=self.output.write_fd, stderr=self.output.write_fd,
                pass_fds=(child.fileno(),) + (() if filter_fd is None else (filter_fd,)),
                start_new_session=True, preexec_fn=functools.partial(
                    enter_sandbox, os.getpid(), self.group, address_space, OOM_SCORE_ADJ[role],
                    mode == "bwrap" and identity.host_root()),
            )
        except BaseException:
            self.group.close()
            self.close_devices()
            self.output.close()
            self.sock.close()
            if self.made_home:
                remove_tree(self.host_home)
            raise
        finally:
            child.close()
            if filter_fd is not None:
                os.close(filter_fd)
        logs = os.environ.get("WARPK_WORKER_LOGS")  # debugging: a copy in the parent's own file
        self.output.started(Path(logs, f"untrusted-{self.proc.pid}.txt") if logs else None)
        if role == "candidate":  # what it may hold of the host's file table (`guard_verdict`)
            filetable.watch(self)

    def close_devices(self) -> None:
        if self.devices is not None:
            self.devices.close()

    def rss_gb(self) -> float:
        """Resident memory of the worker and everything it spawned, each address space once."""
        return resident_kb(resident_values(self.proc.pid)) / 1024**2

    def stderr_tail(self, chars: int = 300) -> str:
        """The last non-empty line it wrote (from the pipe's last 4 KiB: the candidate wrote it)."""
        return self.output.last_line(chars)

    def kill(self) -> None:
        """SIGKILL the whole sandbox (its PID namespace dies with its first process); once."""
        if not self.killed:
            self.killed = True
            # Only while its first process is unreaped: after that its pid, and a group of that
            # number, may be another process's (pid_max is 32768 on the development machine).
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.group.kill()  # what left its process group (new sessions) but not its cgroups
        try:
            self.proc.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:  # stuck in the kernel: reaped by a later poll, or never
            pass
        close_apart(self.sock)  # what it left queued in the socket is freed apart (fds.py)

    def close(self) -> None:
        """Kill it, stop reading its output and remove the host folder made for it (if any)."""
        filetable.forget(self)
        self.kill()
        try:
            self.group.close(functools.partial(leftovers.sync_folder, self.build_dir or self.host_home))
        finally:
            self.close_devices()
        self.output.close()
        if self.made_home:
            remove_tree(self.host_home)
