"""Rich tables of evaluation records for the console: one row per candidate, and the summary.

Used by the stages that evaluate (evaluate, train's held-out split). Non-goals: no files (the
report's tables are warpk.report.tables), no statistics.
"""

from __future__ import annotations

import math

from rich.table import Table

from warpk.records import EvalRecord


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def results_table(records: list[EvalRecord], hardware: str) -> Table:
    """One row per record; a caption says where the energy figures come from."""
    sources = sorted({r.energy_source for r in records if r.energy_j is not None})
    table = Table(title=f"WARP-K evaluation: {len(records)} candidates on hardware={hardware}")
    if sources == ["model"]:
        table.caption = (
            f"* energy is MODELLED from the hardware={hardware} power model "
            "(power x measured runtime), not measured"
        )
    elif sources:
        table.caption = f"* energy source: {', '.join(sources)}"
    for col in (
        "task",
        "candidate",
        "status",
        "ref ms",
        "cand ms",
        "speedup",
        "mJ/call*",
        "max abs err",
        "reason",
    ):
        table.add_column(
            col,
            justify="left" if col in ("task", "candidate", "status", "reason") else "right",
            overflow="fold",
        )
    for r in records:
        colour = "green" if r.status == "ok" else "red"
        energy = None if r.energy_j is None else r.energy_j * 1000
        table.add_row(
            r.task_id.split("/", 1)[-1],
            r.candidate.removesuffix(".py"),
            f"[{colour}]{r.status}[/{colour}]" + (" (cached)" if r.cached else ""),
            _fmt(r.ref_runtime_ms, ".3f"),
            _fmt(r.runtime_ms, ".3f"),
            _fmt(r.speedup, ".2f"),
            _fmt(energy, ".2f"),
            _fmt(r.max_abs_err, ".1e"),
            (r.error or (f"energy not measured: {r.energy_error}" if r.energy_error else ""))[:200],
        )
    return table


def summary_table(summary: dict) -> Table:
    table = Table(title="Summary", show_header=False)
    for key in ("n_tasks", "n_candidates", "compile_rate", "correct_rate", "geomean_speedup", "fast_1"):
        value = summary.get(key)
        table.add_row(key, _fmt(value, ".0f" if key.startswith("n_") else ".3f"))
    return table
