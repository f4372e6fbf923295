"""KernelBench-format tasks: find problem files and their candidate solutions, read their metadata.

A problem file defines `Model`, `get_inputs()`, `get_init_inputs()` and module-level shape
constants (KernelBench's convention: the GPU-sized shape). Our bundled problems add plain-literal
metadata that this module reads with `ast.literal_eval`, never by executing the file:

    SHAPES = {"cpu": {"batch_size": 128, "dim": 1024}}   # overrides of the constants
    SPLIT = "train"                                      # or "heldout" ("heldout_pair": synthetic)
    KIND = "single_op"                                   # or "fusion"

Bundled layout: kernelbench/problems/<name>.py and kernelbench/solutions/<name>/*.py; the
generated synthetic suite (tasks=synthetic, warpk.synthetic) is a folder of the same layout.

Non-goals: no torch import (the evaluator's workers execute the files, not this process).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from warpk.config import TasksConfig
from warpk.paths import BUNDLED_ROOT, default_cache_dir
from warpk.synthetic.suite import Settings, SyntheticError, folder_for


class TaskError(ValueError):
    """A task file or suite that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Task:
    task_id: str  # e.g. "bundled/01_softmax"
    name: str
    path: Path
    split: str  # train | heldout | heldout_pair (synthetic)
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
        solutions=tuple(solutions),
    )


def _candidates(candidates_dir: Path, name: str) -> tuple[Path, ...]:
    """Candidate files for task `name`: DIR/<name>/*.py, else DIR/<name>.py."""
    folder = candidates_dir / name
    if folder.is_dir():
        return tuple(sorted(folder.glob("*.py")))
    single = candidates_dir / f"{name}.py"
    return (single,) if single.is_file() else ()


def _order(path: Path) -> tuple[int, str]:
    """Upstream files are named <number>_<Name>.py: sort 2 before 10."""
    head = path.stem.split("_", 1)[0]
    return (int(head) if head.isdigit() else 10**9, path.stem)


def synthetic_settings(config: TasksConfig) -> Settings:
    """tasks=synthetic's generator settings; unknown vocabulary names are a TaskError."""
    settings = Settings(seed=config.seed, size=config.size, max_ops=config.max_ops,
                        vocabulary=tuple(config.vocabulary), heldout_share=config.heldout_share,
                        heldout_pairs=config.heldout_pairs)
    try:
        settings.ops()
    except SyntheticError as err:
        raise TaskError(str(err)) from err
    return settings


def synthetic_root(config: TasksConfig) -> Path:
    return Path(config.root) if config.root else default_cache_dir() / "synthetic"


def synthetic_folder(config: TasksConfig) -> Path:
    """Where tasks=synthetic's folder of these settings is (made by warpk.stages.prepare_tasks)."""
    return folder_for(synthetic_settings(config), synthetic_root(config))


def load_suite(config: TasksConfig, candidates_dir: str | None = None) -> list[Task]:
    """The tasks selected by `tasks=...`, in order, each with its candidate files.

    Args:
        config: the `tasks` group.
        candidates_dir: where candidates live (DIR/<task name>/*.py or DIR/<task name>.py);
            None uses the bundled solutions (and finds none for upstream KernelBench).
    """
    if config.source == "kernelbench":
        if not config.root:
            raise TaskError(
                "tasks=kernelbench needs tasks.root=PATH: the folder of an upstream "
                "KernelBench checkout that holds level1/ level2/ level3/"
            )
        folder = Path(config.root) / f"level{config.level}"
        source = f"kernelbench/L{config.level}"
        default_candidates = None
    elif config.source == "synthetic":
        root = synthetic_folder(config)
        if not (root / "manifest.json").is_file():
            raise TaskError(f"the synthetic tasks of tasks.seed={config.seed} tasks.size={config.size} "
                            f"are not generated in {root}: `python -m warpk tasks=synthetic ...` generates "
                            "them first (warpk.stages.prepare_tasks)")
        folder, source = root / "problems", "synthetic"
        default_candidates = root / "solutions"
    else:
        root = Path(config.root) if config.root else BUNDLED_ROOT
        folder, source = root / "problems", "bundled"
        default_candidates = root / "solutions"
    if not folder.is_dir():
        raise TaskError(f"no task folder {folder}")
    problems = sorted(folder.glob("*.py"), key=_order)
    if not problems:
        raise TaskError(f"no problem files in {folder}")
    where = Path(candidates_dir) if candidates_dir else default_candidates
    tasks = [load_task_file(p, source, _candidates(where, p.stem) if where else ()) for p in problems]
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
