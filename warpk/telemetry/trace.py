"""Energy traces: timestamped counter (or power) readings and their interpolated cumulative energy.

A trace holds the readings of one GPU. Its cumulative energy E(t) runs through *knots*: the
first reading and every reading where the counter value changed (the counter holds its value
between updates, so repeated values carry no new information). Between knots E(t) is linear;
outside the knots it is undefined (no extrapolation). A trace without energy readings but with
power readings integrates power with trapezoids instead (each reading is then a knot).

Error bound: the true E(t) is monotone and passes through the knots, so an interpolated value
is off by at most the energy of the segment it falls in; `energy_between` returns that bound.

File format: JSON lines as written by `python -m sampler record` (sampler/trace.py documents it:
`timestamp_s`, `gpu`, `power_w`, `energy_j`, ...); `.gz` names are gzip-compressed.

Non-goals: no resampling or smoothing; one GPU per trace.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path


@dataclass(frozen=True)
class TraceSample:
    """One reading: counter energy (J) and/or power (W) at `timestamp_s` (s, monotonic)."""

    timestamp_s: float
    energy_j: float | None = None
    power_w: float | None = None
    gpu: int = 0


def load_trace(path: str | Path, gpu: int = 0) -> tuple[TraceSample, ...]:
    """Readings of `gpu` from a trace file, in file order. The file is read by the sampler's own
    reader (sampler.trace.read_rows: required keys, time order per GPU), the one reader of the
    format; imported here, not at the top, because the evaluator's sandbox has no `sampler`."""
    from sampler.trace import read_rows

    samples = tuple(
        TraceSample(float(row["timestamp_s"]), row.get("energy_j"), row.get("power_w"), gpu)
        for row in read_rows(path)
        if int(row["gpu"]) == gpu
    )
    if not samples:
        raise ValueError(f"{path}: no readings of gpu {gpu}")
    return samples


def write_trace(path: str | Path, samples) -> None:
    """Write readings in the sampler's trace format (absent values are left out)."""
    from sampler.trace import open_text

    with open_text(path, "w") as f:
        for s in samples:
            row = {"timestamp_s": s.timestamp_s, "gpu": s.gpu}
            row.update((k, v) for k, v in (("power_w", s.power_w), ("energy_j", s.energy_j)) if v is not None)
            f.write(json.dumps(row) + "\n")


@dataclass(frozen=True)
class EnergyTrace:
    """Readings of one GPU, and optionally the interval of the workload they cover.

    Attributes:
        samples: readings in time order.
        start_s: when the workload started (None: the first knot).
        end_s: when it ended (None: the last knot).
    """

    samples: tuple[TraceSample, ...]
    start_s: float | None = None
    end_s: float | None = None

    def __post_init__(self) -> None:
        times = [s.timestamp_s for s in self.samples]
        if len(times) < 2 or any(b < a for a, b in zip(times, times[1:], strict=False)):
            raise ValueError("a trace needs >= 2 readings in time order")

    @cached_property
    def knots(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(times in s, cumulative energy in J) through which E(t) is interpolated."""
        if all(s.energy_j is not None for s in self.samples):
            times, energies = [self.samples[0].timestamp_s], [self.samples[0].energy_j]
            for s in self.samples[1:]:
                if s.energy_j != energies[-1]:
                    times.append(s.timestamp_s)
                    energies.append(s.energy_j)
        elif all(s.power_w is not None for s in self.samples):
            times, energies = [self.samples[0].timestamp_s], [0.0]
            for a, b in zip(self.samples, self.samples[1:], strict=False):
                times.append(b.timestamp_s)
                energies.append(energies[-1] + (a.power_w + b.power_w) / 2 * (b.timestamp_s - a.timestamp_s))
        else:
            raise ValueError("every reading needs energy_j, or every reading needs power_w")
        if len(times) < 2:
            raise ValueError("the counter never changed in this trace: no energy can be interpolated")
        return tuple(times), tuple(energies)

    def energy_at(self, t: float) -> tuple[float, float]:
        """Interpolated cumulative energy at `t` and its bound (J): (E(t), max error)."""
        times, energies = self.knots
        if not times[0] <= t <= times[-1]:
            raise ValueError(f"t={t} s is outside the trace's knots [{times[0]}, {times[-1]}] s")
        i = bisect.bisect_right(times, t) - 1
        if times[i] == t:
            return energies[i], 0.0
        frac = (t - times[i]) / (times[i + 1] - times[i])
        segment_j = energies[i + 1] - energies[i]
        return energies[i] + frac * segment_j, segment_j

    def energy_between(self, t0: float, t1: float) -> tuple[float, float]:
        """Energy from t0 to t1 (J) and the bound on its error (J).

        Ends in different segments: each end is off by at most its segment's energy. Both ends in
        one segment of energy S: the truth lies in [0, S], so the bound is max(value, S - value).
        """
        if t1 < t0:
            raise ValueError(f"t1={t1} is before t0={t0}")
        e0, b0 = self.energy_at(t0)
        e1, b1 = self.energy_at(t1)
        times = self.knots[0]
        same = bisect.bisect_right(times, t0) == bisect.bisect_right(times, t1) and b0 > 0 and b1 > 0
        if same:
            return e1 - e0, max(e1 - e0, b0 - (e1 - e0))
        return e1 - e0, b0 + b1

    @property
    def interval(self) -> tuple[float, float]:
        times = self.knots[0]
        return (times[0] if self.start_s is None else self.start_s,
                times[-1] if self.end_s is None else self.end_s)

    @property
    def total_joules(self) -> float:
        """Energy over the workload interval (or the whole trace)."""
        return self.energy_between(*self.interval)[0]

    @property
    def energy_uncertainty_j(self) -> float:
        """Bound on the error of total_joules from interpolating at the interval's ends."""
        return self.energy_between(*self.interval)[1]

    @property
    def duration_s(self) -> float:
        start, end = self.interval
        return end - start

    @property
    def avg_power_w(self) -> float:
        return self.total_joules / self.duration_s
