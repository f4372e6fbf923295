"""A report's files, written under its own run dir (docs/reports.md, "What it writes"):

    per_task.csv / per_task.jsonl, per_seed.csv, matched_pairs.csv, failure_taxonomy.csv
    tables/<name>.md and .tex     every table of the analysis
    manifest.json                 every table number -> run dirs, record lines, config hashes, commits
    REPORT.md                     provenance, skipped run dirs, figures (or why absent), all tables

Non-goals: no numbers computed here (analysis.py), no figures drawn (figures.py).
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

from warpk.report.analysis import Analysis
from warpk.report.energy import MatchedPair
from warpk.report.failures import FailureRow
from warpk.report.manifest import manifest
from warpk.report.metrics import RunMetrics, TaskMetrics
from warpk.report.runs import Run
from warpk.tables import to_latex, to_markdown


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


def write_report(
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
