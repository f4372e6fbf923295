"""The energy-meter seam: what every meter returns and what a counter must offer.

Meters (NVML, sampler, replay, model) all answer `measure(fn, sync=...) -> EnergyMeasurement`:
energy per call of `fn` with its uncertainty, average power, window length, the spread over
repeated windows, and the idle power they observed (reported beside, never subtracted).
Measured meters read a cumulative energy counter through the `EnergyCounter` protocol; the
window logic shared by them lives in warpk.telemetry.windows.

Non-goals: no torch import (the caller passes `sync`, e.g. torch.cuda.synchronize); no NVML
here; no conversion of units (counters already return joules).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class MeterError(RuntimeError):
    """Energy cannot be measured as asked; the message says why and what to do."""


def no_sync() -> None:
    """The `sync` of work that completes when the call returns (CPU functions)."""


@dataclass(frozen=True)
class CounterReading:
    """One read of a cumulative energy counter.

    Attributes:
        energy_j: energy since an arbitrary origin (e.g. driver load), joules.
        timestamp_s: when the value was read, on the meter's clock (time.monotonic by default).
        power_w: power reported with the reading, when the source has it for free.
    """

    energy_j: float
    timestamp_s: float
    power_w: float | None = None


class EnergyCounter(Protocol):
    """A cumulative energy counter (NVML, a sampler stream, a replayed trace)."""

    def read(self) -> CounterReading: ...


@dataclass(frozen=True)
class MeterSettings:
    """How a measured meter runs its windows (DESIGN.md 5).

    Attributes:
        min_window_s: the calibrated calls alone span at least this long
            (hardware.min_energy_window_s).
        repeats: windows per measurement; their spread is reported.
        warmup_s: seconds of calls before calibrating (clocks and power settle).
        calibrate_s: calls are timed until they span at least this long.
        chunk_s: while waiting for a counter update under load, the counter is read after about
            this much work; it bounds how precisely a window edge is located.
        poll_s: sleep between counter reads while the device is idle.
        idle_window_s: seconds of idle observed before warmup to report idle power; 0 = not
            observed (idle_power_w is then None).
        aligned: True = windows start and end on counter updates with the device busy across
            both edges; False = the naive read-run-read window (for comparison benchmarks).
        counter_period_s: update period assumed for the uncertainty of unaligned windows when
            none was observed (about 0.1 s on H100/H200, FACTS.md).
        timeout_s: give up when the counter does not change for this long.
        random_phase: each aligned window starts after an idle pause drawn uniformly from one
            counter period, so a workload whose cycle the counter's part-time sampling would
            alias (the square-wave test: docs/energy.md) meets the sampling at another phase in
            every window, and the aliasing shows in the spread over windows, which the stated
            uncertainty includes (meter.summarize) instead of a bias no window reveals.
        phase_seed: seeds the pauses (tests, benchmarks); None = drawn from the OS.
    """

    min_window_s: float = 1.0
    repeats: int = 3
    warmup_s: float = 0.2
    calibrate_s: float = 0.05
    chunk_s: float = 0.001
    poll_s: float = 0.0005
    idle_window_s: float = 0.0
    aligned: bool = True
    counter_period_s: float = 0.1
    timeout_s: float = 5.0
    random_phase: bool = True
    phase_seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("min_window_s", "warmup_s", "calibrate_s", "idle_window_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"MeterSettings.{name}={getattr(self, name)} must be >= 0")
        for name in ("chunk_s", "poll_s", "counter_period_s", "timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"MeterSettings.{name}={getattr(self, name)} must be > 0")
        if self.repeats < 1:
            raise ValueError(f"MeterSettings.repeats={self.repeats} must be >= 1")

    @classmethod
    def for_hardware(cls, hardware, **overrides) -> MeterSettings:
        """Settings whose window spans the profile's `min_energy_window_s` (None = 0)."""
        return cls(**{"min_window_s": hardware.min_energy_window_s or 0.0, **overrides})


