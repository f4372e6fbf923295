"""KernelBench-format tasks: find problem files and their candidate solutions, read their metadata.

A problem file defines `Model`, `get_inputs()`, `get_init_inputs()` and module-level shape
constants (KernelBench's convention: the GPU-sized shape). Our bundled problems add plain-literal
metadata that this module reads with `ast.literal_eval`, never by executing the file:

    SHAPES = {"cpu": {"batch_size": 128, "dim": 1024}}   # overrides of the constants
    SPLIT = "train"                                      # or "heldout"
    KIND = "single_op"                                   # or "fusion"

Bundled layout: kernelbench/problems/<name>.py and kernelbench/solutions/<name>/*.py.

Non-goals: no torch import (the evaluator's workers execute the files, not this process).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from warpk.config import TasksConfig

BUNDLED_ROOT = Path(__file__).resolve().parents[1] / "kernelbench"


class TaskError(ValueError):
    """A task file or suite that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Task:
    task_id: str  # e.g. "bundled/01_softmax"
    name: str
    path: Path
    split: str  # train | heldout
    kind: str  # single_op | fusion | unknown
    shapes: dict  # shape name -> overrides of module constants; "gpu" is the file's own
    solutions: tuple[Path, ...] = ()

    def shape_overrides(self, shape: str) -> dict:
        """Module-constant overrides for `shape` ('cpu' or 'gpu'); {} means the file's own."""
        return dict(self.shapes.get(shape, {}))


def _literal(tree: ast.Module, name: str, default):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            try:
                return ast.literal_eval(node.value)
            except ValueError as err:
                raise TaskError(f"{name} must be a plain literal ({err})") from err
    return default


def load_task_file(path: Path, source: str = "file", solutions: tuple[Path, ...] = ()) -> Task:
    """Read one problem file's metadata; checks it has Model, get_inputs and get_init_inputs."""
    path = Path(path).resolve()
    if not path.is_file():
        raise TaskError(f"task file {path} does not exist")
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as err:
        raise TaskError(f"task file {path} does not parse: {err}") from err
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    missing = {"Model", "get_inputs", "get_init_inputs"} - defined
    if missing:
        raise TaskError(f"task file {path} lacks {', '.join(sorted(missing))}")
    try:
        shapes = _literal(tree, "SHAPES", {})
        split = _literal(tree, "SPLIT", "train")
        kind = _literal(tree, "KIND", "unknown")
    except TaskError as err:
        raise TaskError(f"task file {path}: {err}") from err
    return Task(
        task_id=f"{source}/{path.stem}",
        name=path.stem,
        path=path,
        split=split,
        kind=kind,
        shapes=shapes,
        solutions=tuple(sorted(solutions)),
    )


def load_suite(config: TasksConfig) -> list[Task]:
    """The tasks selected by `tasks=...`, sorted by name, with their bundled solutions."""
    if config.source == "kernelbench":
        raise TaskError(
            "tasks=kernelbench is not available yet: loading an upstream checkout lands with the "
            "evaluator issue (#3); use tasks=bundled or evaluate.task_file=..."
        )
    root = Path(config.root) if config.root else BUNDLED_ROOT
    problems = sorted((root / "problems").glob("*.py"))
    if not problems:
        raise TaskError(f"no problem files in {root / 'problems'}")
    tasks = [
        load_task_file(p, "bundled", tuple((root / "solutions" / p.stem).glob("*.py")))
        for p in problems
    ]
    names = {t.name for t in tasks}
    unknown = sorted(set(config.subset) - names)
    if unknown:
        raise TaskError(f"tasks.subset names unknown tasks {unknown}; known: {sorted(names)}")
    return [
        t
        for t in tasks
        if (not config.subset or t.name in config.subset)
        and (config.split == "all" or t.split == config.split)
    ]
