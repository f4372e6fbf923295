"""Energy windows on a coarse cumulative counter, aligned to its updates (DESIGN.md 5).

The NVML energy counter moves only about every 100 ms (FACTS.md), so a window's two readings
can be stale by up to one update each: an 8 ms window reads 0 J, a 1 s window is off by up to
~10 %. An aligned window removes that staleness:

1. Lead-in: run `fn` in chunks (each ending in `sync()` and a counter read) until the counter
   changes. The update happened between the last read showing the old value and the first
   showing the new one (the *bracket*, about one chunk); the window starts at its midpoint.
   The device is already busy with the same work, so the window starts in steady state.
2. Body: one batch of calls sized to end a tenth of a period before the update that will close
   the window (predicted from the start update and the counter's period: the H200's updates
   come every 100 ms +- 3 ms under load, docs/energy.md), the window spanning >= min_window_s.
3. Tail: chunks until the counter changes again (and on, should the updates come early, until
   the window spans min_window_s); the window ends at the midpoint of that bracket.
4. Energy = counter delta; work inside = the calls of each batch (chunk or body) that fall
   inside the window, each batch's calls spread evenly over the time it ran.

Why 2 and 4 matter (found on the H200, 2026-11-30): a counter read costs milliseconds (about
3.7 ms there), so chunks that sync before reading leave the device idle during every read. An
earlier version did that and counted calls as window length / (average time per call, edges
included): it undercounted calls by up to 35 % and read +55 % energy per call on a 0.1 s window,
+7 % on 1 s. Now each edge chunk is queued first and the counter is read while it runs (the
read overlaps device work, CHUNK_OVER_READ), calls are counted per batch, and the tail lasts
about a tenth of a period.

Uncertainty per window: average power x (half of each bracket + the time inside the window when
none of our work ran) + 1 mJ counter resolution per edge; per call it is divided by the calls
inside. Across windows the standard error is added (see meter.summarize). It does NOT cover the
sensor's gain/offset error. A counter that samples only part of the time (the square-wave
benchmark, benchmarks/bench_energy.py, found the H200's does at 20-200 ms cycles) aliases a
workload with a cycle: every window of one phase reads the same wrong value, which no spread
shows. So each window starts after an idle pause drawn from one counter period
(MeterSettings.random_phase): the windows meet the sampling at different phases, and the
aliasing becomes spread over windows, inside the stated uncertainty (with few windows, a wide
one: the measurement then runs to its cap and the record says so).

The unaligned mode (read, run, sync, read) exists so benchmarks can show what alignment buys;
its uncertainty assumes each reading may lag by one full update period.

Non-goals: no device access here (counters are passed in), no torch, no idle subtraction.
"""

from __future__ import annotations

import math
import random
import secrets
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from warpk.telemetry.meter import (
    CounterReading,
    EnergyCounter,
    EnergyMeasurement,
    EnergyWindow,
    MeterError,
    MeterSettings,
    summarize,
)

MAX_CALIBRATION_CALLS = 10_000_000
COUNTER_RESOLUTION_J = 0.001  # NVML reports whole millijoules
CHUNK_OVER_READ = 2.0  # an edge chunk's work lasts >= 2 counter reads, so the read it overlaps ends first
TAIL_GUARD_PERIODS = 0.1  # the body stops this many update periods before the predicted end update


@dataclass(frozen=True)
class Plan:
    """Calls per window body and per chunk, from the calibration."""

    time_per_call_s: float
    body_calls: int
    chunk_calls: int


class _Work:
    """Runs fn in synchronized batches and keeps when each batch ran, to count calls in a window."""

    def __init__(self, fn: Callable[[], object], sync: Callable[[], object], clock: Callable[[], float]):
        self.fn, self.sync, self.clock = fn, sync, clock
        self.calls = 0
        self.done_s = clock()
        self.batches: list[tuple[float, float, int]] = []  # (enqueue start, sync return, calls)

    def run(self, n: int, meanwhile: Callable[[], object] | None = None) -> object:
        """Run n calls; `meanwhile` (a counter read) runs after they are queued, before the sync,
        so on an asynchronous device it overlaps their execution. Returns what it returned."""
        begin_s = self.clock()
        submit = getattr(self.fn, "submit", None)  # work queued elsewhere in one message (n calls)
        if submit is not None:
            submit(n)
        else:
            for _ in range(n):
                self.fn()
        result = meanwhile() if meanwhile is not None else None
        self.sync()
        self.calls += n
        self.done_s = self.clock()
        self.batches.append((begin_s, self.done_s, n))
        return result

    def calls_between(self, start_s: float, end_s: float) -> float:
        """Calls that ran inside [start_s, end_s], each batch's calls spread evenly over its span."""
        calls = 0.0
        for begin_s, done_s, n in self.batches:
            overlap_s = min(done_s, end_s) - max(begin_s, start_s)
            if overlap_s > 0:
                calls += n * overlap_s / max(done_s - begin_s, 1e-12)
        return calls

    def idle_between(self, start_s: float, end_s: float) -> float:
        """Seconds inside [start_s, end_s] when no batch of ours was running (counter reads, Python)."""
        busy_s = sum(max(0.0, min(d, end_s) - max(b, start_s)) for b, d, _ in self.batches)
        return max(0.0, end_s - start_s - busy_s)


