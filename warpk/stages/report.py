"""`stage=report results=DIR_OR_GLOB`: statistics, tables, figures and a manifest from run dirs.

Reads run dirs only (warpk.report.runs) and writes, under this run's own dir:

    per_task.csv / per_task.jsonl     one row per (run, task), with its records.jsonl lines
    per_seed.csv                      one row per run
    matched_pairs.csv                 the matched-runtime pairs
    failure_taxonomy.csv
    tables/<name>.md and .tex         per_seed, per_task, summary, comparisons, matched_runtime,
                                      failure_taxonomy
    figures/<name>.png                each figure whose data exists (REPORT.md says why others
                                      are absent)
    manifest.json                     every table number -> run dirs, record lines, config
                                      hashes, git commits
    REPORT.md                         all tables, figure list, provenance, skipped run dirs

Non-goals: no running of experiments; a number not computable from the run dirs is "-".
"""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable

from warpk.config import RunConfig
from warpk.report.analysis import Analysis, analyse
from warpk.report.energy import MatchedPair, energy_policy
from warpk.report.failures import FailureRow
from warpk.report.metrics import RunMetrics, TaskMetrics
from warpk.report.runs import ReportError, Run, load_runs
from warpk.report.tables import Table, manifest, to_latex, to_markdown


def _write_csv(path: Path, kind: type, items: list) -> None:
    """One row per dataclass item; the header is written even when there are no rows."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[field.name for field in dataclasses.fields(kind)])
        writer.writeheader()
        writer.writerows(_row(item) for item in items)


def _row(obj) -> dict:
    row = dataclasses.asdict(obj)
    for key in ("lines", "source"):
        if key in row:
            row[key] = json.dumps(row[key])
    return row


def _provenance(runs: list[Run]) -> list[str]:
    commits = sorted({(r.git_commit or "unknown", r.git_commit_source) for r in runs})
    lines = [f"- git commit {c} ({src})" for c, src in commits]
    lines += [
        f"- `{r.path}`: arm {r.arm}, seed {r.seed}, stage {r.stage}, "
        f"config sha256 {r.config_sha256[:12]}, {len(r.records)} records"
        for r in runs
    ]
    return lines


def _rich(table: Table) -> RichTable:
    out = RichTable(title=table.title, caption=" ".join(table.notes) or None)
    for col in table.columns:
        out.add_column(col, overflow="fold")
    for row in table.rows:
        out.add_row(*(c.text for c in row))
    return out


def _write(
    run_dir: Path,
    runs: list[Run],
    analysis: Analysis,
    figures: dict,
    skipped: list[str],
    energy_label: str,
    results: str,
) -> None:
    _write_csv(run_dir / "per_task.csv", TaskMetrics, analysis.task_rows)
    (run_dir / "per_task.jsonl").write_text(
        "".join(json.dumps(dataclasses.asdict(r)) + "\n" for r in analysis.task_rows)
    )
    _write_csv(run_dir / "per_seed.csv", RunMetrics, analysis.run_rows)
    _write_csv(run_dir / "matched_pairs.csv", MatchedPair, analysis.pairs)
    _write_csv(run_dir / "failure_taxonomy.csv", FailureRow, analysis.failures)
    tables_dir = run_dir / "tables"
    tables_dir.mkdir(exist_ok=True)
    for table in analysis.tables:
        (tables_dir / f"{table.name}.md").write_text(to_markdown(table))
        (tables_dir / f"{table.name}.tex").write_text(to_latex(table))
    extra = {
        "results": results,
        "energy": energy_label,
        "baseline_arm": analysis.baseline,
        "figures": {name: str(p) if isinstance(p, Path) else {"absent": p} for name, p in figures.items()},
        "skipped_run_dirs": skipped,
    }
    (run_dir / "manifest.json").write_text(
        json.dumps(manifest(analysis.tables, runs, extra), indent=1) + "\n"
    )
    parts = [
        f"# WARP-K report: {results}",
        "",
        f"Energy in this report: **{energy_label}**.",
        "",
        "## Provenance",
        *_provenance(runs),
        "",
    ]
    if skipped:
        parts += ["## Skipped run dirs", *(f"- {s}" for s in skipped), ""]
    parts += ["## Figures"]
    for name, where in figures.items():
        parts.append(
            f"- ![{name}](figures/{name}.png)" if isinstance(where, Path) else f"- {name}: absent: {where}"
        )
    parts += ["", "## Tables", ""] + [to_markdown(t) for t in analysis.tables]
    (run_dir / "REPORT.md").write_text("\n".join(parts))


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
    _write(run_dir, runs, analysis, figures, skipped, policy.label, config.results)
    console = Console(width=None if Console().is_terminal else 160)
    for table in analysis.tables:
        console.print(_rich(table))
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
