"""Stages: what `python -m warpk stage=...` runs. Each returns a dict of summary metrics.

A stage whose issue has not landed raises `StageUnavailable` with a one-line reason; it never
returns a made-up result.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from warpk.config import RunConfig

# stage -> what it needs before it can run
NOT_YET: dict[str, str] = {}


class StageUnavailable(RuntimeError):
    """The stage exists in the design but is not built yet."""


def check_available(stage: str) -> None:
    """Raise StageUnavailable, with what it waits for, if `stage` is not built yet."""
    if stage in NOT_YET:
        raise StageUnavailable(f"stage={stage} is not available yet: {NOT_YET[stage]}")


# stage -> "module:function"; imported only when the stage runs (training libraries are heavy)
RUNNERS = {
    "evaluate": "warpk.stages.evaluate:run_evaluate",
    "train": "warpk.stages.train:run_train",
    "runtime": "warpk.stages.runtime:run_runtime",
    "hrl": "warpk.stages.hrl:run_hrl",
    "report": "warpk.stages.report:run_report",
}


# stage -> the summary key `python -m warpk` returns, for Hydra's sweepers (Optuna, Nevergrad):
# higher is better for every one; summary.json holds the whole summary.
OBJECTIVES = {
    "evaluate": "correct_rate",
    "train": "correct_rate",  # held-out (train.heldout_eval)
    "runtime": "ppo_energy_saving_vs_best_static",
    "hrl": "m5_energy_saving_vs_m4",
    "report": None,
}


def objective(stage: str, summary: dict) -> float:
    """The stage's objective from its summary; NaN where the run has none (a report, a training
    run without its held-out evaluation, a suite with no candidate)."""
    key = OBJECTIVES[stage]
    value = summary.get(key) if key else None
    return float(value) if isinstance(value, int | float) else float("nan")


def prepare_tasks(config: RunConfig) -> None:
    """tasks=synthetic: generate the settings' folder once (reused from the cache after), with
    the execution filter run in this process (warpk.evaluator.inprocess); one line says what
    was kept and dropped."""
    if config.tasks.source != "synthetic" or config.stage == "report":
        return
    from warpk.evaluator.inprocess import check_solution
    from warpk.synthetic.suite import ensure
    from warpk.tasks import synthetic_root, synthetic_settings

    settings = synthetic_settings(config.tasks)
    folder, m = ensure(settings, synthetic_root(config.tasks), check_solution)
    print(f"tasks=synthetic: {m.kept} tasks {m.splits} in {folder} (drawn {m.drawn}: {m.duplicates} "
          f"duplicates, {m.collisions} benchmark collisions dropped, {m.failed_check} failed the execution "
          f"filter; generated in {m.seconds} s)", flush=True)


def run_stage(config: RunConfig, run_dir: Path, log: Callable[[dict], None]) -> dict:
    """Run `config.stage`; returns its summary metrics."""
    check_available(config.stage)
    prepare_tasks(config)
    module, _, function = RUNNERS[config.stage].partition(":")
    return getattr(importlib.import_module(module), function)(config, run_dir, log)
