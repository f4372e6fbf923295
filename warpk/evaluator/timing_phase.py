"""The trusted worker's timing phase, a part of trusted.Session: one warmup batch, then
`timing_batches` batches of K calls, K sized so a batch of the reference lasts >=
batch_target_ms (and fits batch_memory_bytes), each call on its own fresh inputs, reference and
candidate in a random order per batch (a task over BIG_IO_BYTES: the candidate first). Every
timed call's output is verified. The candidate's own clock is believed for resolution only where
the trusted wall clock (Go to outputs here, less delivery) allows it (`wall_bound_ms`); a batch
it contradicts is replaced, and past REFUSALS_PER_BATCH replacements per batch the candidate is
`implausible`.

Non-goals: no speed statistics (warpk.evaluator.speed), no protocol order (trusted.Session.run).
"""

from __future__ import annotations

import math
import os
import secrets
import statistics
import sys

from warpk.evaluator.checks import Verdict, check_correct, check_redrawn, fingerprint
from warpk.evaluator.link import BIG_IO_BYTES
from warpk.evaluator.speed import speed_summary

MAX_CALLS_PER_BATCH = 4096
# The candidate's reported time must be >= its go->outputs wall time, less the delivery the
# reference needed for the same bytes (x OVERHEAD_FACTOR), less WALL_SLACK_MS (IPC, JSON) and
# WALL_SLACK_FRACTION of the wall: what its own clock may be short by (the residual risk).
WALL_SLACK_MS = 3.0
WALL_SLACK_FRACTION = 0.05
OVERHEAD_FACTOR = 1.5
# A contradicted batch is replaced; a lie contradicts every batch, a stalled machine only some
# (seen in CI: 11 of 17 on a freshly installed 2-core box), so a candidate gets this many
# replacements per wanted batch before it is `implausible`.
REFUSALS_PER_BATCH = 3


def wall_bound_ms(wall_ms: float, ref_ms: float, ref_wall_ms: float, mapping_ms: float) -> float:
    """The least time a candidate may report for a batch the trusted clock saw take `wall_ms`
    (go to outputs here): less 1.5 x the delivery the reference's batch of the same bytes needed
    (its wall less its compute) plus the calibrated mapping of a device delivery, less the slack."""
    overhead_ms = (max(ref_wall_ms - ref_ms, 0.0) + mapping_ms) * OVERHEAD_FACTOR
    return wall_ms - overhead_ms - WALL_SLACK_MS - WALL_SLACK_FRACTION * wall_ms


class TimingPhase:
    """Session's timing phase; it uses its link (encode, stage_encoded, go, settle), its reference
    (inputs, reference_batch) and correctness's sizes (ref_call_s, result["io_bytes"])."""

    def calls_per_batch(self) -> int:
        s = self.s
        by_time = math.ceil(s.batch_target_ms / 1e3 / max(self.ref_call_s, 1e-7))
        by_memory = int(s.batch_memory_bytes // max(self.result["io_bytes"], 1.0))
        return max(1, min(by_time, by_memory, MAX_CALLS_PER_BATCH))

    def timing(self) -> None:
        torch, s = self.torch, self.s
        self.phase = "timing"
        k = self.calls_per_batch()
        mapping_ms = self.carrier_for(k).mapping_ms(self.out_bytes * k)  # outputs sized by correctness
        ref_ms, new_ms, walls, refused, confirmed = [], [], [], [], []
        batch = -1
        while len(new_ms) < s.timing_batches and len(refused) <= REFUSALS_PER_BATCH * s.timing_batches:
            batch += 1  # batch 0 warms both up and is not used
            seeds = [secrets.randbits(63) for _ in range(k)]
            calls = [self.inputs(seed) for seed in seeds]
            # A huge task: the candidate first, then the reference on the same inputs drawn again
            # (one set of outputs held at a time); otherwise a random order per batch.
            big = self.result["io_bytes"] > BIG_IO_BYTES
            candidate_first = big or secrets.randbelow(2) == 1
            # The candidate gets its inputs just before its Go, never while the reference runs.
            if candidate_first:
                encoded = self.encode(calls)
                if big:
                    prints = [fingerprint(torch, c) for c in calls]
                    del calls
                self.stage_encoded(*encoded)
                ran, outs, _, wall_ms = self.go(k, self.limit_for(k), release=big)
                self.settle()  # the reference is timed next: nothing of the candidate's may overlap it
                if big:
                    calls = [self.inputs(seed) for seed in seeds]
                    check_redrawn(torch, calls, prints)
            ref_outs, r_ms, r_wall_ms = self.reference_batch(calls)
            if not candidate_first:
                self.stage_encoded(*self.encode(calls))  # no fd is held while the reference runs
                del calls
                ran, outs, _, wall_ms = self.go(k, self.limit_for(k))
            else:
                del calls
            for i, (ref_out, out) in enumerate(zip(ref_outs, outs, strict=True)):
                check_correct(torch, ref_out, out, s, f"timed call {i} of batch {batch}")
            del outs, ref_outs
            claimed = ran.compute_ms
            bound_ms = wall_bound_ms(wall_ms, r_ms, r_wall_ms, mapping_ms)
            if os.environ.get("WARPK_DEBUG_TIMING"):
                print(f"batch {batch} k={k} ref {r_ms:.3f}/{r_wall_ms:.3f} cand {claimed}/{wall_ms:.3f} "
                      f"mapping {mapping_ms:.3f} bound {bound_ms:.3f}", file=sys.stderr, flush=True)
            if not batch:
                continue
            if claimed is None or not math.isfinite(claimed) or claimed <= 0 or claimed < bound_ms:
                refused.append(f"{claimed!r} ms reported, >= {bound_ms:.4g} ms by the trusted clock")
                continue
            ref_ms.append(r_ms / k)
            new_ms.append(max(min(claimed, wall_ms), bound_ms, 1e-6) / k)  # never below what the clock saw
            walls.append(wall_ms)
            confirmed.append(min(max(bound_ms / max(claimed, 1e-9), 0.0), 1.0))
        if len(refused) > REFUSALS_PER_BATCH * s.timing_batches:
            raise Verdict(
                "implausible",
                f"in {len(refused)} of {len(refused) + len(new_ms)} timed batches of {k} calls the "
                "candidate's own clock reported less time than the trusted wall clock (go to outputs, "
                f"less delivery) allows, e.g. {refused[0]}",
            )
        self.result.update(calls_per_batch=k, batches=len(new_ms), wall_ms=statistics.median(walls),
                           clock_confirmed=statistics.median(confirmed))
        self.confirmed_call_ms = statistics.median(c * n for c, n in zip(confirmed, new_ms, strict=True))
        self.result.update(speed_summary(ref_ms, new_ms))
