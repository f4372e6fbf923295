"""The one table type of every stage: cells that keep their numbers and sources, rendered for the
console (rich), Markdown and LaTeX.

A `Cell` is the text shown plus, for a number, its value and sources: (run dir, records.jsonl
line) pairs, line 0 standing for the run as a whole (its config or summary), or (path of another
jsonl file of a run dir, line). The report's manifest (warpk.report.manifest) lists every numeric
cell with the records behind it; a console table of a stage simply has no sources.

Non-goals: no statistics; no styling beyond a console colour per cell, Markdown and a plain
LaTeX tabular.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# (run dir, records.jsonl line; 0 = the run as a whole), or (path of another .jsonl file of a run
# dir such as runtime_results.jsonl, its line)
Source = tuple[str, int]


@dataclass(frozen=True)
class Cell:
    text: str
    value: float | None = None
    sources: tuple[Source, ...] = ()
    style: str | None = None  # the console's colour (rich style), e.g. "green"; Markdown/LaTeX ignore it


def text(value: str, style: str | None = None) -> Cell:
    return Cell(value, style=style)


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
    show_header: bool = True  # False: a key-value table (the console shows no header row)

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
    spec = "".join("r" if _numeric(table, i) else "l" for i in range(len(table.columns)))
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


def _numeric(table: Table, i: int) -> bool:
    return any(r[i].value is not None for r in table.rows)


def to_rich(table: Table):
    """The console's rendering: numeric columns right-aligned, the notes as the caption; every text
    is shown as it is (never read as rich markup)."""
    from rich.table import Table as RichTable
    from rich.text import Text

    caption = Text(" ".join(table.notes)) if table.notes else None
    out = RichTable(title=Text(table.title), caption=caption, show_header=table.show_header)
    for i, column in enumerate(table.columns):
        out.add_column(column, justify="right" if _numeric(table, i) else "left", overflow="fold")
    for row in table.rows:
        out.add_row(*(Text(c.text, style=c.style or "") for c in row))
    return out