@dataclass(frozen=True)
class EnergyWindow:
    """One window: a counter delta over a stretch of time and the work done inside it.

    Attributes:
        energy_j: counter delta over the window (all of it, idle included), joules.
        window_s: estimated window length, seconds.
        calls: calls of fn inside the window (fractional: the edges cut calls).
        time_per_call_ms: wall time per call while the window's loop ran.
        edge_uncertainty_s: how far the true window edges may lie from the estimated ones, both
            edges summed.
        energy_uncertainty_j: bound on the error of energy_j as the energy of the work inside
            (inf when the window cannot bound it: a naive window shorter than an update period).
    """

    energy_j: float
    window_s: float
    calls: float
    time_per_call_ms: float
    edge_uncertainty_s: float
    energy_uncertainty_j: float

    @property
    def avg_power_w(self) -> float:
        return self.energy_j / self.window_s

    @property
    def energy_per_call_j(self) -> float:
        return self.energy_j / self.calls

    @property
    def uncertainty_per_call_j(self) -> float:
        return self.energy_uncertainty_j / self.calls


@dataclass(frozen=True)
class EnergyMeasurement:
    """Energy of one call of a function, with how it was obtained. None = not measured.

    Attributes:
        energy_source: nvml | sampler | replay | model.
        energy_j: mean energy per call over the windows, joules.
        energy_uncertainty_j: mean window bound per call + standard error over windows
            (linear sum, conservative); None when modelled.
        energy_std_j: sample standard deviation of energy per call over windows (None for one).
        avg_power_w: mean power over the windows (modelled power for the model meter).
        window_s: mean window length; None when modelled.
        time_per_call_ms: mean wall time per call.
        calls_per_window: mean calls inside a window.
        idle_power_w: power observed with nothing of ours running, before the windows; never
            subtracted from energy_j.
        counter_period_s: median spacing of counter updates seen while idle.
        aligned: whether windows were aligned to counter updates (None when modelled).
        windows: the individual windows.
    """

    energy_source: str
    energy_j: float | None
    energy_uncertainty_j: float | None
    energy_std_j: float | None
    avg_power_w: float | None
    window_s: float | None
    time_per_call_ms: float | None
    calls_per_window: float | None
    idle_power_w: float | None = None
    counter_period_s: float | None = None
    aligned: bool | None = None
    windows: tuple[EnergyWindow, ...] = ()

    @property
    def repeats(self) -> int:
        return len(self.windows)

    @property
    def energy_cv(self) -> float | None:
        """Coefficient of variation of energy per call over windows (None with < 2 windows)."""
        if self.energy_std_j is None or not self.energy_j:
            return None
        return self.energy_std_j / self.energy_j


def summarize(windows: list[EnergyWindow], source: str, aligned: bool, idle_power_w: float | None,
              counter_period_s: float | None) -> EnergyMeasurement:
    """Aggregate windows into a measurement (means, spread, uncertainty)."""
    n = len(windows)
    per_call = [w.energy_per_call_j for w in windows]
    mean = sum(per_call) / n
    std = math.sqrt(sum((e - mean) ** 2 for e in per_call) / (n - 1)) if n > 1 else None
    edge = sum(w.uncertainty_per_call_j for w in windows) / n
    return EnergyMeasurement(
        energy_source=source,
        energy_j=mean,
        energy_uncertainty_j=edge + (std / math.sqrt(n) if std is not None else 0.0),
        energy_std_j=std,
        avg_power_w=sum(w.avg_power_w for w in windows) / n,
        window_s=sum(w.window_s for w in windows) / n,
        time_per_call_ms=sum(w.time_per_call_ms for w in windows) / n,
        calls_per_window=sum(w.calls for w in windows) / n,
        idle_power_w=idle_power_w,
        counter_period_s=counter_period_s,
        aligned=aligned,
        windows=tuple(windows),
    )


class EnergyMeter(ABC):
    """Measures the energy per call of a function on one device.

    `measure` runs `fn` many times; `sync()` must return only once all work `fn` launched has
    finished (torch.cuda.synchronize for CUDA work; `no_sync` for CPU work).
    """

    source: str

    @abstractmethod
    def measure(self, fn: Callable[[], object], *, sync: Callable[[], object]) -> EnergyMeasurement:
        """Energy per call of `fn`."""

    def close(self) -> None:  # noqa: B027 - meters without a handle have nothing to release
        """Release the device handle or stream (idempotent)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
