"""Harness failures end to end, as a user runs `python -m warpk`: one line, exit status 2, nothing
scored. Measured before the fix: a task whose reference raised at import gave every candidate
`runtime_error` and the run exited 0; an interpreter the sandbox could not start (a venv reached
through a symlink) made every candidate `crashed` and the run exited 0, because the preflight ran
`true` with / mounted instead of the worker."""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_warpk
from tests.unit.test_sandbox import needs_bwrap

SOFTMAX = REPO / "kernelbench" / "problems" / "01_softmax.py"
HONEST = REPO / "kernelbench" / "solutions" / "01_softmax" / "torch_fused.py"


def _evaluate(run_dir: Path, task: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    args = [f"hydra.run.dir={run_dir}", "logger=disabled", "evaluate.run_timeout_s=10",
            "evaluate.timing_batches=3", "evaluate.result_cache=false", f"evaluate.task_file={task}",
            f"evaluate.candidate_files=[{HONEST},{HONEST}]", *extra]
    if env is None:
        return run_warpk(*args)
    return subprocess.run([sys.executable, "-m", "warpk", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env=env)


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr[-2000:]
    assert lines[0].startswith("warpk: "), lines[0]
    return lines[0]


def _scored(run_dir: Path) -> list[str]:
    records = run_dir / "records.jsonl"
    return records.read_text().splitlines() if records.exists() else []


@pytest.mark.slow
def test_a_task_whose_reference_raises_at_import_stops_the_run(tmp_path):
    """The trusted worker answers harness_error (its reference cannot load the task): the run
    stops at the first candidate, names the task, and scores nothing."""
    task = tmp_path / "broken_softmax.py"
    task.write_text(SOFTMAX.read_text() + '\nraise RuntimeError("this task is broken at import")\n')
    result = _evaluate(tmp_path / "run", task)
    line = _one_line(result.stderr)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "broken_softmax" in line and "this task is broken at import" in line
    assert not _scored(tmp_path / "run"), "a harness failure was scored as a candidate's verdict"
    assert not (tmp_path / "run" / "summary.json").exists()


@needs_bwrap
def test_a_sandbox_that_cannot_start_the_worker_refuses_before_scoring(tmp_path):
    """A bubblewrap that makes its namespaces (runs `true`) but cannot exec this interpreter
    inside them, as with the symlinked venv: the preflight runs the worker's own imports in the
    real command line, so the run stops there with one line and exit status 2."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text(
        "#!/bin/sh\n"
        'for last in "$@"; do :; done\n'
        f'if [ "$last" = true ]; then exec {shutil.which("bwrap")} "$@"; fi\n'
        'echo "bwrap: execvp /scratch/venv/bin/python: No such file or directory" >&2\n'
        "exit 1\n"
    )
    (fake / "bwrap").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    result = _evaluate(tmp_path / "run", SOFTMAX, env=env)
    line = _one_line(result.stderr)
    assert result.returncode == 2
    assert "the worker cannot start in the bwrap sandbox" in line and "No such file or directory" in line
    assert not _scored(tmp_path / "run")


@pytest.mark.slow
@needs_bwrap
def test_a_venv_reached_through_a_symlink_evaluates_in_the_sandbox(tmp_path):
    """The interpreter is run by the symlink's path (sys.executable unresolved): the sandbox
    mounts the venv there too, the preflight passes and an honest candidate is `ok`."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("needs the tests to run from a venv")
    link = tmp_path / "venv-link"
    link.symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
    python = link / "bin" / Path(sys.executable).name
    script = (
        "import sys\n"
        f"assert (sys.executable, sys.prefix) == ({str(python)!r}, {str(link)!r})\n"
        "from warpk.evaluator.sandbox import resolve_sandbox\n"
        "assert resolve_sandbox('bwrap') == 'bwrap'\n"
        "from tests.unit.test_sandbox import _measure, REPO\n"
        "honest = (REPO / 'kernelbench/solutions/01_softmax/torch_fused.py').read_text()\n"
        "record = _measure(honest)\n"
        "print(record.status, record.sandbox, record.error)\n"
    )
    done = subprocess.run([str(python), "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[:2] == ["ok", "bwrap"], done.stdout


@pytest.mark.slow
def test_a_run_whose_lane_is_held_by_a_stopped_run_stops_in_one_line(tmp_path):
    """Another evaluator on this machine holds the lane locks of every core here (warpk.evaluator.
    lane_lock) and is stopped (SIGSTOP): the run waits its limit (shortened to 1 s), then stops
    with one line and exit status 2, nothing scored. A holder that lets go is waited for
    (tests/unit/test_lane_lock.py)."""
    cores = tuple(sorted(os.sched_getaffinity(0)))
    # the locks in a folder of this test's: its stopped holder must not stop the other xdist
    # worker's runs (it did, once, after 60 s: 2026-12-06)
    env = {**os.environ, "WARPK_TEST_LANE_LOCK_BASE": str(tmp_path), "WARPK_TEST_LANE_LOCK_STOPPED_S": "1"}
    holder = subprocess.Popen(
        [sys.executable, "-c", "import os, signal; from warpk.evaluator.lane_lock import LaneLock\n"
         f"with LaneLock({cores!r}).held():\n"
         "    print('held', flush=True); os.kill(os.getpid(), signal.SIGSTOP)"],
        cwd=REPO, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        result = _evaluate(tmp_path / "run", SOFTMAX, env=env)
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait()
    line = _one_line(result.stderr)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"pid {holder.pid}) holds {tmp_path}/warpk-timing-" in line and "stopped for 1 s" in line, line
    assert not _scored(tmp_path / "run")
