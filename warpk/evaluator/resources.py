"""Resource limits of one sandbox, in cgroups (evaluator v3): memory the way the kernel counts it,
the number of its tasks, and the cores it may run on.

Every sandboxed worker (a candidate's, the reference worker, a compile worker) gets a group of
its own, joined by the worker's first process before it execs (`ResourceGroup.join`, run as a
`preexec_fn`), so everything the sandbox ever spawns is born inside and nothing leaves it:
- `memory`: memory.max (v1: memory.limit_in_bytes) counts tmpfs (its /tmp), memfds and shared
  memory too, no swap; over it the kernel kills (`oom_cause`: its own limit or the budget over
  all sandboxes). It is the RSS limit + MEMORY_HEADROOM_BYTES: RSS past its limit is the parent's
  watch's to stop at once (near memory.max the kernel first evicts and slows it for seconds).
- `pids`: pids.max counts threads and processes (RLIMIT_NPROC does not bind root). With
  RLIMIT_NOFILE it bounds a sandbox's fds, not its open files: a mapped file needs no fd (red
  team round 43; the host's file table is warpk.evaluator.filetable's).
- `cpuset`: the lane's cores (`lane_cores`), the same for the candidate and the reference
  worker (they never run at once: warpk.evaluator.freeze), so a candidate that starts more
  threads than the reference's gets no more cores than it has; compile workers get the cores no
  lane uses (none where the lanes take them all), so a build never runs on a timed core.

Where: cgroup v2 where writable and delegating those controllers to a `warpk` group
(`cgroup2`); else the writable v1 hierarchies (`cgroup1`: hybrid hosts such as the development
machine); else `none`, said once (`describe`) and recorded (`limits`), as `sandbox` is. The
parent's host-memory watch (RSS) stays on either way.

Non-goals: no freezing (warpk.evaluator.freeze, which reuses a v2 group made here).
"""

from __future__ import annotations

import atexit
import functools
import os
import secrets
import signal
import sys
import time
from pathlib import Path

from warpk.evaluator import leftovers
from warpk.evaluator.hostmem import sandbox_budget_bytes

CONTROLLERS = ("memory", "pids", "cpuset")
MEMORY_HEADROOM_BYTES = 1 << 30
# Tasks (torch starts dozens, a CUDA build hundreds) and fds per process (RLIMIT_NOFILE).
PIDS_LIMIT = 1024
FILES_PER_PROCESS = 1024
# Per file, memfds included, and KernelBench outputs reach GBs: this only stops a runaway file.
FILE_SIZE_LIMIT_BYTES = 1 << 40
GROUP_PREFIX = "sandbox-"  # warpk.evaluator.freeze sweeps stale ones and reuses a v2 one
REMOVE_WAIT_S = 120.0  # for a killed sandbox's processes to be gone (`close`)
EMPTY_REMOVE_WAIT_S = 0.5  # an empty group's rmdir can fail briefly after its last process left
STALE_AFTER_S = 60.0

