"""Modelled power and energy from the hardware profile, for machines that cannot measure.

Every figure from here is labelled `energy_source="model"` by its caller. The model is the
simplest one that states its assumption: while a timed call runs, the device draws
  - CPU: idle + (TDP - idle) x (busy cores / cores), busy cores = the worker's torch threads;
  - GPU: its TDP (an upper bound: the device is assumed fully busy; measured NVML energy
    replaces this when the telemetry issue lands).
Energy per call = modelled power x measured runtime, so a modelled energy ratio is exactly
the speedup (times a power ratio of 1): it says nothing about energy efficiency beyond speed.

Non-goals: no measurement, no calibration against meters.
"""

from __future__ import annotations

from dataclasses import dataclass

from warpk.config import HardwareConfig


@dataclass(frozen=True)
class ModelledEnergy:
    energy_j: float  # per call
    avg_power_w: float


def modelled_power_w(hardware: HardwareConfig, threads: int) -> float:
    """Power drawn while a call runs, under the model above."""
    if hardware.device == "cpu":
        cores = hardware.cores or 1
        busy = min(threads, cores) / cores
        return hardware.idle_power_w + (hardware.tdp_w - hardware.idle_power_w) * busy
    return hardware.tdp_w


def modelled_energy(hardware: HardwareConfig, runtime_ms: float, threads: int) -> ModelledEnergy:
    """Energy of one call of `runtime_ms` under the model above."""
    power_w = modelled_power_w(hardware, threads)
    return ModelledEnergy(energy_j=power_w * runtime_ms / 1000.0, avg_power_w=power_w)
