"""Sweeps through a real SLURM controller: `hydra/launcher=slurm_local` -> sbatch -> slurmctld -> slurmd.

The session brings the one-node cluster of scripts/slurm_local.sh up itself when it can (root,
apt) and skips with the reason otherwise (tests/conftest.py, fixture `slurm_cluster`).
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_warpk
from warpk.tracking import read_offline_run

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")

# The array is the point here, not what a job measures: each job evaluates one candidate the
# static pre-filter rejects (one record, no sandboxed workers), so a job is `python -m warpk` and
# W&B offline, not a cold evaluator (15-28 s a job, two jobs at once on 2 cores). A measurement
# inside a SLURM job is asserted by the requeue test below (three records, each ok).
SWEEP = (
    "-m",
    "stage=evaluate",
    "seed=11,22",
    "reward.ipw_blend=0.0,0.25",
    "hydra/launcher=slurm_local",
    f"evaluate.task_file={REPO / 'kernelbench' / 'problems' / '01_softmax.py'}",
    f"evaluate.candidate_files=[{REPO / 'tests' / 'data' / 'softmax_no_modelnew.py'}]",
)


def test_seed_by_ipw_sweep_runs_as_a_slurm_array(tmp_path):
    t0 = time.monotonic()
    result = run_warpk(*SWEEP, f"hydra.sweep.dir={tmp_path}", timeout=120)
    elapsed_s = time.monotonic() - t0
    assert result.returncode == 0, result.stderr[-3000:]
    # one job array went through sbatch: submitit's sbatch script and one log dir per array task
    scripts = list((tmp_path / ".submitit").glob("*/*_submission.sh"))
    assert len(scripts) == 1 and "#SBATCH --array=0-3" in scripts[0].read_text()
    array_id = scripts[0].parent.name
    assert sorted(p.name for p in (tmp_path / ".submitit").glob(f"{array_id}_*")) == [
        f"{array_id}_{i}" for i in range(4)
    ]
    runs = []
    for i in range(4):
        summary = json.loads((tmp_path / str(i) / "summary.json").read_text())
        assert summary["n_candidates"] == 1, summary
        runs.append(read_offline_run(tmp_path / str(i) / "wandb"))
    assert runs[0]["group"] and {r["group"] for r in runs} == {runs[0]["group"]}
    points = {(r["config"]["seed"], r["config"]["reward"]["ipw_blend"]) for r in runs}
    assert points == {(11, 0.0), (11, 0.25), (22, 0.0), (22, 0.25)}
    print(f"4-job slurm sweep: {elapsed_s:.1f} s")


def test_job_killed_by_sigkill_is_reported_failed_not_hung(tmp_path):
    # The job SIGKILLs itself before writing a result; the launcher learns it FAILED only through
    # `sacct` (the script's stand-in), after submitit's grace for slow filesystems (15 s; the
    # callback cuts it to 2 s in the launcher: a killed job writes no result file however long it waits).
    result = run_warpk(
        "-m",
        "seed=1",
        "hydra/launcher=slurm_local",
        "tasks.subset=[01_softmax]",
        "+hydra.callbacks.sigkill._target_=tests.integration.slurm_callbacks.SigkillOnJobStart",
        f"hydra.sweep.dir={tmp_path}",
        timeout=90,  # a hang raises TimeoutExpired here
    )
    assert result.returncode != 0
    assert "has not produced any output (state: FAILED)" in result.stderr, result.stderr[-3000:]
    assert not (tmp_path / "0" / "summary.json").exists()


def _wait_for(predicate, timeout_s: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"never saw {what}; launcher rc={proc.returncode}\n{err[-3000:]}")
        time.sleep(0.2)


def _stepds_of(job_id: str) -> list[str]:
    """The live slurmstepd processes of one job (their titles read `slurmstepd: [<id>.<step>]`)."""
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if line.startswith(f"slurmstepd: [{job_id}.")]


def _daemon_log_lines(job_id: str, limit: int = 40) -> str:
    lines = []
    for name in ("slurmctld.log", "slurmd.log"):
        path = Path("/var/log/slurm") / name
        if path.exists():
            hits = [x for x in path.read_text(errors="replace").splitlines() if f"{job_id}" in x]
            lines += [f"{name}: {x}" for x in hits[-limit:]]
    return "\n".join(lines)


def test_job_at_its_time_limit_is_requeued_and_resumes_from_its_run_dir(tmp_path):
    # SLURM's time-limit warning is USR2 sent `signal_delay_s` before the limit; with a 5-min limit
    # submitit counts any USR2 as a timeout (its "guaranteed walltime" is negative below 10 min), so
    # sending it early is the time-limit path without waiting minutes for the scheduler's clock.
    records = tmp_path / "0" / "records.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "warpk",
            "-m",
            "seed=5",
            "hydra/launcher=slurm_local",
            "hydra.launcher.max_num_timeout=1",  # one requeue after a timeout
            "tasks.subset=[01_softmax,02_layer_norm,04_rms_norm]",
            "evaluate.timing_batches=15",  # long enough that the signal lands before the last task
            "evaluate.result_cache=false",
            "logger=disabled",
            f"hydra.sweep.dir={tmp_path}",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(lambda: records.exists() and records.read_text().count("\n") >= 1, 60, "a first record", proc)
    first = records.read_text().splitlines()[0]
    job_id = next(p.name for p in (tmp_path / ".submitit").iterdir() if p.name.isdigit())
    subprocess.run(["scancel", "--signal=USR2", job_id], check=True, timeout=30)

    def state() -> str:
        cmd = ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        return out.stdout.strip()

    seen: list[str] = []  # the job's states as polled, for the failure message

    def state_is(*wanted: str) -> bool:
        now = state()
        if not seen or seen[-1] != now:
            seen.append(now)
        return now in wanted

    _wait_for(lambda: state_is("PENDING"), 30, "the job requeued (PENDING)", proc)
    # the first attempt's step may still be dying (srun waits up to 32 s for it); a relaunch of the
    # same job id while its old slurmstepd lives can fail the job, so let the node clean up first
    _wait_for(lambda: not _stepds_of(job_id), 60, f"job {job_id}'s old steps gone", proc)
    # A requeued job waits ~2 min (BeginTime) before it may start again; shorten the wait, but not to
    # zero: slurmd revoked the first attempt's credential when it killed it, and a relaunch within the
    # same second carries a credential no newer than the revocation ("Killing non-startable batch
    # JobId=N: Job credential revoked" in slurmctld.log, and the job ends FAILED). `starttime=now+2`
    # would wait for the next scheduling pass (~30 s); an update to `now` schedules at once.
    time.sleep(2)
    subprocess.run(["scontrol", "update", f"jobid={job_id}", "starttime=now"], check=True, timeout=30)
    deadline = time.monotonic() + 90  # the job's own end, whatever the launcher concluded meanwhile
    while not state_is(*FINAL_STATES) and time.monotonic() < deadline:
        time.sleep(0.2)
    out, err = proc.communicate(timeout=90)
    job_dir = tmp_path / ".submitit" / job_id
    log = "".join(p.read_text() for p in sorted(job_dir.glob("*_log.*")))
    assert proc.returncode == 0, (
        f"job states {seen}\n--- job log\n{log[-3000:]}\n--- launcher\n{err[-3000:]}"
        f"\n--- slurm daemons on job {job_id}\n{_daemon_log_lines(job_id)}"
    )
    assert "Requeued job" in log
    assert "resumed after requeue:" in log
    kept = int(log.split("resumed after requeue: ", 1)[1].split(" ", 1)[0])
    lines = records.read_text().splitlines()
    assert kept >= 1 and lines[0] == first  # the first attempt's measurement, not a new one
    got = [json.loads(x) for x in lines]
    # killed workers' items redone; a failure names what each record said, and the job's log
    assert [r["status"] for r in got] == ["ok"] * 3, (
        f"{[(r['status'], r.get('error')) for r in got]}\n--- job log\n{log[-3000:]}"
    )
    assert json.loads((tmp_path / "0" / "summary.json").read_text())["n_candidates"] == 3
