"""The timing phase (evaluator v3): the candidate and the reference timed the same way, by the
trusted worker's clock only.

A timed batch is K calls, each on fresh inputs. For either side the time of a batch is this
process's clock from sending the `Go` that carries the batch's inputs to holding copies of its
outputs here (`Link.go`): the reference runs in a worker of its own that is the candidate's harness
with the task's Model in it (warpk.evaluator.reference), so delivery, mapping and launch cost the
same on both sides and cancel in the ratio. Nothing the candidate's process reports is used. Half
the batches have the candidate first and half the reference, in a shuffled sequence (a task over
BIG_IO_BYTES: the second side of a batch on the same inputs drawn again; an order fixed for those
gave the copies of upstream L1's huge elementwise problems 1.03-1.17 on the H200 and the H100, and
on the H100 a side coming second was ~10% faster in a third of the batches against a tenth coming
first), and the ratio is taken per pair of a batch of either order (warpk.evaluator.speed), so
neither order weighs more in any ratio; while the reference runs, the candidate's sandbox is frozen
and the freeze confirmed (warpk.evaluator.freeze). The first WARMUP_BATCHES warm both up and are not
used. Every timed call's output is verified against the reference worker's. Speedup = median of the
per-pair ratios with its distribution-free 95% interval. A frozen candidate's queued GPU kernels
still run and its armed timers still fire (waking the CPU the reference runs on), and what its
sandbox leaves to the kernel outlives even its death (red team round 29: SysV memory freed by a
kworker on the lane's core after the kill), so the reference is also timed alone before any
candidate code runs (`Baseline`, measured by Session.reference_baseline: back to back, the
candidate's idle harness and the worker started ahead frozen), once a minute per task, shape and
lane (`AloneTimes`); its batch size is then every candidate's K. Where the interleaved reference was
slower than that beyond noise (`slowed`), either the candidate slowed it or taking turns slows both
sides (copies of upstream CNNs, single L1 ops and an LSTM on the H100: both 1.1-1.8x slower
interleaved than alone, docs/benchmarks.md), so the candidate is timed alone too (`candidate_alone`:
back to back, the reference worker idle; its outputs verified afterwards by `check_alone`), and the
speedup is the interleaved ratio unless that lies above the whole 95% interval of the both-alone
ratio, then the both-alone ratio (`Timing.fields`). Slowing the reference raises only the first; the
second has nothing of the candidate in the reference's batches; so a slowed reference gains at most
the upper half of the both-alone interval, and a copy is not pulled down by taking the lower of two
noisy ratios. Where the interleaved reference was faster than alone beyond noise (`stale`), the
interleaved ratio stands and only the interval's upper end also reaches the ratio at the
reference's alone speed (`wider`): which is the reference's speed the data cannot say.

Non-goals: no speed statistics (warpk.evaluator.speed), no protocol order (session.Session.run).
"""

from __future__ import annotations

import math
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from warpk.evaluator.checks import Verdict, check_redrawn, fingerprint
from warpk.evaluator.speed import pair_means, speed_summary

MAX_CALLS_PER_BATCH = 4096
# Batches before the timed ones, not used: the candidate's worker is a fresh process (its
# allocator grows in the first batches), the reference worker a warm one.
WARMUP_BATCHES = 2
# The baseline's warmup: at least this much of the reference's batches before the timed ones.
BASELINE_WARMUP_MS = 200.0
# An interleaved reference up to this much slower than alone is noise, not contention (scaling
# on any difference would bias every speedup down by the noise); a candidate gains at most this.
# H200, 100 upstream L1 copies (2026-12-04): interleaved / alone had a median of 1.025 (another
# CUDA context alive costs the reference a little) and 29 above 1.05.
CONTENTION_TOLERANCE = 0.05
# A reference timed alone stands in for the next candidates of its task, shape and lane this
# long (their interleaved reference no slower than it: nothing to scale), so a batch of samples
# of one task kills and re-times once a minute, not once a candidate.
ALONE_MAX_AGE_S = 60.0


