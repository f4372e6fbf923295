"""Resource limits in cgroups (warpk.evaluator.resources): what the kernel counts, a sandbox feels.

Real cgroups, where this machine lets us make them (the development machine and CI: cgroup v1
memory, pids and cpuset; a cgroup v2 host that delegates them): otherwise these skip, and the
records say limits=none (test_describe_says_none_where_nothing_is_writable covers that line).
"""

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import MACHINE_CORES
from warpk.evaluator import resources
from warpk.evaluator.resources import ResourceGroup, describe, placement

METHOD, BASES = placement()
needs_cgroups = pytest.mark.skipif(METHOD == "none", reason="no writable cgroup on this machine")


def _run(group: ResourceGroup, code: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], preexec_fn=group.join,
                          capture_output=True, text=True, timeout=timeout_s)


@needs_cgroups
def test_memory_in_a_memfd_counts_against_the_limit():
    """No process's RSS shows a memfd's pages: the RSS watch missed 3 GiB under a 2 GB limit."""
    group = ResourceGroup(256 << 20)
    try:
        done = _run(group, """
            import os
            f = os.fdopen(os.memfd_create("hoard"), "wb")
            for _ in range(64):
                f.write(b"x" * (16 << 20)); f.flush()
            print("kept 1 GiB")
        """)
        assert done.returncode == -9 and "kept" not in done.stdout
        assert group.oom_killed()
    finally:
        group.close()


@needs_cgroups
def test_a_worker_under_its_limit_runs_and_is_not_called_oom_killed():
    group = ResourceGroup(512 << 20)
    try:
        done = _run(group, "print(sum(range(10**6)))")
        assert done.returncode == 0 and done.stdout.strip() == str(sum(range(10**6)))
        assert not group.oom_killed()
    finally:
        group.close()


@needs_cgroups
def test_a_kill_for_the_budget_over_all_sandboxes_is_told_from_one_over_its_own_limit(private_budget):
    """Red team round 16: memory other sandboxes held filled the budget group every sandbox lies
    below, and an honest candidate killed for it was told it went over its own limit. Here a
    group allowed 1 GiB lies below a budget of 384 MiB."""
    hoard = """
        import os
        f = os.fdopen(os.memfd_create("hoard"), "wb")
        for _ in range(40):
            f.write(b"x" * (16 << 20)); f.flush()
        print("kept 640 MiB")
    """
    own = ResourceGroup(256 << 20)
    try:
        assert _run(own, hoard).returncode == -9 and own.oom_cause() == "own"
    finally:
        own.close()
    private_budget(384 << 20)
    budget = ResourceGroup(1 << 30)
    try:
        assert _run(budget, hoard).returncode == -9 and budget.oom_cause() == "budget"
    finally:
        budget.close()
    assert ResourceGroup(0).oom_cause() is None


@pytest.mark.skipif("pids" not in BASES, reason="no pids cgroup here")
def test_the_task_count_is_limited(monkeypatch):
    """pids.max binds root (RLIMIT_NPROC does not): threads and processes past it fail to start."""
    monkeypatch.setattr(resources, "PIDS_LIMIT", 8)
    group = ResourceGroup(0)
    try:
        done = _run(group, """
            import threading, time
            started = 0
            try:
                for _ in range(32):
                    threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
                    started += 1
            except RuntimeError:
                pass
            print(started)
        """)
        assert done.returncode == 0 and int(done.stdout) < 8
    finally:
        group.close()


@pytest.mark.skipif(
    "cpuset" not in BASES or len(MACHINE_CORES) < 2, reason="no cpuset cgroup, or one core"
)
def test_a_worker_cannot_widen_its_cores(all_cores):
    """A candidate that asks for every core (more threads than the reference has) keeps its own."""
    core = min(os.sched_getaffinity(0))
    group = ResourceGroup(0, (core,))
    try:
        done = _run(group, f"""
            import os
            try:
                os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))!r})
            except OSError:
                pass
            print(sorted(os.sched_getaffinity(0)))
        """)
        assert done.stdout.strip() == f"[{core}]"
    finally:
        group.close()


