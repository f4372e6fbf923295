"""Modelled power and energy from the hardware profile, for machines that cannot measure.

Every figure from here is labelled `energy_source="model"` by its caller. The model is the
simplest one that states its assumption: while a timed call runs, the device draws
  - CPU: idle + (TDP - idle) x (busy cores / cores), busy cores = the worker's torch threads;
  - GPU: its TDP (an upper bound: the device is assumed fully busy; measured NVML energy
    replaces this when the telemetry issue lands).
Energy per call = modelled power x measured runtime, so a modelled energy ratio is exactly
the speedup (times a power ratio of 1): it says nothing about energy efficiency beyond speed.

`ModelMeter` wraps the model behind the EnergyMeter seam: it times the function (warmup,
calibration, repeats) and reports modelled energy for the timed runtime.

Non-goals: no energy measurement, no calibration against meters.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from warpk.config import HardwareConfig
from warpk.telemetry.meter import EnergyMeasurement, EnergyMeter, MeterSettings
from warpk.telemetry.windows import calibrate


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


class ModelMeter(EnergyMeter):
    """The meter of machines that cannot measure: times `fn`, then applies the model above.

    Every result says `energy_source="model"`, has no window and no uncertainty (a model's error
    is unknown, not zero); `energy_std_j` reflects only the spread of the timed runtimes.

    Args:
        hardware: the profile whose power model applies.
        threads: torch threads the timed function uses (CPU model).
        settings: warmup, calibration and repeats (windows are timed, not metered).
        clock: seconds, monotonic.
    """

    source = "model"

    def __init__(self, hardware: HardwareConfig, threads: int = 1, settings: MeterSettings | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.hardware, self.threads = hardware, threads
        self.settings = settings or MeterSettings.for_hardware(hardware)
        self.clock = clock

    def measure(self, fn: Callable[[], object], *, sync: Callable[[], object]) -> EnergyMeasurement:
        plan = calibrate(fn, sync, self.settings, self.clock)
        calls = max(plan.body_calls, math.ceil(self.settings.calibrate_s / plan.time_per_call_s))
        energies, runtimes_ms = [], []
        for _ in range(self.settings.repeats):
            t0 = self.clock()
            for _ in range(calls):
                fn()
            sync()
            runtimes_ms.append((self.clock() - t0) / calls * 1000.0)
            energies.append(modelled_energy(self.hardware, runtimes_ms[-1], self.threads).energy_j)
        return EnergyMeasurement(
            energy_source=self.source,
            energy_j=statistics.fmean(energies),
            energy_uncertainty_j=None,
            energy_std_j=statistics.stdev(energies) if len(energies) > 1 else None,
            avg_power_w=modelled_power_w(self.hardware, self.threads),
            window_s=None,
            time_per_call_ms=statistics.fmean(runtimes_ms),
            calls_per_window=float(calls),
        )