def _mounts() -> list[list[str]]:
    try:
        return [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return []


def cgroup2_root() -> Path | None:
    """The mount point of a writable cgroup v2 hierarchy, or None."""
    for parts in _mounts():
        if len(parts) > 2 and parts[2] == "cgroup2":
            root = Path(parts[1])
            if os.access(root, os.W_OK) and (root / "cgroup.procs").exists():
                return root
    return None


def _write(path: Path, text: str) -> bool:
    try:
        path.write_text(text)
        return True
    except OSError:
        return False


def _v2_base() -> tuple[Path, tuple[str, ...]] | None:
    """root/warpk with the controllers it delegates to its children, or None."""
    root = cgroup2_root()
    if root is None:
        return None
    try:
        offered = (root / "cgroup.controllers").read_text().split()
    except OSError:
        return None
    wanted = [c for c in CONTROLLERS if c in offered]
    if "memory" not in wanted or "pids" not in wanted:
        return None
    enable = " ".join(f"+{c}" for c in wanted)
    base = root / "warpk"
    try:
        base.mkdir(exist_ok=True)
    except OSError:
        return None
    # the root delegates to warpk/, warpk/ to each sandbox (a non-root group with processes
    # of its own cannot delegate: then this is not available)
    for group in (root, base):
        if not _write(group / "cgroup.subtree_control", enable):
            return None
    try:
        on = (base / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    have = tuple(c for c in wanted if c in on)
    return (base, have) if "memory" in have and "pids" in have else None


def _v1_bases() -> dict[str, Path]:
    """controller -> a writable `warpk` group below this process's own in that v1 hierarchy."""
    own = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            for name in names.split(","):
                own[name] = path.lstrip("/")
    except (OSError, ValueError):
        return {}
    bases = {}
    for parts in _mounts():
        if len(parts) < 4 or parts[2] != "cgroup":
            continue
        options = parts[3].split(",")
        for c in CONTROLLERS:
            if c in options and c in own and c not in bases:
                parent = Path(parts[1]) / own[c]
                base = parent / "warpk"
                try:
                    base.mkdir(exist_ok=True)
                except OSError:
                    continue
                if c == "cpuset":  # a v1 cpuset group has no cores until given its parent's
                    for name in ("cpuset.cpus", "cpuset.mems"):
                        if not (base / name).read_text().strip():
                            _write(base / name, (parent / name).read_text().strip())
                if os.access(base / "cgroup.procs", os.W_OK):
                    bases[c] = base
    return bases


@functools.cache
def placement() -> tuple[str, dict[str, Path]]:
    """('cgroup2', {controller: base}) | ('cgroup1', {...}) | ('none', {}), once per process;
    empty sandbox groups a killed run left behind are removed on the way."""
    v2 = _v2_base()
    if v2 is not None:
        base, have = v2
        method, bases = "cgroup2", {c: base for c in have}
    else:
        v1 = _v1_bases()
        method, bases = ("cgroup1", v1) if "memory" in v1 else ("none", {})
    budget = sandbox_budget_bytes()  # the sum of every sandbox below `warpk` (red team round 13)
    if "memory" in bases and budget is not None and budget > 0:
        limit = "memory.max" if method == "cgroup2" else "memory.limit_in_bytes"
        _write(bases["memory"] / limit, str(budget))
    for base in set(bases.values()):
        for stale in base.glob(f"{GROUP_PREFIX}*"):
            try:  # not one another process has just made and not filled yet
                if time.time() - stale.stat().st_mtime > STALE_AFTER_S:
                    stale.rmdir()
            except OSError:
                pass
    return method, bases


POOL_PREFIX = "pool-"  # the compile pool's group of one run: pool-<pid of the run>


@functools.cache
def pool_group() -> Path | None:
    """This run's compile-pool group in the cgroup v2 hierarchy (<root>/warpk/pool-<pid>), which
    the lanes freeze while they time (warpk.evaluator.pool_gate); None where none can be made.
    Where the sandboxes' limits are cgroup v2 it delegates them, so each compile sandbox's group
    is made inside it."""
    root = cgroup2_root()
    if root is None:
        return None
    base = root / "warpk"
    for stale in base.glob(f"{POOL_PREFIX}*"):  # a killed run's, once its process is gone
        pid = stale.name.removeprefix(POOL_PREFIX)
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            for group in [*stale.glob(f"{GROUP_PREFIX}*"), stale]:
                try:
                    group.rmdir()
                except OSError:
                    pass
    group = base / f"{POOL_PREFIX}{os.getpid()}"
    try:
        group.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    atexit.register(_remove_pool, group)
    method, bases = placement()
    if method == "cgroup2":
        _write(group / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS if c in bases))
    return group


def _remove_pool(group: Path) -> None:
    """At exit: the pool group and its emptied sandbox groups (a later run sweeps what is left)."""
    for path in [*group.glob(f"{GROUP_PREFIX}*"), group]:
        try:
            path.rmdir()
        except OSError:
            pass


def describe() -> str:
    """What every record's `limits` says: e.g. 'cgroup1: memory, pids, cpuset' or 'none'."""
    method, bases = placement()
    return method if method == "none" else f"{method}: {', '.join(c for c in CONTROLLERS if c in bases)}"


@functools.cache
def say_if_unavailable() -> None:
    """Once per process, on stderr: the line `unavailable_line` gives, if any."""
    line = unavailable_line()
    if line is not None:
        print(line, file=sys.stderr, flush=True)


def unavailable_line() -> str | None:
    """One line for the user where no cgroup limits apply, else None."""
    if placement()[0] != "none":
        return None
    return ("evaluate: no writable cgroup here (v2 delegating memory and pids, or v1 memory), so a "
            "candidate's memory in tmpfs and memfds, its task count and its cores are not limited "
            "(records say limits=none)")


def lane_cores(lane_index: int, threads: int) -> tuple[int, ...]:
    """The cores of lane `lane_index`: `threads` of this process's cores, apart from other lanes'
    where there are enough (else they share), from the last core down (the first is where a
    machine usually handles its interrupts and housekeeping)."""
    cores = sorted(os.sched_getaffinity(0), reverse=True)
    start = lane_index * threads
    if start + threads > len(cores):
        start = 0
    return tuple(sorted(cores[start:start + threads]))


class ResourceGroup:
    """The cgroups of one sandbox: made with limits here, joined by the worker (`join` in its
    preexec), removed by `close` once its processes are gone."""

    def __init__(self, memory_bytes: int, cores: tuple[int, ...] = (), pool: bool = False):
        """`memory_bytes`: memory.max (0: none); `cores`: its cpuset (empty: none); `pool`: a
        compile sandbox, inside the run's pool group (`pool_group`) the lanes freeze."""
        self.method, bases = placement()
        pooled = pool_group() if pool else None
        if pooled is not None and self.method == "cgroup2":
            bases = {c: pooled for c in bases}
        elif pooled is not None:  # a v2 group of its own in the pool, besides its v1 groups
            bases = {**bases, "pool": pooled}
        self.cpusets = "cpuset" in bases  # whether this host pins sandboxes to cores at all
        self.memory_bytes = memory_bytes
        self.dirs: dict[str, Path] = {}
        name = f"{GROUP_PREFIX}{secrets.token_hex(6)}"
        for controller, base in bases.items():
            if controller == "cpuset" and not cores:
                continue
            group = base / name
            if group in self.dirs.values():
                self.dirs[controller] = group
                continue
            try:
                group.mkdir()
            except OSError:
                continue
            self.dirs[controller] = group
        self._limit(memory_bytes, cores)
        self.procs = tuple(sorted({str(d / "cgroup.procs") for d in self.dirs.values()}))
        self.settled: tuple[float, int | None] | None = None  # close's wait for leftovers: (s, bytes held)

    def _limit(self, memory_bytes: int, cores: tuple[int, ...]) -> None:
        v2 = self.method == "cgroup2"
        if "memory" in self.dirs and memory_bytes > 0:
            memory = self.dirs["memory"]
            _write(memory / ("memory.max" if v2 else "memory.limit_in_bytes"), str(memory_bytes))
            if v2:
                _write(memory / "memory.swap.max", "0")
            elif (memory / "memory.memsw.limit_in_bytes").exists():
                _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))
        if "pids" in self.dirs:
            _write(self.dirs["pids"] / "pids.max", str(PIDS_LIMIT))
        if "cpuset" in self.dirs:
            cpuset = self.dirs["cpuset"]
            if not v2:  # v1 needs its memory nodes too before a task may join
                _write(cpuset / "cpuset.mems", (cpuset.parent / "cpuset.mems").read_text().strip())
            if not _write(cpuset / "cpuset.cpus", ",".join(map(str, cores))):
                self.dirs.pop("cpuset")

    def set_cores(self, cores: tuple[int, ...]) -> bool:
        """Move the group (and every task in it) to `cores`: True once done, or where this host
        pins no sandbox to cores (nothing to move); False where its cpuset could not be made or
        the kernel refuses the cores."""
        if not self.cpusets:
            return True
        cpuset = self.dirs.get("cpuset")
        if cpuset is None or not cores:
            return False
        return _write(cpuset / "cpuset.cpus", ",".join(map(str, cores)))

    def join(self) -> None:
        """Runs in the worker's first process before exec: into every group."""
        pid = str(os.getpid())
        for procs in self.procs:
            with open(procs, "w") as f:
                f.write(pid)

    def kill(self) -> None:
        """SIGKILL every process in its groups (those that left its process group or session too)."""
        for group in set(self.dirs.values()):
            kill_group(group)

    def _oom_counters(self) -> dict[str, int]:
        """The memory group's OOM counters ({} where there is none or it cannot be read); on v1,
        whose failcnt stayed 0 at its own limit here, `oom` is 1 where its peak reached its limit."""
        memory, v2 = self.dirs.get("memory"), self.method == "cgroup2"
        try:
            text = (memory / ("memory.events" if v2 else "memory.oom_control")).read_text()
            counters = {key: int(value) for key, value in (line.split() for line in text.splitlines())}
            if not v2:
                peak = int((memory / "memory.max_usage_in_bytes").read_text())
                counters["oom"] = int(peak >= int((memory / "memory.limit_in_bytes").read_text()))
        except (OSError, ValueError, TypeError):
            return {}
        return counters

    def oom_killed(self) -> bool:
        """The kernel killed something of it for want of memory (its own limit or the budget)."""
        return self._oom_counters().get("oom_kill", 0) > 0

    def oom_cause(self) -> str | None:
        """Why the kernel killed something of it: "own" (over its own memory limit), "budget"
        (all sandboxes together over the budget group's limit, hostmem.sandbox_budget_bytes: the
        memory was others'), None (no OOM kill). A limit's events count in the group whose limit
        was hit and its ancestors, never below it."""
        counters = self._oom_counters()
        if counters.get("oom_kill", 0) <= 0:
            return None
        return "own" if counters.get("oom", 1) + counters.get("max", 0) else "budget"

    def close(self, flush=None) -> None:
        """Remove the groups once their processes are gone (killed by the caller; any it forked
        since, killed here). Their exit can take the kernel seconds on the cores they ran on (a
        million files in the sandbox's tmpfs: 3.6 s, all in the group until done), which slowed
        the next candidate's baseline ~2x when this gave up after 0.5 s (red team round 30)), and
        then what it left to the kernel is freed before the memory group goes (leftovers.settle:
        red team round 65)."""
        start = time.monotonic()
        memory = self.dirs.get("memory")
        if memory is not None:
            while _populated(memory) and time.monotonic() - start <= REMOVE_WAIT_S:
                kill_group(memory)
                time.sleep(0.01)
            self.settled = leftovers.settle(memory, self.method == "cgroup2", flush)
        for group in set(self.dirs.values()):
            while True:
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # busy while it has processes (and briefly after); else left to `placement`
                    waited = time.monotonic() - start
                    if waited > REMOVE_WAIT_S or waited > EMPTY_REMOVE_WAIT_S and not _members(group):
                        break
                    kill_group(group)
                    time.sleep(0.01)
        self.dirs = {}


def _populated(group: Path) -> bool:
    """Whether any task, an exiting one included, is still in the group."""
    events, tasks = group / "cgroup.events", group / "tasks"
    try:
        return "populated 1" in events.read_text() if events.exists() else bool(tasks.read_text().split())
    except OSError:
        return False


def _members(group: Path) -> list[str]:
    try:
        return (group / "cgroup.procs").read_text().split()
    except OSError:
        return []


def kill_group(group: Path) -> None:
    """SIGKILL every process of one cgroup: cgroup.kill where the kernel has it (v2, Linux 5.14+;
    a frozen task dies too), else each pid it lists."""
    if _write(group / "cgroup.kill", "1"):
        return
    for pid in _members(group):
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
