"""A harness failure is the harness's: it stops the evaluation, it is never a candidate's record.

What the evaluator itself gets wrong (the trusted worker answers "harness_error" because the
task's reference cannot be loaded, built or run; the trusted worker dies; an exception escapes a
lane) leaves `evaluate_many` as HarnessFailure, one line naming the task; the records that came
before it were emitted, the failed item's is neither emitted nor cached, so it can never become
a reward or a summary entry. The GRPO reward path lets it through to `python -m warpk` (exit 2).

The sandbox preflight runs the real worker entry, by the interpreter path this process uses, in
the real sandbox command line: a venv reached through a symlink is mounted at that path too.
"""

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.unit.test_sandbox import SOFTMAX, _hardware
from warpk.config import EvaluateConfig
from warpk.evaluator import EvalItem, Evaluator, HarnessFailure, mounts, sandbox, trusted_process
from warpk.evaluator import lane as lane_module
from warpk.evaluator import protocol as wire
from warpk.evaluator.errors import HARNESS_ERROR
from warpk.tasks import load_task_file

HONEST = (REPO / "kernelbench" / "solutions" / "01_softmax" / "torch_fused.py").read_text()


def _evaluate_three(tmp_path, sandbox_mode: str = "process"):
    """Three different candidates for 01_softmax through evaluate_many, with a result cache:
    (records seen by on_record, the raised HarnessFailure, the cache's result files)."""
    protocol = EvaluateConfig(result_cache=True, cache_dir=str(tmp_path / "cache"), timing_batches=3,
                              batch_target_ms=2.0, run_timeout_s=10.0, memory_limit_gb=2.0,
                              sandbox=sandbox_mode)
    evaluator = Evaluator(protocol, _hardware("cpu"))
    task = load_task_file(SOFTMAX)
    items = [EvalItem(task, HONEST + f"\n# variant {i}\n", f"cand{i}.py") for i in range(3)]
    seen = []
    with pytest.raises(HarnessFailure) as failure:
        evaluator.evaluate_many(items, on_record=lambda i, r: seen.append((i, r.status)))
    results = sorted((tmp_path / "cache").rglob("*.json"))
    return seen, failure.value, [json.loads(p.read_text()) for p in results]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["harness_error", "exception"])
def test_a_harness_failure_stops_the_batch_and_is_never_a_record(how, tmp_path, monkeypatch):
    """The first candidate gets a verdict; on the second the trusted worker answers
    harness_error (the contract with warpk.evaluator.trusted) or the lane raises: the batch
    stops there, that item is neither emitted nor cached, the third never runs."""
    calls = []

    def wait(self, worker, backstop_s):
        calls.append(1)
        if len(calls) == 1:
            return wire.Measurement("incorrect", "max abs err 1.0 in trial 0")
        if how == "exception":
            raise RuntimeError("boom in the lane")
        return wire.Measurement(HARNESS_ERROR, "the task's reference raised at import: NameError: x")

    monkeypatch.setattr(lane_module.Lane, "_wait", wait)
    # the fake _wait leaves the trusted worker inside the request it was sent, so it never sees
    # its socket close: the lane's close() would wait QUIT_WAIT_S (10 s) before its SIGKILL
    monkeypatch.setattr(trusted_process, "QUIT_WAIT_S", 0.5)
    seen, failure, cached = _evaluate_three(tmp_path)
    assert seen == [(0, "incorrect")] and len(calls) == 2
    line = str(failure)
    assert "\n" not in line and "task file/01_softmax (candidate cand1.py)" in line
    assert ("RuntimeError: boom in the lane" if how == "exception" else "reference raised at import") in line
    assert [c["status"] for c in cached] == ["incorrect"]  # the failed item is not cached


def test_the_trusted_worker_dying_is_a_harness_failure_not_a_crash(tmp_path):
    """In `process` mode a candidate can kill the trusted worker (the sandbox's threat model
    says so): the lane cannot say what the candidate did, so the run stops (HarnessFailure) with
    the trusted worker's fate instead of scoring `crashed`. Only the trusted worker of this test's
    own evaluator is killed (same parent process)."""
    killer = (
        "import os, signal\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        cmd = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
        "        ppid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])\n"
        "    except (OSError, ValueError):\n"
        "        continue\n"
        "    if b'warpk.evaluator.trusted' in cmd and ppid == os.getppid():\n"
        "        os.kill(int(pid), signal.SIGKILL)\n"
    )
    protocol = EvaluateConfig(result_cache=False, sandbox="process", run_timeout_s=10.0,
                              memory_limit_gb=2.0)
    evaluator = Evaluator(protocol, _hardware("cpu"))
    fate = r"task file/01_softmax .*the trusted worker failed .*killed by SIGKILL"
    with pytest.raises(HarnessFailure, match=fate):
        evaluator.measure(EvalItem(load_task_file(SOFTMAX), killer + HONEST, "killer.py"))  # no pre-filter


