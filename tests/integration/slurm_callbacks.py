"""Test-only Hydra callbacks for the slurm tests (not production code; loaded by `_target_`).

`SigkillOnJobStart` makes a job die the hardest way, SIGKILL from inside, before it writes
anything: no result pickle, no exception for submitit to report. Used as
`+hydra.callbacks.sigkill._target_=tests.integration.slurm_callbacks.SigkillOnJobStart`, which the
launching process (cwd = repo root) and the SLURM job (same cwd) can both import.
"""

import os
import signal

from hydra.experimental.callback import Callback


class SigkillOnJobStart(Callback):
    """SIGKILL the job process as it starts; only inside a SLURM job, never the launcher.

    In the launcher it shortens submitit's wait for the result file of a job SLURM says has ended
    (`Job._results_timeout_s`, 15 s for slow shared filesystems) to 2 s: the job here writes
    none, and the test's point is the FAILED verdict from `sacct`, not how long submitit waits.
    It also asks SLURM for the job's state every second instead of at 2, 4, 8, 16 s... after the
    submission (`InfoWatcher`'s back-off, capped at `delay_s`): the job dies within seconds, and
    the back-off found that out up to 8 s late.
    """

    def on_multirun_start(self, config, **kwargs) -> None:
        if not os.environ.get("SLURM_JOB_ID"):
            from submitit.core.core import Job
            from submitit.slurm.slurm import SlurmJob

            Job._results_timeout_s = 2
            SlurmJob.watcher._delay_s = 1

    def on_job_start(self, config, **kwargs) -> None:
        if os.environ.get("SLURM_JOB_ID"):
            os.kill(os.getpid(), signal.SIGKILL)
