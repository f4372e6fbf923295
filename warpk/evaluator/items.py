"""What `stage=evaluate` evaluates: the (task, candidate) items of a run, which of them this device
can run, and what a requeued attempt keeps of its predecessor's records.

- `evaluate.task_file` + `evaluate.candidate_files`: exactly those files, in that order;
- otherwise the `tasks` suite with each task's bundled solutions (kernelbench/solutions/).

Non-goals: no evaluation here (warpk.evaluator.Evaluator).
"""

from __future__ import annotations

from pathlib import Path

from warpk.config import RunConfig
from warpk.evaluator import EvalItem
from warpk.evaluator.static import candidate_backend
from warpk.records import EvalRecord, kept_prefix
from warpk.tasks import TaskError, load_suite, load_task_file


def collect_items(config: RunConfig) -> list[EvalItem]:
    """The (task, candidate) pairs this run evaluates, in a stable order."""
    ev = config.evaluate
    if ev.task_file:
        task = load_task_file(Path(ev.task_file))
        paths = [Path(p) for p in ev.candidate_files] or list(task.solutions)
        if not paths:
            raise TaskError(f"evaluate.task_file={ev.task_file} given without evaluate.candidate_files")
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise TaskError(f"evaluate.candidate_files: no such file(s): {', '.join(missing)}")
        return [EvalItem(task, p.read_text(), p.name) for p in paths]
    tasks = load_suite(config.tasks, ev.candidates_dir)
    if not tasks:
        raise TaskError(
            f"no tasks selected (tasks.split={config.tasks.split}, tasks.subset={config.tasks.subset})"
        )
    items = [EvalItem(t, p.read_text(), p.name) for t in tasks for p in t.solutions]
    if not items:
        raise TaskError(
            "the selected tasks have no candidates"
            + ("" if ev.candidates_dir else "; give evaluate.candidates_dir=DIR")
        )
    return items


def runnable(items: list[EvalItem], device: str) -> tuple[list[EvalItem], list[EvalItem]]:
    """(items this device can run, items it cannot): CUDA and Triton candidates need a GPU."""
    if device == "cuda":
        return items, []
    keep = [i for i in items if candidate_backend(i.candidate_source) == "torch"]
    return keep, [i for i in items if candidate_backend(i.candidate_source) != "torch"]


# SLURM signals every process of the job step at a time limit or preemption, the sandbox workers
# too: their last records say crashed/timeout because of the requeue, not the candidate.
REDO_ON_RESUME = ("crashed", "timeout")


def previous_records(records_path: Path, items: list[EvalItem]) -> list[EvalRecord]:
    """What an earlier attempt of this job wrote for a prefix of `items`, up to the first record a
    requeue may have caused (crashed, timeout) or a torn last line: those items run again."""
    return kept_prefix(records_path, [(i.task.task_id, i.candidate) for i in items], REDO_ON_RESUME)
