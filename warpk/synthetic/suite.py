"""`tasks=synthetic`: a folder of generated tasks in the bundled layout (problems/<name>.py,
solutions/<name>/fused.py) and its manifest, built from the seed and kept in the cache.

`build(settings, folder)`: draw chains until `size` are kept; a chain is dropped when its
normalised graph was drawn before (a duplicate), when it is a benchmark problem
(warpk.synthetic.contamination: a collision), or when the generator's solution fails the
execution filter (warpk.synthetic.check); every drop is counted in manifest.json. Splits:
`heldout_pairs` adjacent op pairs are reserved and every chain holding one is `heldout_pair`
(the train split holds none of them); of the rest a `heldout_share` is `heldout` (by
composition: each normalised chain is in one split only) and the others `train`.
`ensure(settings, root, check)` reuses a folder built from the same settings and generator
(`folder_for`). The filter is passed in (`check(problem, solution, seed)`: None or why not;
warpk.evaluator.inprocess.check_solution), this package sitting below the evaluator.

Non-goals: no task loading (warpk.tasks reads the folder like the bundled suite).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from warpk.synthetic.contamination import benchmark_index, collision
from warpk.synthetic.generate import draw, graph_key, render_problem, render_solution
from warpk.synthetic.ops import GROUPS, OPS

GENERATOR_VERSION = 2  # bump when a change to ops or rendering changes what a seed gives
MAX_DRAWS_PER_TASK = 50


class SyntheticError(ValueError):
    """The settings cannot give the tasks asked for; the message says what to change."""


@dataclass(frozen=True)
class Settings:
    """conf/tasks/synthetic.yaml's knobs (TasksConfig's synthetic fields)."""

    seed: int = 0
    size: int = 1000
    max_ops: int = 5
    vocabulary: tuple[str, ...] = ()  # op names or group names (ops.GROUPS); () = all
    heldout_share: float = 0.2
    heldout_pairs: int = 24

    def ops(self) -> tuple[str, ...]:
        names: list[str] = []
        for item in self.vocabulary or tuple(OPS):
            group = GROUPS.get(item, (item,))
            unknown = [n for n in group if n not in OPS]
            if unknown:
                raise SyntheticError(f"tasks.vocabulary names unknown ops {unknown}; known: ops "
                                     f"{sorted(OPS)} and groups {sorted(GROUPS)}")
            names += [n for n in group if n not in names]
        return tuple(names)

    def digest(self) -> str:
        described = {**asdict(self), "vocabulary": list(self.ops()), "v": GENERATOR_VERSION}
        text = json.dumps(described, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Manifest:
    settings: dict
    kept: int = 0
    drawn: int = 0
    duplicates: int = 0
    collisions: int = 0
    collided_with: dict = field(default_factory=dict)
    failed_check: int = 0
    failures: list = field(default_factory=list)  # the first reasons, with their chains
    splits: dict = field(default_factory=dict)
    reserved_pairs: list = field(default_factory=list)
    seconds: float = 0.0


def reserved_pairs(rng: random.Random, ops: tuple[str, ...], count: int) -> list[tuple[str, str]]:
    """`count` adjacent op pairs held out of training (ops that end a chain only second)."""
    pairs = [(a, b) for a in ops for b in ops if a != b and not OPS[a].last]
    return sorted(rng.sample(pairs, min(count, len(pairs))))


def _holds(key: tuple[str, ...], pairs: list[tuple[str, str]]) -> bool:
    return any(pair in pairs for pair in zip(key, key[1:], strict=False))


Check = Callable[[str, str, int], str | None]


def build(settings: Settings, folder: Path, check: Check, progress=None) -> Manifest:
    """Generate `settings.size` tasks into `folder` (made here; must not exist)."""
    start = time.perf_counter()
    ops = settings.ops()
    rng = random.Random(settings.seed)
    pairs = reserved_pairs(rng, ops, settings.heldout_pairs)
    index = benchmark_index()
    described = {**asdict(settings), "vocabulary": list(ops), "generator": GENERATOR_VERSION}
    manifest = Manifest(settings=described, reserved_pairs=[list(p) for p in pairs])
    seen: set[tuple[str, ...]] = set()
    splits: Counter = Counter()
    collided: Counter = Counter()
    (folder / "problems").mkdir(parents=True)
    (folder / "solutions").mkdir()
    while manifest.kept < settings.size:
        if manifest.drawn >= MAX_DRAWS_PER_TASK * settings.size:
            raise SyntheticError(
                f"tasks.size={settings.size}: only {manifest.kept} distinct valid chains in "
                f"{manifest.drawn} draws ({manifest.duplicates} duplicates, {manifest.collisions} benchmark "
                f"problems); widen tasks.vocabulary or raise tasks.max_ops")
        manifest.drawn += 1
        spec = draw(rng, ops, settings.max_ops)
        key = graph_key(spec.ops)
        heldout_draw = rng.random()
        if key in seen:
            manifest.duplicates += 1
            continue
        seen.add(key)
        hit = collision(key, index)
        if hit is not None:
            manifest.collisions += 1
            collided[hit] += 1
            continue
        split = ("heldout_pair" if _holds(key, pairs) else
                 "heldout" if heldout_draw < settings.heldout_share else "train")
        name = f"{manifest.kept:05d}_{'_'.join(spec.ops)}"
        problem, solution = render_problem(name, spec, split, settings.seed), render_solution(name, spec)
        why = check(problem, solution, settings.seed + manifest.drawn)
        if why is not None:
            manifest.failed_check += 1
            if len(manifest.failures) < 20:
                manifest.failures.append({"ops": list(spec.ops), "reason": why})
            continue
        (folder / "problems" / f"{name}.py").write_text(problem)
        (folder / "solutions" / name).mkdir()
        (folder / "solutions" / name / "fused.py").write_text(solution)
        manifest.kept += 1
        splits[split] += 1
        if progress is not None:
            progress(manifest.kept)
    manifest.splits = dict(sorted(splits.items()))
    manifest.collided_with = dict(collided.most_common())
    manifest.seconds = round(time.perf_counter() - start, 2)
    (folder / "manifest.json").write_text(json.dumps(asdict(manifest), indent=2) + "\n")
    return manifest


def folder_for(settings: Settings, root: Path) -> Path:
    return root / settings.digest()


def ensure(settings: Settings, root: Path, check: Check, progress=None) -> tuple[Path, Manifest]:
    """The folder of `settings`' tasks under `root`, built once (atomically)."""
    folder = folder_for(settings, root)
    manifest_file = folder / "manifest.json"
    if manifest_file.is_file():
        return folder, Manifest(**json.loads(manifest_file.read_text()))
    partial = folder.with_name(f"{folder.name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        manifest = build(settings, partial, check, progress)
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            partial.rename(folder)
        except OSError:  # another process built it meanwhile: theirs stands
            if not manifest_file.is_file():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder, manifest
