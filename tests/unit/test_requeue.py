"""The requeue at a SLURM time limit survives SLURM killing the `scontrol requeue` that asked for it."""

import signal
import subprocess

import pytest
from submitit.slurm import slurm

from warpk.requeue import tolerate_requeue_kill


def _scontrol_ending(returncode: int):
    def check_call(cmd, timeout=None):
        raise subprocess.CalledProcessError(returncode, cmd)

    return check_call


@pytest.fixture
def in_slurm_job(monkeypatch):
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setattr(slurm.SlurmJobEnvironment, "_requeue", slurm.SlurmJobEnvironment._requeue)  # restored
    tolerate_requeue_kill()
    tolerate_requeue_kill()  # idempotent: one wrapper, not two


def test_scontrol_killed_by_sigterm_counts_as_requeued(in_slurm_job, monkeypatch, caplog):
    monkeypatch.setattr(slurm.subprocess, "check_call", _scontrol_ending(-signal.SIGTERM))
    slurm.SlurmJobEnvironment()._requeue(0)  # does not raise: the job's result is not this error
    assert "scontrol requeue 77 was killed" in caplog.text


def test_scontrol_failing_otherwise_still_fails(in_slurm_job, monkeypatch):
    monkeypatch.setattr(slurm.subprocess, "check_call", _scontrol_ending(1))
    with pytest.raises(subprocess.CalledProcessError):
        slurm.SlurmJobEnvironment()._requeue(0)


def test_outside_a_slurm_job_submitit_is_left_alone(monkeypatch):
    monkeypatch.delenv("SUBMITIT_EXECUTOR", raising=False)
    before = slurm.SlurmJobEnvironment._requeue
    tolerate_requeue_kill()
    assert slurm.SlurmJobEnvironment._requeue is before