@pytest.mark.skipif(
    "cpuset" not in BASES or len(MACHINE_CORES) < 2, reason="no cpuset cgroup, or one core"
)
def test_set_cores_moves_a_running_worker_and_everything_it_started(all_cores):
    """The lane's next worker imports torch on other cores and is moved to the lane's before it
    gets a candidate (warpk.evaluator.lane): the move must reach its threads too."""
    first, last = min(os.sched_getaffinity(0)), max(os.sched_getaffinity(0))
    group = ResourceGroup(0, (first,))
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import os, sys, threading, time
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        print(sorted(os.sched_getaffinity(0)), flush=True)
        sys.stdin.readline()
        print(sorted(os.sched_getaffinity(0)), flush=True)
        print(sorted({c for t in os.listdir("/proc/self/task") for c in os.sched_getaffinity(int(t))}))
    """)], preexec_fn=group.join, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == f"[{first}]"
        assert group.set_cores((last,))
        out, _ = proc.communicate("go\n", timeout=30)
        assert out.split("\n")[:2] == [f"[{last}]", f"[{last}]"]
    finally:
        proc.kill()
        proc.wait()
        group.close()


def test_set_cores_says_false_only_where_a_cpuset_was_wanted_and_is_missing(monkeypatch):
    """The lane throws the next worker away only where it cannot be pinned like the candidate:
    on a host with no cpuset controller there is nothing to move (it was thrown away every time)."""
    group = ResourceGroup(0)  # no cores asked: no cpuset group
    try:
        assert group.set_cores((0,)) == (not group.cpusets)
    finally:
        group.close()
    monkeypatch.setattr(resources, "placement", lambda: ("none", {}))
    unpinned = ResourceGroup(0, (0,))
    assert not unpinned.dirs and unpinned.set_cores((0,))


def _flooded_sandbox(group: ResourceGroup, files: int) -> tuple[subprocess.Popen | None, str]:
    """A sandbox whose tmpfs holds `files` empty files, once it says so; (None, how) if it died first."""
    # a tmpfs over a folder that holds neither this interpreter nor the checkout (a clone in /tmp)
    spot = next(d for d in ("/mnt", "/srv", "/opt", "/var/tmp", "/tmp") if os.path.isdir(d) and not any(
        os.path.realpath(p).startswith(d + "/") for p in (sys.executable, sys.prefix, os.getcwd())))
    code = (f"import os\nos.makedirs('{spot}/f')\nfor i in range({files}):\n"
            f"    os.close(os.open(f'{spot}/f/{{i}}', os.O_CREAT | os.O_WRONLY))\n"
            "print('ready', flush=True)\nimport time\ntime.sleep(600)\n")
    command = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", spot,
               "--unshare-all", "--die-with-parent", sys.executable, "-c", code]
    proc = subprocess.Popen(command, preexec_fn=group.join, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    if proc.stdout.readline().strip() == "ready":
        return proc, ""
    proc.wait(timeout=10)
    return None, f"exit {proc.returncode}: {proc.stderr.read()[-1000:]}"


@needs_cgroups
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_close_returns_once_the_sandbox_is_gone_not_while_the_kernel_still_tears_it_down():
    """Red team round 30: a killed sandbox's exit can take seconds of kernel time on the lane's
    cores (a million files in its tmpfs: 3.6 s, its processes in the group until done), and the
    lane went on after 0.5 s, into the next candidate's baseline. 400k files here (~1.4 s)."""
    for attempt in range(2):  # once in a full suite the sandbox died before it was ready
        group = ResourceGroup(2 << 30)
        dirs = list(group.dirs.values())
        proc, how = _flooded_sandbox(group, 400_000)
        if proc is None:
            group.close()
            assert attempt == 0, f"the flooded sandbox died twice before it was ready ({how})"
            print(f"the flooded sandbox died before it was ready ({how}): once more")
            continue
        try:
            os.killpg(proc.pid, signal.SIGKILL)
            group.kill()
            proc.wait(timeout=10)
        finally:
            group.close()
        assert not any(d.exists() for d in dirs)  # removed: nothing of the sandbox was left in them
        return


@needs_cgroups
def test_kill_reaches_what_left_the_process_group():
    """A process in a new session escapes killpg; it does not leave its cgroup."""
    group = ResourceGroup(512 << 20)
    try:
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
            import os, sys, time
            if os.fork() == 0:
                os.setsid()
                time.sleep(600)
            print("ready", flush=True)
            time.sleep(600)
        """)], preexec_fn=group.join, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        procs = next(iter(group.dirs.values())) / "cgroup.procs"
        assert len(procs.read_text().split()) == 2
        group.kill()
        proc.wait(timeout=10)
        for _ in range(200):
            if not procs.read_text().split():
                break
            os.sched_yield()
        assert not procs.read_text().split()
    finally:
        group.close()
    assert not any(d.exists() for d in group.dirs.values())


def test_describe_says_none_where_nothing_is_writable(monkeypatch, capsys):
    monkeypatch.setattr(resources, "placement", lambda: ("none", {}))
    assert describe() == "none"
    group = ResourceGroup(1 << 30, (0,))
    assert group.dirs == {} and group.procs == () and not group.oom_killed()
    group.join()  # nothing to join: the worker starts anyway
    group.close()
    line = resources.unavailable_line()
    assert line is not None and "limits=none" in line and "\n" not in line


def test_lanes_get_cores_of_their_own_while_there_are_enough(all_cores):
    cores = sorted(os.sched_getaffinity(0), reverse=True)  # the first core is the machine's
    assert resources.lane_cores(0, 1) == (cores[0],)
    if len(cores) >= 2:
        assert resources.lane_cores(1, 1) == (cores[1],)
        assert resources.lane_cores(0, 2) == tuple(sorted(cores[:2]))
    assert resources.lane_cores(len(cores), 1) == (cores[0],)  # more lanes than cores: share