class Side(Protocol):
    """What the timing needs of a worker (warpk.evaluator.link.Link; a fake in tests)."""

    def go(self, calls: list[list], limit_s: float, **flags) -> tuple: ...
    def settle(self) -> None: ...
    def limit_for(self, calls: int) -> float: ...


class Still(Protocol):
    """Keeps the candidate still while the reference runs (warpk.evaluator.freeze.Freezer)."""

    method: str

    def freeze(self) -> None: ...
    def thaw(self) -> None: ...


@dataclass(frozen=True)
class Timing:
    """The timed batches: per call, per used batch, on the trusted clock."""

    calls_per_batch: int
    ref_ms: tuple[float, ...]
    new_ms: tuple[float, ...]
    freeze: str
    big: bool = False  # a huge task's batches (memory given back after each side's)
    new_alone_ms: tuple[float, ...] = ()  # the candidate back to back, the reference idle
    # then the reference alone again, the candidate frozen: a diagnostic only (did the machine
    # drift between the baseline and the candidate's alone batches?), never in a verdict
    ref_alone_after_ms: tuple[float, ...] = ()

    def fields(self, alone_ms: tuple[float, ...] = ()) -> dict:
        """The record's timing fields. `alone_ms`: the reference's batches alone (`Baseline`).
        Where the interleaved reference was slower than that beyond noise, what freezing does
        not stop (kernels queued on the device, armed timers) may have slowed it for the
        candidate, or taking turns slowed both sides: with the candidate timed alone too, the
        speedup is the interleaved ratio unless it lies above the both-alone ratio's interval,
        then the both-alone ratio (`basis`); without (outputs too big to keep), the reference's
        batches are scaled down to alone (+ the tolerance). Either way the interval's upper end
        reaches the interleaved ratio's too (`wider`), and that ratio is recorded beside
        (`interleaved_speedup`): the two estimates disagree, and which one is right the data
        cannot say. Where it was faster than alone beyond noise, the interleaved ratio stands and
        the interval's upper end reaches the ratio at the reference's alone speed too."""
        ref_ms, new_ms = list(self.ref_ms), list(self.new_ms)
        head = dict(calls_per_batch=self.calls_per_batch, batches=len(new_ms), freeze=self.freeze)
        taking_turns = speed_summary(ref_ms, new_ms, pairs=True)
        if not alone_ms:
            return {**head, **taking_turns}
        alone, interleaved = statistics.median(alone_ms), interleaved_ms(self)
        extra = dict(ref_alone_runtime_ms=alone, ref_contention=interleaved / alone)
        factor = min(1.0, alone * (1 + CONTENTION_TOLERANCE) / interleaved)
        if factor == 1 and stale(self, alone_ms):
            # the interleaved reference faster than alone beyond noise (a huge copy's reference
            # worker ~10% faster interleaved than in its own baseline, the candidate not: H100,
            # 2026-12-07): the interval also reaches the ratio with the reference at its alone
            # speed; the point and the lower end, all a verdict or reward reads, stay
            at_alone = speed_summary([r * alone / interleaved for r in ref_ms], new_ms, pairs=True)
            return {**head, **wider(taking_turns, at_alone), **extra}
        if factor == 1:
            return {**head, **taking_turns, **extra}
        extra["interleaved_speedup"] = taking_turns["speedup"]
        if self.new_alone_ms and len(self.new_alone_ms) == len(alone_ms):
            both_alone = speed_summary(list(alone_ms), list(self.new_alone_ms))
            # the interleaved ratio stands unless it lies above all the both-alone interval
            # (the lower of two noisy ratios would bias every copy down: CPU, 2026-12-06)
            basis = "alone" if taking_turns["speedup"] > both_alone["speedup_high"] else "interleaved"
            after = statistics.median(self.ref_alone_after_ms) if self.ref_alone_after_ms else None
            chosen = both_alone if basis == "alone" else taking_turns
            return {**head, **wider(chosen, taking_turns), **extra, "basis": basis,
                    "new_alone_runtime_ms": statistics.median(self.new_alone_ms),
                    "ref_alone_after_runtime_ms": after}
        scaled = speed_summary([r * factor for r in ref_ms], new_ms, pairs=True)
        return {**head, **wider(scaled, taking_turns), **extra}


