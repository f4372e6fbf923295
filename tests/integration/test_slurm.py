"""Sweeps through a real SLURM controller: `hydra/launcher=slurm_local` -> sbatch -> slurmctld -> slurmd.

The session brings the one-node cluster of scripts/slurm_local.sh up itself when it can (root,
apt) and skips with the reason otherwise (tests/conftest.py, fixture `slurm_cluster`).
"""

import json
import time

import pytest

from tests.conftest import run_warpk
from warpk.tracking import read_offline_run

pytestmark = pytest.mark.slurm

SWEEP = (
    "-m",
    "stage=evaluate",
    "seed=11,22",
    "reward.ipw_blend=0.0,0.25",
    "hydra/launcher=slurm_local",
    "tasks.subset=[01_softmax]",
    "evaluate.timing_trials=3",
)


def test_seed_by_ipw_sweep_runs_as_a_slurm_array(tmp_path):
    t0 = time.monotonic()
    result = run_warpk(*SWEEP, f"hydra.sweep.dir={tmp_path}", timeout=120)
    elapsed_s = time.monotonic() - t0
    assert result.returncode == 0, result.stderr[-3000:]
    assert elapsed_s < 60, f"4-job sweep took {elapsed_s:.1f} s on the local cluster"
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
    # `sacct` (the script's stand-in), after submitit's 15 s grace for slow filesystems.
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