def wait_for_update(counter: EnergyCounter, previous: CounterReading, between: Callable[[], object] | None,
                    clock: Callable[[], float], timeout_s: float,
                    next_reading: Callable[[], CounterReading] | None = None,
                    ) -> tuple[CounterReading, CounterReading]:
    """Read the counter until its value differs from `previous`.

    Args:
        counter: the counter.
        previous: the reading to compare against.
        between: called before each read (sleep while idle).
        clock: seconds, same clock as the readings.
        timeout_s: raise MeterError when nothing changed for this long.
        next_reading: instead of `between` then a read: a function that returns the next reading
            (an edge chunk that reads the counter while its work runs).

    Returns:
        (the last reading with the old value, the first reading with a new value).
    """
    deadline = clock() + timeout_s
    last = previous
    while True:
        if next_reading is not None:
            reading = next_reading()
        else:
            between()
            reading = counter.read()
        if reading.energy_j != previous.energy_j:
            if reading.energy_j < previous.energy_j:
                raise MeterError(f"energy counter went backwards ({previous.energy_j} -> "
                                 f"{reading.energy_j} J): driver reload or counter wrap")
            return last, reading
        last = reading
        if clock() > deadline:
            raise MeterError(f"energy counter did not change in {timeout_s} s: is the device "
                             "reporting energy (Volta or newer), and is the counter the right one?")


def update_time_s(before: CounterReading, after: CounterReading) -> float:
    """When the counter updated: the midpoint of the last old and the first new reading, s."""
    return (before.timestamp_s + after.timestamp_s) / 2


def observe_idle(counter: EnergyCounter, settings: MeterSettings, clock: Callable[[], float],
                 sleep: Callable[[float], object]) -> tuple[float, float | None]:
    """Power and update period of the counter while we run nothing, over >= idle_window_s.

    Returns:
        (idle power in W, median spacing of updates in s, or None with a single interval).
    """
    def idle() -> None:
        sleep(settings.poll_s)

    brackets = [wait_for_update(counter, counter.read(), idle, clock, settings.timeout_s)]
    while True:
        brackets.append(wait_for_update(counter, brackets[-1][1], idle, clock, settings.timeout_s))
        span_s = update_time_s(*brackets[-1]) - update_time_s(*brackets[0])
        if span_s >= settings.idle_window_s:
            break
    ticks = [update_time_s(*b) for b in brackets]
    power_w = (brackets[-1][1].energy_j - brackets[0][1].energy_j) / span_s
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    return power_w, statistics.median(gaps) if len(gaps) > 1 else None


def read_cost_s(counter: EnergyCounter, clock: Callable[[], float], reads: int = 5) -> float:
    """Median seconds one counter read takes (an NVML call can take milliseconds)."""
    costs = []
    for _ in range(reads):
        t0 = clock()
        counter.read()
        costs.append(clock() - t0)
    return statistics.median(costs)


def calibrate(fn: Callable[[], object], sync: Callable[[], object], settings: MeterSettings,
              clock: Callable[[], float], read_s: float = 0.0) -> Plan:
    """Warm up, then time batches of doubling size until one spans calibrate_s.

    A chunk (the work between two counter reads at a window edge) lasts at least chunk_s and at
    least CHUNK_OVER_READ x `read_s`, so the device is busy most of the time around the edges too.
    """
    work = _Work(fn, sync, clock)
    start, batch = clock(), 1
    while clock() - start < settings.warmup_s:
        work.run(batch)
        batch = min(batch * 2, MAX_CALIBRATION_CALLS)
    n = 1
    while True:
        t0 = clock()
        work.run(n)
        elapsed_s = clock() - t0
        if elapsed_s >= settings.calibrate_s and elapsed_s > 0:
            break
        if n >= MAX_CALIBRATION_CALLS:
            raise MeterError(f"{n} calls took {elapsed_s} s: fn does no measurable work")
        n *= 2
    per_call_s = elapsed_s / n
    return Plan(
        time_per_call_s=per_call_s,
        body_calls=max(1, math.ceil(settings.min_window_s / per_call_s)),
        chunk_calls=max(1, round(max(settings.chunk_s, CHUNK_OVER_READ * read_s) / per_call_s)),
    )


