"""Find and load run dirs: what every number of a report is computed from.

A run dir is a directory holding `resolved_config.yaml` (written by `python -m warpk` before its
stage runs). It counts as finished when `summary.json` is there too; an unfinished one (killed,
failed, still running) is skipped and named in the report, never half-read.

`results=` may be one run dir, a sweep dir (Hydra's `multirun/DATE/TIME`, searched recursively)
or a glob of either. Each run carries its provenance: the sha256 of its resolved_config.yaml and
the git commit behind it. Run dirs do not record a commit today: the commit is then the
repository's HEAD at report time, and `git_commit_source` says so.

Non-goals: no statistics; no reading of W&B files (records.jsonl and summary.json are the truth).
"""

from __future__ import annotations

import glob
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from warpk.provenance import git_head
from warpk.records import EvalRecord, read_records
from warpk.tasks import TaskError

CONFIG_FILE = "resolved_config.yaml"


class ReportError(TaskError):
    """The report cannot be made as asked; the message says why in one line.

    A TaskError because the front door (warpk/__main__.py) turns that into a one-line exit: for
    a report, the run dirs are the input, as the tasks are for an evaluation.
    """


@dataclass(frozen=True)
class Run:
    """One finished run dir, loaded."""

    path: Path
    arm: str  # what ran, then the report.arm_keys values: "train/m1", "train/m3/0.25" (joined by /)
    seed: int
    stage: str
    config: dict  # resolved_config.yaml as plain data
    config_sha256: str  # of resolved_config.yaml's bytes
    git_commit: str | None
    git_commit_source: str  # where git_commit comes from (run dir or report-time HEAD)
    records: tuple[EvalRecord, ...]  # records.jsonl in file order; line i+1 is records[i]
    summary: dict
    runtime_results: tuple[dict, ...]  # runtime_results.jsonl (stage=runtime), when present

    def get(self, dotted: str) -> object:
        """The resolved config value at a dotted key such as 'reward.ipw_blend'."""
        return config_value(self.config, dotted, self.path)


def config_value(config: dict, dotted: str, where: Path) -> object:
    node: object = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ReportError(f"report.arm_keys: {where / CONFIG_FILE} has no key {dotted!r}")
        node = node[part]
    return node


REFERENCE_ARM = "evaluate/reference"  # the bundled solutions: the default baseline when present


def what_ran(config: dict, summary: dict | None = None) -> str:
    """The start of every arm label, read from the run's own config and summary, never from a
    default key: `train/m1`, `runtime/m4`, `hrl/m5`; for stage=evaluate `evaluate/reference` (the
    bundled solutions), `evaluate/candidates` (a candidates dir) or `evaluate/<policy>/<arm>` (a
    policy sampled from its checkpoint, and the arm that trained it, from the checkpoint's stamp)."""
    stage = str(config.get("stage", ""))
    if stage == "evaluate":
        if (config.get("policy") or {}).get("checkpoint"):
            trained = (summary or {}).get("trained_arm") or "unknown-arm"
            return f"evaluate/{config['policy'].get('name')}/{trained}"
        if (config.get("evaluate") or {}).get("candidates_dir"):
            return "evaluate/candidates"
        return REFERENCE_ARM
    if stage in ("train", "runtime", "hrl"):
        return f"{stage}/{(config.get('model') or {}).get('name')}"
    return stage


def find_run_dirs(results: str) -> list[Path]:
    """Run dirs (holding resolved_config.yaml) under `results`: a dir, a sweep dir or a glob."""
    roots = sorted(Path(p) for p in glob.glob(results)) if glob.has_magic(results) else [Path(results)]
    roots = [r for r in roots if r.is_dir()]
    if not roots:
        raise ReportError(f"results={results} matches no directory")
    found: set[Path] = set()
    for root in roots:
        found |= {p.parent.resolve() for p in root.rglob(CONFIG_FILE)}
        if (root / CONFIG_FILE).is_file():
            found.add(root.resolve())
    if not found:
        raise ReportError(f"results={results}: no run dir (a dir with {CONFIG_FILE}) under it")
    return sorted(found, key=_natural)


