"""Which process under a sandbox's root is the harness the trusted side reads and takes fds from.

A worker forks `ldconfig -p` at import (ctypes.util.find_library did, 2026-12-07), and between
its fork and exec the child carries the worker's command line. The lookup took the highest
matching pid, the child, gone a moment later: on a busy core honest workers came out `crashed`
("the worker's outputs cannot be read ... No such process")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from warpk.evaluator.freeze import process_tree
from warpk.evaluator.remote import worker_pid

# the fake harness forks a child that keeps its command line (no exec), then both wait
FAKE_HARNESS = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n    os._exit(0)\ntime.sleep(60)\n"


def _fake_worker(tmp_path: Path) -> subprocess.Popen:
    package = tmp_path / "warpk" / "evaluator"
    package.mkdir(parents=True)
    (tmp_path / "warpk" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "untrusted.py").write_text(FAKE_HARNESS)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.Popen([sys.executable, "-m", "warpk.evaluator.untrusted"], env=env,
                            cwd=tmp_path, start_new_session=True)


def test_a_child_forked_by_the_harness_is_not_taken_for_it(tmp_path):
    proc = _fake_worker(tmp_path)
    try:
        deadline = time.monotonic() + 30
        while len(process_tree(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        (child,) = process_tree(proc.pid) - {proc.pid}
        assert Path(f"/proc/{child}/cmdline").read_bytes() == Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert worker_pid(proc.pid) == proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_workers_imports_start_no_process():
    """Nothing a worker imports before it is found may fork (the lookup's race, above)."""
    probe = ("import sys\nspawned = []\n"
             "sys.addaudithook(lambda event, args: spawned.append(event) if event in "
             "('subprocess.Popen', 'os.fork', 'os.posix_spawn', 'os.system') else None)\n"
             "import warpk.evaluator.untrusted\nprint(spawned)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_worker_loads_none_of_the_evaluators_front():
    """Every sandboxed worker imports warpk.evaluator.untrusted: the package's front (the Evaluator,
    its config, cache, pre-filter and tasks) stays out of it (0.17 s of CPU a worker on this VM)."""
    probe = ("import sys\nimport warpk.evaluator.untrusted\n"
             "print(sorted(m for m in sys.modules if m.startswith('warpk')))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    loaded = set(eval(done.stdout))  # noqa: S307 - our own probe's list
    assert not loaded & {"warpk.evaluator.api", "warpk.config", "warpk.tasks", "warpk.records",
                         "warpk.evaluator.cache", "warpk.evaluator.static"}, loaded
    from warpk.evaluator import EvalItem, Evaluator  # the front, on first use

    assert Evaluator.__module__ == EvalItem.__module__ == "warpk.evaluator.api"