def wider(chosen: dict, other: dict) -> dict:
    """`chosen`'s summary with the interval's upper end raised to `other`'s: where the reference
    was slowed, the speedup comes from the baseline taken before the candidate (the lower
    estimate, safe from the candidate), but a baseline that came out fast by chance makes it too
    low (L3 copies with basis `alone` at 0.65-0.94 on the H100, 2026-12-06, their intervals all
    below 1), so the interval reaches the interleaved ratio's; where the reference was faster
    interleaved than alone, the interleaved ratio stands and the interval reaches the ratio with
    the reference at its alone speed. The point and the lower end stay `chosen`'s: the reward
    reads the one and `records.faster` the other, so a candidate gains nothing by either."""
    return {**chosen, "speedup_high": max(chosen["speedup_high"], other["speedup_high"])}


@dataclass(frozen=True)
class Baseline:
    """The reference timed alone before any candidate code ran: per-call ms of its batches of
    `k` calls, the K every candidate of its task, shape and lane is timed with meanwhile."""

    k: int
    ms: tuple[float, ...]
    big: bool = False


class AloneTimes:
    """The last minute's baseline per (task, shape) of one lane (the trusted worker's)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.entries: dict[tuple, tuple[float, Baseline]] = {}

    def fresh(self, key: tuple) -> Baseline | None:
        when, baseline = self.entries.get(key, (-math.inf, None))
        return baseline if self.clock() - when <= ALONE_MAX_AGE_S else None

    def add(self, key: tuple, baseline: Baseline) -> None:
        self.entries[key] = (self.clock(), baseline)

    def drop(self, key: tuple) -> None:
        self.entries.pop(key, None)


def interleaved_ms(timing: Timing) -> float:
    """The interleaved reference's time per call: the median of its pairs' means
    (speed.pair_means), what the speedup's ratios are made of, so the reference is judged on the
    same (red team round 56: a reference slowed in 4 of 12 batches, one in each of 4 pairs, left
    the median of its batches where it was and raised the median of the pair ratios by all of
    it)."""
    return statistics.median(pair_means(timing.ref_ms))


def slowed(timing: Timing, alone_ms: tuple[float, ...]) -> bool:
    """Whether the interleaved reference was slower than alone by more than noise."""
    return interleaved_ms(timing) > statistics.median(alone_ms) * (1 + CONTENTION_TOLERANCE)


def stale(timing: Timing, alone_ms: tuple[float, ...]) -> bool:
    """Whether the interleaved reference was faster than alone by more than noise: the baseline
    no longer says how fast the reference is alone (measured again for the next candidate)."""
    return interleaved_ms(timing) * (1 + CONTENTION_TOLERANCE) < statistics.median(alone_ms)


def alone_batches(timing_batches: int) -> int:
    """Batches of each side timed alone (`reference_alone`, `candidate_alone`)."""
    return max(3, timing_batches // 2)


Kept = list  # [(seeds, outputs)] of the batches a candidate was timed alone in, to verify


def candidate_alone(candidate: Side, draw: Callable[[int], list], k: int, batches: int,
                    hold_bytes: float, most_bytes: float) -> tuple[tuple[float, ...], Kept]:
    """Per-call ms of `batches` candidate batches of `k` fresh calls (after one warmup batch),
    back to back while the reference worker is idle: the conditions the `Baseline` times the
    reference in. Each timed batch's outputs are copied (after its clock stopped: the next batch
    reuses the memory, as the reference's batches do) and kept with their seeds for
    `check_alone`; outputs larger than the reference's (`hold_bytes` a batch) are incorrect.
    ((), []) where the kept outputs would pass `most_bytes`: the reference is then scaled to
    alone (`Timing.fields`)."""
    if hold_bytes * batches > most_bytes:
        return (), []
    times, kept = [], []
    for batch in range(batches + 1):
        seeds = [secrets.randbits(63) for _ in range(k)]
        _, outs, _, wall_ms = candidate.go([draw(seed) for seed in seeds], candidate.limit_for(k))
        tensors = [t for call in outs for t in call]
        if sum(t.numel() * t.element_size() for t in tensors) > hold_bytes:
            raise Verdict("incorrect", "outputs larger than the reference's")
        if os.environ.get("WARPK_DEBUG_TIMING"):  # with WARPK_WORKER_LOGS: the trusted worker's log
            print(f"alone batch {batch} k={k} candidate {wall_ms:.3f} ms", file=sys.stderr, flush=True)
        if batch:
            times.append(wall_ms / k)
            kept.append((seeds, [[t.clone() for t in call] for call in outs]))
        del outs, tensors
    return tuple(times), kept


def check_alone(reference: Side, draw: Callable[[int], list], k: int, kept: Kept,
                verify: Callable[[list, list, str], object]) -> None:
    """The candidate's alone batches verified against the reference worker on the same inputs
    (untimed)."""
    for batch, (seeds, outs) in enumerate(kept):
        _, ref_outs, _, _ = reference.go([draw(seed) for seed in seeds], reference.limit_for(k))
        for i, (ref_out, out) in enumerate(zip(ref_outs, outs, strict=True)):
            verify(ref_out, out, f"call {i} of batch {batch} timed alone")
        del ref_outs


def reference_alone(reference: Side, draw: Callable[[int], list], k: int, batches: int,
                    big: bool = False) -> tuple[float, ...]:
    """Per-call ms of `batches` reference batches of `k` fresh calls, timed the same way as in
    `time_batches` (a huge task's memory given back after each), after at least WARMUP_BATCHES
    and BASELINE_WARMUP_MS of batches: a worker just built is slower at first (CPU, 2026-12-06:
    its batches went from 24 to 15-18 ms over the first six, and a baseline slower than the
    reference really is would let a slowed interleaved reference pass as unslowed)."""
    times: list[float] = []
    warm_ms, batch = 0.0, 0
    while len(times) < batches:
        calls = [draw(secrets.randbits(63)) for _ in range(k)]
        _, outs, _, wall_ms = reference.go(calls, reference.limit_for(k), consume=big, release=big)
        if big:
            reference.settle()
            freeze_reference(reference)
        del calls, outs
        if os.environ.get("WARPK_DEBUG_TIMING"):
            print(f"baseline batch {batch} k={k} reference {wall_ms:.3f} ms", file=sys.stderr, flush=True)
        if batch >= WARMUP_BATCHES and warm_ms >= BASELINE_WARMUP_MS:
            times.append(wall_ms / k)
        warm_ms, batch = warm_ms + wall_ms, batch + 1
    return tuple(times)


def freeze_reference(reference: Side) -> None:
    """A diagnostic (WARPK_DEBUG_FREEZE_REFERENCE): the reference worker frozen after giving its
    memory back, as the candidate's is (its next message thaws it): does the candidate's freeze
    make the sides differ? (H100 2026-12-07: the reference ~10% faster on huge copies)."""
    still = getattr(reference, "still", None)
    if still is not None and os.environ.get("WARPK_DEBUG_FREEZE_REFERENCE"):
        still.freeze()


def calls_per_batch(ref_call_s: float, io_bytes: float, batch_target_ms: float,
                    batch_memory_bytes: int) -> int:
    """K: a reference batch of >= batch_target_ms whose inputs + outputs fit batch_memory_bytes."""
    by_time = math.ceil(batch_target_ms / 1e3 / max(ref_call_s, 1e-7))
    by_memory = int(batch_memory_bytes // max(io_bytes, 1.0))
    return max(1, min(by_time, by_memory, MAX_CALLS_PER_BATCH))


def debug_clocks(torch):
    """The GPU clocks' reader for the debug log (warpk.evaluator.debug_clocks), or None."""
    if not os.environ.get("WARPK_DEBUG_TIMING") or torch is None or not torch.cuda.is_available():
        return None
    from warpk.evaluator.debug_clocks import DebugClocks

    return DebugClocks(torch)


def time_batches(candidate: Side, reference: Side, still: Still, draw: Callable[[int], list],
                 verify: Callable[[list, list, str], object], k: int, batches: int, big: bool,
                 torch=None) -> Timing:
    """`batches` used batches of `k` calls (after WARMUP_BATCHES; an odd count rounds up to whole
    pairs). `draw(seed)` gives one call's inputs, `verify(ref_outputs, candidate_outputs, where)`
    raises on a mismatch. Half the batches have either side first, in a shuffled sequence, and
    the result lists them in pairs (one of either order, in the order they ran); `big`: the
    second side on the same inputs drawn again (one set of outputs on the device at a time
    besides the delivered ones), each giving its device memory back before the other runs."""
    ref_ms: list[float] = []
    new_ms: list[float] = []
    batches += batches % 2  # whole pairs

    # Each side is frozen from its answer to our next message (link.py), so what it does after
    # answering (freeing, unmapping) waits for its next Stage and never overlaps the other's batch.
    clocks = debug_clocks(torch)  # WARPK_DEBUG_TIMING on a GPU only: the log's clocks
    seen: dict[str, str] = {}

    def run_candidate(calls: list[list]) -> tuple[list, float]:
        if clocks:
            seen["candidate"] = clocks.read()
        _, outs, _, wall_ms = candidate.go(calls, candidate.limit_for(k), consume=big, release=big)
        if big:
            candidate.settle()  # a huge task: its device memory is given back before the other side runs
        still.freeze()  # nothing of it runs until its next batch
        return outs, wall_ms

    def run_reference(calls: list[list]) -> tuple[list, float]:
        if clocks:
            seen["reference"] = clocks.read()
        _, outs, _, wall_ms = reference.go(calls, reference.limit_for(k), consume=big, release=big)
        if big:
            reference.settle()
            freeze_reference(reference)
        return outs, wall_ms

    orders = batch_orders(batches)
    timed: dict[tuple[str, ...], list[tuple[float, float]]] = {order: [] for order in ORDERS}
    still.freeze()
    try:
        for batch, order in enumerate(orders):  # the first WARMUP_BATCHES warm both up, unused
            seeds = [secrets.randbits(63) for _ in range(k)]
            calls = [draw(seed) for seed in seeds]
            prints = [fingerprint(torch, c) for c in calls] if big else None
            done = {}
            for side in order:
                if big and done:  # our copy went once packed: the same inputs drawn again
                    calls = [draw(seed) for seed in seeds]
                    check_redrawn(torch, calls, prints)
                done[side] = (run_candidate if side == "candidate" else run_reference)(calls)
            (new_outs, new_wall), (ref_outs, ref_wall) = done.pop("candidate"), done.pop("reference")
            del calls
            for i, (ref_out, out) in enumerate(zip(ref_outs, new_outs, strict=True)):
                verify(ref_out, out, f"timed call {i} of batch {batch}")
            del ref_outs, new_outs
            if os.environ.get("WARPK_DEBUG_TIMING"):  # with WARPK_WORKER_LOGS: the trusted worker's log
                where = (f" clocks before: reference {seen['reference']} candidate {seen['candidate']}"
                         if clocks else "")
                print(f"batch {batch} k={k} reference {ref_wall:.3f} ms candidate {new_wall:.3f} ms "
                      f"({order[0]} first){where}", file=sys.stderr, flush=True)
            if batch >= WARMUP_BATCHES:
                timed[order].append((ref_wall / k, new_wall / k))
    finally:
        still.thaw()
    for one, other in zip(*timed.values(), strict=True):  # pairs: one batch of either order
        ref_ms += [one[0], other[0]]
        new_ms += [one[1], other[1]]
    return Timing(k, tuple(ref_ms), tuple(new_ms), still.method, big)


ORDERS = (("candidate", "reference"), ("reference", "candidate"))


def batch_orders(batches: int) -> list[tuple[str, ...]]:
    """Who comes first in each batch: the warmup batches at random, then `batches` (even) in a
    shuffled sequence with as many of either order, so the next order cannot be told from the
    last (a sequence of alternating pairs told a candidate which batches the reference came
    after it: a review, session 35)."""
    rng = secrets.SystemRandom()
    warmup = [rng.choice(ORDERS) for _ in range(WARMUP_BATCHES)]
    timed = [ORDERS[0], ORDERS[1]] * (batches // 2)
    rng.shuffle(timed)
    return warmup + timed