def aligned_window(fn, sync, counter: EnergyCounter, plan: Plan, settings: MeterSettings,
                   clock: Callable[[], float], period_s: float | None = None) -> EnergyWindow:
    """One window from a counter update to a later one, busy across both (see module doc).

    The body is sized to end just before the update that closes the window, predicted from the
    start update and the counter's period (`period_s`, else settings.counter_period_s), so the
    chunked tail, where counter reads leave the device partly idle, stays short.
    """
    work = _Work(fn, sync, clock)

    def busy_until_update(previous: CounterReading) -> tuple[CounterReading, CounterReading]:
        """Edge chunks, the counter read while each runs, until the counter moves past `previous`."""
        return wait_for_update(counter, previous, None, clock, settings.timeout_s,
                               next_reading=lambda: work.run(plan.chunk_calls, counter.read))

    start_before, start = busy_until_update(work.run(plan.chunk_calls, counter.read))
    start_s = update_time_s(start_before, start)
    period_s = period_s or settings.counter_period_s
    periods = max(1, math.ceil(settings.min_window_s / period_s - 1e-9))
    body_s = start_s + (periods - TAIL_GUARD_PERIODS) * period_s - clock()
    work.run(max(1, round(body_s / plan.time_per_call_s)))
    body_begin_s, body_done_s, body_calls = work.batches[-1]
    end_before, end = busy_until_update(work.run(plan.chunk_calls, counter.read))
    # Should the updates have come faster than predicted, keep going to a later one.
    while update_time_s(end_before, end) - start_s < settings.min_window_s:
        end_before, end = busy_until_update(end)
    end_s = update_time_s(end_before, end)
    window_s = end_s - start_s
    energy_j = end.energy_j - start.energy_j
    calls = work.calls_between(start_s, end_s)
    per_call_s = (body_done_s - body_begin_s) / body_calls
    edge_s = (start.timestamp_s - start_before.timestamp_s + end.timestamp_s - end_before.timestamp_s) / 2
    # Energy spent inside the window while none of our work ran (counter reads between edge
    # chunks) is charged to the calls; bound it by the window's mean power over that time.
    idle_s = work.idle_between(start_s, end_s)
    power_w = energy_j / window_s
    return EnergyWindow(
        energy_j=energy_j,
        window_s=window_s,
        calls=calls,
        time_per_call_ms=per_call_s * 1000.0,
        edge_uncertainty_s=edge_s,
        energy_uncertainty_j=power_w * (edge_s + idle_s) + 2 * COUNTER_RESOLUTION_J,
    )


def unaligned_window(fn, sync, counter: EnergyCounter, plan: Plan, period_s: float,
                     clock: Callable[[], float]) -> EnergyWindow:
    """The naive window: read, run the body, sync, read. Each reading may lag one period."""
    work = _Work(fn, sync, clock)
    sync()
    first = counter.read()
    begin_s = clock()
    work.run(plan.body_calls)
    last = counter.read()
    window_s = work.done_s - begin_s
    energy_j = last.energy_j - first.energy_j
    # The delta covers [update before first read, update before last read]: at least
    # window_s - period_s long, so energy_j / (window_s - period_s) bounds the power from above.
    # Each edge may miss up to one period of it. Shorter windows bound nothing.
    if window_s > period_s:
        uncertainty_j = energy_j / (window_s - period_s) * 2 * period_s + 2 * COUNTER_RESOLUTION_J
    else:
        uncertainty_j = math.inf
    return EnergyWindow(
        energy_j=energy_j,
        window_s=window_s,
        calls=float(plan.body_calls),
        time_per_call_ms=window_s / plan.body_calls * 1000.0,
        edge_uncertainty_s=2 * period_s,
        energy_uncertainty_j=uncertainty_j,
    )


def measure_with_counter(fn: Callable[[], object], sync: Callable[[], object], counter: EnergyCounter,
                         settings: MeterSettings, source: str, clock: Callable[[], float],
                         sleep: Callable[[float], object]) -> EnergyMeasurement:
    """Idle observation (optional), warmup and calibration, then `settings.repeats` windows."""
    idle_w, period_s = None, None
    if settings.idle_window_s > 0:
        sync()
        idle_w, period_s = observe_idle(counter, settings, clock, sleep)
    plan = calibrate(fn, sync, settings, clock, read_cost_s(counter, clock))
    phases = random.Random(settings.phase_seed if settings.phase_seed is not None else secrets.randbits(64))
    windows = []
    for _ in range(settings.repeats):
        if settings.aligned:
            if settings.random_phase:  # idle (all work synced): the next calls start at a random phase
                sleep(phases.uniform(0.0, period_s or settings.counter_period_s))
            windows.append(aligned_window(fn, sync, counter, plan, settings, clock, period_s))
        else:
            windows.append(unaligned_window(fn, sync, counter, plan, period_s or settings.counter_period_s,
                                            clock))
    return summarize(windows, source, settings.aligned, idle_w, period_s)
