"""Failure taxonomy: how candidates fail, per arm, from the records' status and error text.

The status is the evaluator's verdict (records.STATUSES). The category refines it from the
one-line `error` with the patterns below, first match wins; anything unmatched is "other" and
keeps its text in the examples, so a new failure mode shows up instead of hiding.

Non-goals: no judgement of which failures matter; no reading of logs beyond records.jsonl.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from warpk.records import STATUSES, EvalRecord
from warpk.report.runs import Run

# (category, pattern on the error text); checked in order
CATEGORIES = (
    ("non-finite output", re.compile(r"\bnan\b|\binf\b|non-finite", re.I)),
    ("dtype mismatch", re.compile(r"dtype", re.I)),
    ("shape mismatch", re.compile(r"shape|size mismatch|dimension", re.I)),
    ("numerical mismatch", re.compile(r"differs|tolerance|max abs err", re.I)),
    ("syntax error", re.compile(r"SyntaxError|IndentationError", re.I)),
    ("import error", re.compile(r"ImportError|ModuleNotFoundError|No module named", re.I)),
    ("build failure", re.compile(r"Error building extension|nvcc|ninja|compil", re.I)),
    ("CUDA fault", re.compile(r"CUDA fault|illegal memory access|device-side assert", re.I)),
    ("out of memory", re.compile(r"out of memory|OutOfMemory|MemoryError", re.I)),
    ("worker killed", re.compile(r"killed by|exited with code|worker died|exit code", re.I)),
    ("time limit", re.compile(r"timeout|timed out|time limit|exceeded its limit|backstop", re.I)),
    ("roofline", re.compile(r"roofline", re.I)),
    ("clock contradicted", re.compile(r"trusted wall clock|skipped work", re.I)),
    ("protocol violation", re.compile(r"broke the protocol", re.I)),
)


def category(record: EvalRecord) -> str:
    """The error category of a failed record ("-" for ok); static rejects keep their rule."""
    if record.status == "ok":
        return "-"
    text = record.error or ""
    if record.status == "static_reject":
        return "static: " + text.split(":", 1)[0][:60]
    for name, pattern in CATEGORIES:
        if pattern.search(text):
            return name
    return "other"


@dataclass(frozen=True)
class FailureRow:
    """One (arm, status, category) cell of the taxonomy."""

    arm: str
    status: str
    category: str
    count: int
    share: float  # count / all candidates of the arm
    example: str  # one error text of this cell, verbatim (first seen)
    source: tuple[tuple[str, int], ...]  # (run dir, records.jsonl line) of every counted record


def taxonomy(runs: list[Run]) -> list[FailureRow]:
    """Failed candidates grouped by arm, status and category, largest first within an arm."""
    totals: dict[str, int] = {}
    cells: dict[tuple[str, str, str], list[tuple[EvalRecord, str, int]]] = {}
    for run in runs:
        totals[run.arm] = totals.get(run.arm, 0) + len(run.records)
        for line, record in enumerate(run.records, 1):
            if record.status != "ok":
                key = (run.arm, record.status, category(record))
                cells.setdefault(key, []).append((record, str(run.path), line))
    rows = [
        FailureRow(
            arm=arm,
            status=status,
            category=cat,
            count=len(found),
            share=len(found) / totals[arm],
            example=(found[0][0].error or "")[:160],
            source=tuple((d, line) for _, d, line in found),
        )
        for (arm, status, cat), found in cells.items()
    ]
    order = {s: i for i, s in enumerate(STATUSES)}
    return sorted(rows, key=lambda r: (r.arm, -r.count, order[r.status], r.category))