# --- the reward path ------------------------------------------------------------------------------
def test_a_harness_failure_goes_through_the_reward_functions_untouched():
    """trl calls the reward functions; a HarnessFailure inside evaluate_many must reach
    `python -m warpk` (one line, exit 2), never become a reward."""
    from warpk.config import RewardConfig
    from warpk.rewards.adapters import reward_functions
    from warpk.trainers.source import EvaluatorSource

    class Failing:
        def evaluate_many(self, items):
            raise HarnessFailure("the evaluator failed on task file/01_softmax: reference broken")

    task = load_task_file(SOFTMAX)
    funcs, _ = reward_functions(EvaluatorSource(Failing(), [task]), RewardConfig())
    answer = "```python\nclass ModelNew:\n    pass\n```"
    with pytest.raises(HarnessFailure, match="reference broken"):
        funcs[0](prompts=["p"], completions=[answer], task_id=[task.task_id])


# --- the preflight ------------------------------------------------------------------------------
def _symlinked_venv(tmp_path: Path) -> tuple[Path, Path]:
    """(a symlink to this venv, the python inside it, run by the symlink's path)."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("needs the tests to run from a venv")
    link = tmp_path / "venv-link"
    link.symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
    return link, link / "bin" / Path(sys.executable).name


def test_the_sandbox_mounts_a_symlinked_venv_where_its_python_is_run(tmp_path, monkeypatch):
    link, python = _symlinked_venv(tmp_path)
    monkeypatch.setattr(sandbox.sys, "prefix", str(link))
    monkeypatch.setattr(sandbox.sys, "executable", str(python))
    cmd = " ".join(sandbox.bwrap_command(None, None))
    assert f"--ro-bind {link.resolve()} {link} " in cmd  # its python finds pyvenv.cfg beside it


def test_a_script_run_from_tmp_never_mounts_the_hosts_tmp(monkeypatch):
    """`python /tmp/probe.py` puts /tmp on sys.path: mounted, it would show the sandbox every
    other run's files and cover its own /tmp, where its working dir is."""
    monkeypatch.setattr(sandbox.sys, "path", ["/tmp", "/", *sys.path])
    cmd = " ".join(sandbox.bwrap_command(None, None))
    assert "--ro-bind /tmp /tmp" not in cmd and "--ro-bind / /" not in cmd
    tmpfs = (f"bwrap --size {sandbox.SCRATCH_LIMIT_BYTES} --perms 1777 --tmpfs /tmp --perms 1777 "
             f"--dir {sandbox.SANDBOX_HOME} ")
    assert cmd.startswith(tmpfs)


def test_an_interpreter_outside_every_mount_is_mounted_as_that_file(monkeypatch):
    monkeypatch.setattr(sandbox.sys, "prefix", "/usr")
    monkeypatch.setattr(sandbox.sys, "executable", "/srv/tools/python3")
    assert mounts.interpreter_binds(["/usr", "/srv/tools"]) == []
    assert mounts.interpreter_binds(["/usr", "/srv/other"]) == ["--ro-bind", "/srv/tools/python3",
                                                                "/srv/tools/python3"]


def test_a_venv_whose_symlink_resolves_to_a_private_folder_is_not_bound(tmp_path, monkeypatch):
    """Red team round 25: a venv at $HOME reached through /home/u -> /nfs/u mounted all of ~."""
    home = tmp_path / "nfs-home"
    home.mkdir()
    link = tmp_path / "home-link"
    link.symlink_to(home, target_is_directory=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(sandbox.sys, "prefix", str(link))
    monkeypatch.setattr(sandbox.sys, "executable", "/usr/bin/python3")
    assert mounts.interpreter_binds(["/usr"]) == []


def test_a_preflight_that_cannot_start_the_worker_refuses_in_one_line(monkeypatch):
    monkeypatch.setattr(sandbox.sys, "executable", "/nonexistent/venv/bin/python")
    sandbox.worker_start_failure.cache_clear()
    sandbox._resolve_sandbox.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxUnavailable) as refused:
            sandbox.resolve_sandbox("process")
        line = str(refused.value)
        assert "\n" not in line and "/nonexistent/venv/bin/python" in line
        assert line.startswith("evaluate.sandbox=process: the worker cannot start")
        assert "No such file or directory" in line
    finally:
        sandbox.worker_start_failure.cache_clear()
        sandbox._resolve_sandbox.cache_clear()
