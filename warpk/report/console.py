"""Tables of evaluation records for the console: one row per candidate, and the summary.

Used by the stages that evaluate (evaluate, train's held-out split), which print them with
`warpk.tables.to_rich`. Non-goals: no files, no statistics.
"""

from __future__ import annotations

import math

from warpk.records import EvalRecord
from warpk.tables import Table, num, text


def _value(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def results_table(records: list[EvalRecord], hardware: str) -> Table:
    """One row per record; a note says where the energy figures come from."""
    sources = sorted({r.energy_source for r in records if r.energy_j is not None})
    notes = []
    if sources == ["model"]:
        notes = [f"* energy is MODELLED from the hardware={hardware} power model "
                 "(power x measured runtime), not measured"]
    elif sources:
        notes = [f"* energy source: {', '.join(sources)}"]
    capped = sum(bool(r.energy_at_cap or r.ref_energy_at_cap) for r in records if r.energy_j is not None)
    if capped:
        notes.append(f"* {capped} energy figure(s) stopped at evaluate.energy_repeats with the stated "
                     "uncertainty above hardware.energy_rel_uncertainty (energy_at_cap)")
    table = Table(
        "results",
        f"WARP-K evaluation: {len(records)} candidates on hardware={hardware}",
        ["task", "candidate", "status", "ref ms", "cand ms", "speedup", "mJ/call*", "max abs err", "reason"],
        notes=notes,
    )
    for r in records:
        energy = None if r.energy_j is None else r.energy_j * 1000
        table.add(
            text(r.task_id.split("/", 1)[-1]),
            text(r.candidate.removesuffix(".py")),
            text(r.status + (" (cached)" if r.cached else ""), style="green" if r.status == "ok" else "red"),
            num(_value(r.ref_runtime_ms), (), ".3f"),
            num(_value(r.runtime_ms), (), ".3f"),
            num(_value(r.speedup), (), ".2f"),
            num(_value(energy), (), ".2f"),
            num(_value(r.max_abs_err), (), ".1e"),
            text((r.error or (f"energy not measured: {r.energy_error}" if r.energy_error else ""))[:200]),
        )
    return table


def summary_table(summary: dict) -> Table:
    table = Table("summary", "Summary", ["metric", "value"], show_header=False)
    for key in ("n_tasks", "n_candidates", "compile_rate", "correct_rate", "geomean_speedup", "fast_1"):
        table.add(text(key), num(_value(summary.get(key)), (), ".0f" if key.startswith("n_") else ".3f"))
    return table
