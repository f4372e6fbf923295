"""A meter that reads its energy counter from a recorded trace instead of a device.

The trace plays back against the meter's clock: `t` seconds after the first read, the counter
shows the trace's latest energy reading at or before `first_timestamp + t`, looping (each loop
adds the trace's energy delta, so the counter keeps rising). With a fake clock that `fn`
advances, a replayed measurement is deterministic: tests of everything that consumes meters
(evaluator, rewards, benchmarks' analysis) run on real H200 counter behaviour without a GPU.

Its results are labelled `energy_source="replay"`; records do not accept that label, on purpose:
replayed joules are test fixtures, never results.

Non-goals: no interpolation between readings (a counter holds its value between updates).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from warpk.telemetry.meter import CounterReading, EnergyMeasurement, EnergyMeter, MeterError, MeterSettings
from warpk.telemetry.trace import TraceSample, load_trace
from warpk.telemetry.windows import measure_with_counter


class ReplayCounter:
    """The energy counter of a recorded trace, played back on `clock`.

    Args:
        samples: readings of one GPU with energy_j, in time order.
        clock: seconds, monotonic (a fake in tests).
    """

    def __init__(self, samples: Sequence[TraceSample], clock: Callable[[], float] = time.monotonic):
        if len(samples) < 2 or any(s.energy_j is None for s in samples):
            raise MeterError("a replayed counter needs >= 2 readings, all with energy_j")
        self._times = [s.timestamp_s for s in samples]
        self._energies = [float(s.energy_j) for s in samples]
        self._duration_s = self._times[-1] - self._times[0]
        if self._duration_s <= 0:
            raise MeterError("a replayed trace must span some time")
        self.clock = clock
        self._anchor_s: float | None = None

    def read(self) -> CounterReading:
        now = self.clock()
        if self._anchor_s is None:
            self._anchor_s = now
        loops, offset_s = divmod(now - self._anchor_s, self._duration_s)
        i = bisect.bisect_right(self._times, self._times[0] + offset_s) - 1
        energy_j = self._energies[i] + loops * (self._energies[-1] - self._energies[0])
        return CounterReading(energy_j=energy_j, timestamp_s=now)


class ReplayMeter(EnergyMeter):
    """Aligned energy windows on a replayed counter (for tests and offline analysis).

    Args:
        trace: a trace file (sampler format) or readings.
        gpu: which GPU of the file.
        settings: window settings.
        clock: seconds; pass a fake clock that `fn` advances for deterministic tests.
        sleep: called between counter reads while idle (a fake advances the fake clock).
    """

    source = "replay"

    def __init__(self, trace: str | Path | Sequence[TraceSample], gpu: int = 0,
                 settings: MeterSettings | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = time.sleep):
        samples = load_trace(trace, gpu) if isinstance(trace, str | Path) else tuple(trace)
        self.counter = ReplayCounter(samples, clock)
        self.settings = settings or MeterSettings()
        self.clock, self.sleep = clock, sleep

    def measure(self, fn: Callable[[], object], *, sync: Callable[[], object]) -> EnergyMeasurement:
        return measure_with_counter(fn, sync, self.counter, self.settings, self.source, self.clock,
                                    self.sleep)