def _natural(path: Path) -> tuple:
    """Sort sweep job dirs 2 before 10."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in path.parts)


def _records(path: Path) -> tuple[EvalRecord, ...]:
    if not path.is_file():
        return ()
    try:
        return tuple(read_records(path))
    except ValueError as err:
        raise ReportError(f"{err}: damaged, or written by a version with another record schema") from err


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise ReportError(f"{path}:{number} is not JSON ({err.msg}): the run dir is damaged") from err
    return rows


def load_run(path: Path, arm_keys: list[str], head: str | None) -> Run:
    """One finished run dir; `head` is the report-time commit used when the dir records none."""
    raw = (path / CONFIG_FILE).read_bytes()
    config = yaml.safe_load(raw) or {}
    summary = json.loads((path / "summary.json").read_text())
    records = _records(path / "records.jsonl")
    recorded = summary.get("git_commit") or config.get("git_commit")
    arm = "/".join([what_ran(config, summary)] + [str(config_value(config, key, path)) for key in arm_keys])
    return Run(
        path=path,
        arm=arm,
        seed=int(config.get("seed", 0)),
        stage=str(config.get("stage", "")),
        config=config,
        config_sha256=hashlib.sha256(raw).hexdigest(),
        git_commit=recorded or head,
        git_commit_source="run dir" if recorded else "report-time HEAD (the run dir records no commit)",
        records=records,
        summary=summary,
        runtime_results=tuple(_read_jsonl(path / "runtime_results.jsonl")),
    )


# Keys that may differ between the runs of one arm: the seed, and what does not change a result.
SAME_ARM_MAY_DIFFER = (
    "seed",
    "logger.",
    "results",
    "report.",
    "policy.checkpoint",
    "evaluate.cache_dir",
    "evaluate.gpus",
    "evaluate.compile_workers",
)


def _flat(node: object, prefix: str = "") -> dict[str, object]:
    if not isinstance(node, dict):
        return {prefix: node}
    out: dict[str, object] = {}
    for key, value in node.items():
        out.update(_flat(value, f"{prefix}{key}." if isinstance(value, dict) else f"{prefix}{key}"))
    return out


def check_arms(runs: list[Run]) -> None:
    """Runs of one arm must differ only in their seed (and SAME_ARM_MAY_DIFFER): an arm that
    silently mixed, say, an evaluate and a train run would average different experiments."""
    by_arm: dict[str, list[Run]] = {}
    for run in runs:
        by_arm.setdefault(run.arm, []).append(run)
    for arm, group in sorted(by_arm.items()):
        seeds: dict[int, Path] = {}
        for run in group:  # a second run of one seed would count as one more seed
            if run.seed in seeds:
                raise ReportError(
                    f"arm {arm!r} has two runs of seed {run.seed} ({seeds[run.seed]} and {run.path}): "
                    "they differ in what they evaluated (e.g. policy.checkpoint) or repeat one run; name "
                    "the difference in report.arm_keys, e.g. 'report.arm_keys=[policy.checkpoint]', "
                    "or narrow results="
                )
            seeds[run.seed] = run.path
        first = _flat(group[0].config)
        for other in group[1:]:
            flat = _flat(other.config)
            differ = sorted(
                k  # a key of only one config is a schema change between versions, not a setting
                for k in set(first) & set(flat)
                if first[k] != flat[k] and not k.startswith(SAME_ARM_MAY_DIFFER)
            )
            if differ:
                raise ReportError(
                    f"arm {arm!r} mixes runs that differ in {', '.join(differ[:4])} ({group[0].path} vs "
                    f"{other.path}): add the key to report.arm_keys, e.g. 'report.arm_keys=[{differ[0]}]', "
                    "or narrow results="
                )


def load_runs(results: str, arm_keys: list[str], exclude: Path | None = None) -> tuple[list[Run], list[str]]:
    """(finished runs, one line per skipped dir saying why) under `results`.

    Args:
        results: a run dir, a sweep dir or a glob.
        arm_keys: dotted config keys whose values name a run's arm.
        exclude: a dir never read (the report's own run dir, when it lies under `results`).
    """
    head = git_head()
    runs, skipped = [], []
    for path in find_run_dirs(results):
        if exclude is not None and path == exclude.resolve():
            continue
        config_stage = (yaml.safe_load((path / CONFIG_FILE).read_text()) or {}).get("stage")
        if config_stage == "report":
            skipped.append(f"{path}: a report run, not an experiment")
        elif not (path / "summary.json").is_file():
            skipped.append(f"{path}: no summary.json (the job failed, was killed or is still running)")
        else:
            runs.append(load_run(path, arm_keys, head))
    if not runs:
        raise ReportError(f"results={results}: no finished run dir; " + "; ".join(skipped[:3]))
    check_arms(runs)
    return runs, skipped
