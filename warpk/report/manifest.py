"""The report's manifest: every numeric cell of every table with the run dirs (config hash, git
commit) and records.jsonl lines behind it, so a reader can go from any cell to the records it was
computed from (docs/reports.md, "Tracing a cell").
"""

from __future__ import annotations

from warpk.report.runs import Run
from warpk.tables import Table


def manifest(tables: list[Table], runs: list[Run], extra: dict) -> dict:
    """Every numeric cell with the runs (dir, config hash, git commit) and record lines behind it."""
    by_dir = {str(run.path): run for run in runs}
    cells = []
    for table in tables:
        for r, row in enumerate(table.rows):
            for c, cell in enumerate(row):
                if cell.value is None:
                    continue
                lines: dict[tuple[str, str], list[int]] = {}
                for where, line in cell.sources:
                    run_dir, file = (
                        (where.rsplit("/", 1)) if where.endswith(".jsonl") else (where, "records.jsonl")
                    )
                    lines.setdefault((run_dir, file), [])
                    if line:
                        lines[(run_dir, file)].append(line)
                cells.append(
                    {
                        "table": table.name,
                        "row": r,
                        "column": table.columns[c],
                        "row_label": row[0].text,
                        "text": cell.text,
                        "value": cell.value,
                        "sources": [
                            {"run_dir": d, "file": f, "lines": sorted(set(ls))}
                            for (d, f), ls in sorted(lines.items())
                        ],
                    }
                )
    return {
        **extra,
        "runs": {
            d: {
                "arm": run.arm,
                "seed": run.seed,
                "stage": run.stage,
                "config_sha256": run.config_sha256,
                "git_commit": run.git_commit,
                "git_commit_source": run.git_commit_source,
                "n_records": len(run.records),
            }
            for d, run in sorted(by_dir.items())
        },
        "cells": cells,
    }
