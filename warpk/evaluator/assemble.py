"""Records from what the workers found: the parent's last word on each candidate.

`record_from(...)` turns a trusted Measurement into an EvalRecord: a runtime below the task's
roofline floor becomes `implausible`; energy is added under the evaluator's energy mode
(`model`: power model x measured runtime, labelled so; never mixed with measured energy).

Non-goals: no measuring, no I/O.
"""

from __future__ import annotations

import dataclasses

from warpk.config import HardwareConfig
from warpk.evaluator.protocol import Measurement
from warpk.evaluator.roofline import implausible_reason, roofline_floor_ms
from warpk.records import EvalRecord
from warpk.telemetry.model import modelled_energy

# Measurement fields that the record carries under the same name.
SHARED = ("device", "max_abs_err", "max_rel_err", "runtime_ms", "runtime_iqr_ms", "ref_runtime_ms",
          "ref_runtime_iqr_ms", "flops", "min_bytes", "compile_s", "correctness_s", "timing_s",
          "calls_per_batch", "freeze", "ref_alone_runtime_ms", "ref_contention",
          "new_alone_runtime_ms", "basis", "ref_alone_after_runtime_ms", "interleaved_speedup")


MEASURED_ENERGY = ("energy_j", "energy_uncertainty_j", "avg_power_w", "window_s", "ref_energy_j",
                   "ref_energy_uncertainty_j", "ref_avg_power_w", "ref_window_s", "idle_power_w",
                   "ref_energy_id", "energy_windows", "energy_at_cap", "ref_energy_windows",
                   "ref_energy_at_cap")
LANE_FIELDS = tuple(f.name for f in dataclasses.fields(Measurement) if f.name.startswith("lane_"))


def energy_fields(mode: str, hardware: HardwareConfig, threads: int, m: Measurement) -> dict:
    """The record's energy fields under `mode` for an ok candidate (never mixed)."""
    if mode == "model":
        new = modelled_energy(hardware, m.runtime_ms, threads)
        ref = modelled_energy(hardware, m.ref_runtime_ms, threads)
        return dict(energy_j=new.energy_j, ref_energy_j=ref.energy_j, avg_power_w=new.avg_power_w,
                    ref_avg_power_w=ref.avg_power_w, energy_source="model")
    if mode in ("nvml", "sampler"):
        lane = {k: getattr(m, k) for k in LANE_FIELDS}
        if m.energy_j is None or m.ref_energy_j is None:
            why = m.energy_error or f"the trusted worker returned no {mode} energy measurement"
            return {"energy_source": "none", "energy_error": why, "energy_s": m.energy_s, **lane}
        measured = {k: getattr(m, k) for k in MEASURED_ENERGY}
        return {"energy_source": mode, "energy_s": m.energy_s, **measured, **lane}
    return {"energy_source": "none"}


def record_from(m: Measurement, base: dict, hardware: HardwareConfig, energy_mode: str,
                threads: int) -> EvalRecord:
    fields = {k: getattr(m, k) for k in SHARED}
    fields["timing_batches"] = m.batches
    if m.status != "ok":
        return EvalRecord(status=m.status, error=m.error or f"{m.status} (no reason given)", **base, **fields)
    floor_ms = roofline_floor_ms(m.flops, m.min_bytes, hardware)
    fields["roofline_floor_ms"] = floor_ms
    reason = implausible_reason(m.runtime_ms, floor_ms, hardware)
    if reason:
        return EvalRecord(status="implausible", error=reason, **base, **fields)
    return EvalRecord(
        status="ok", **base, **fields,
        speedup=m.speedup, speedup_low=m.speedup_low, speedup_high=m.speedup_high,
        **energy_fields(energy_mode, hardware, threads, m),
    )
