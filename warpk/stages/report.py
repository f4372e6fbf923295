"""`stage=report results=DIR_OR_GLOB`: statistics, tables, figures and a manifest from run dirs.

Reads run dirs only (warpk.report.runs) and writes, under this run's own dir:

    per_task.csv / per_task.jsonl     one row per (run, task), with its records.jsonl lines
    per_seed.csv                      one row per run
    matched_pairs.csv                 the matched-runtime pairs
    failure_taxonomy.csv
    tables/<name>.md and .tex         per_seed, per_task, summary, per_level, seed_robustness,
                                      comparisons, matched_runtime, failure_taxonomy, ...
    figures/<name>.png                each figure whose data exists (REPORT.md says why others
                                      are absent)
    manifest.json                     every table number -> run dirs, record lines, config
                                      hashes, git commits
    REPORT.md                         all tables, figure list, provenance, skipped run dirs

The numbers are warpk.report.analysis's, the figures warpk.report.figures's, the files
warpk.report.output's; this stage puts them in order and prints the tables.

Non-goals: no running of experiments; a number not computable from the run dirs is "-".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from warpk.config import RunConfig
from warpk.report.analysis import analyse
from warpk.report.energy import energy_policy
from warpk.report.output import write_report
from warpk.report.runs import ReportError, load_runs
from warpk.tables import to_rich


def run_report(config: RunConfig, run_dir: Path, log: Callable[[dict], None]) -> dict:
    """Read the runs under `config.results`, write the report into `run_dir`; returns counts."""
    if not config.results:
        raise ReportError("stage=report needs results=DIR_OR_GLOB (a run dir, a sweep dir or a glob)")
    cfg = config.report
    runs, skipped = load_runs(config.results, cfg.arm_keys, exclude=run_dir)
    policy = energy_policy(runs, cfg.allow_modelled_energy_compare)
    analysis = analyse(runs, policy, cfg, config.seed)
    figures: dict = {}
    if cfg.figures:
        from warpk.report.figures import draw_all

        figures = draw_all(runs, analysis, policy, run_dir / "figures")
    write_report(run_dir, runs, analysis, figures, skipped, policy.label, config.results)
    console = Console(width=None if Console().is_terminal else 160)
    for table in analysis.tables:
        console.print(to_rich(table))
    for name, where in figures.items():
        console.print(f"figure {name}: {where if isinstance(where, Path) else 'absent: ' + where}")
    console.print(f"report: {run_dir / 'REPORT.md'}  manifest: {run_dir / 'manifest.json'}")
    summary = {
        "n_runs": float(len(runs)),
        "n_skipped_runs": float(len(skipped)),
        "n_arms": float(len(analysis.arms)),
        "n_tasks": float(len({r.task_id for r in analysis.task_rows})),
        "n_tests": float(analysis.n_tests),
        "n_significant": float(analysis.n_significant),
        "n_matched_pairs": float(len(analysis.pairs)),
        "n_figures": float(sum(isinstance(p, Path) for p in figures.values())),
        "energy": policy.label,
    }
    log({f"report/{k}": v for k, v in summary.items() if isinstance(v, float)})
    return summary
