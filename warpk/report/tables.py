"""Tables whose every number names its sources; rendered as Markdown and LaTeX; the manifest.

A `Cell` is the text shown plus, for a number, its value and sources: (run dir, records.jsonl
line) pairs, line 0 standing for the run as a whole (its config or summary), or (path of another
jsonl file of a run dir, line). `manifest()` lists
every numeric cell of every table with the run dirs, config hashes, git commits and record
lines behind it, so a reader can go from any cell to the records it was computed from.

Non-goals: no statistics; no styling beyond what Markdown and a plain LaTeX tabular offer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from warpk.report.runs import Run

# (run dir, records.jsonl line; 0 = the run as a whole), or (path of another .jsonl file of a run
# dir such as runtime_results.jsonl, its line)
Source = tuple[str, int]


@dataclass(frozen=True)
class Cell:
    text: str
    value: float | None = None
    sources: tuple[Source, ...] = ()


def text(value: str) -> Cell:
    return Cell(value)


def num(value: float | int | None, sources, spec: str = ".3f") -> Cell:
    """A numeric cell; None renders as "-" (not measured / not computable) and has no entry."""
    if value is None:
        return Cell("-")
    return Cell(format(value, spec), float(value), tuple(sorted(set(sources))))


@dataclass
class Table:
    name: str  # file stem: tables/<name>.md and .tex
    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # shown under the table (energy label, ...)

    def add(self, *cells: Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"table {self.name}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(list(cells))


def _md_escape(value: str) -> str:
    return value.replace("|", "\\|")


def to_markdown(table: Table) -> str:
    lines = [f"### {table.title}", ""]
    lines.append("| " + " | ".join(_md_escape(c) for c in table.columns) + " |")
    lines.append("|" + "|".join("---" for _ in table.columns) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(_md_escape(c.text) for c in row) + " |")
    if not table.rows:
        lines.append("| " + " | ".join("" for _ in table.columns) + " |")
    lines += [""] + [f"*{note}*" for note in table.notes]
    return "\n".join(lines).rstrip() + "\n"


_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _tex(value: str) -> str:
    return "".join(_LATEX.get(ch, ch) for ch in value)


def to_latex(table: Table) -> str:
    spec = "".join(
        "r" if any(r[i].value is not None for r in table.rows) else "l" for i in range(len(table.columns))
    )
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{_tex(table.title)}" + "".join(f" {_tex(n)}" for n in table.notes) + "}",
        rf"\label{{tab:{table.name}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\hline",
        " & ".join(_tex(c) for c in table.columns) + r" \\",
        r"\hline",
    ]
    lines += [" & ".join(_tex(c.text) for c in row) + r" \\" for row in table.rows]
    lines += [r"\hline", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


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
