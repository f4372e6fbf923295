"""The v3 timing loop (warpk.evaluator.timing_phase.time_batches) with in-process fake sides:
only the trusted clock's round trips count, the candidate is frozen whenever the reference runs,
huge tasks run in either order, the second side on inputs drawn again, and batches come in pairs
with each side first once, the ratio taken per pair."""

from __future__ import annotations

import dataclasses
import statistics

import pytest
import torch

from warpk.evaluator.checks import Verdict
from warpk.evaluator.timing_phase import Timing, calls_per_batch, time_batches


class Still:
    method = "fake"

    def __init__(self):
        self.frozen = False
        self.freezes = 0

    def freeze(self):
        self.frozen, self.freezes = True, self.freezes + 1

    def thaw(self):
        self.frozen = False


class FakeSide:
    """A worker whose round trips take `wall_ms` on the trusted clock; outputs = f(inputs)."""

    def __init__(self, name, wall_ms, still, log, f=lambda x: x * 2, second=1.0):
        self.name, self.wall_ms, self.still, self.log, self.f = name, wall_ms, still, log, f
        self.second = second  # a round trip's factor when it comes second in its batch

    def go(self, calls, limit_s, consume=False, **flags):
        if self.name == "candidate":  # as the real link: thawed for its Go, frozen at its answer
            self.still.thaw()
        self.log.append((self.name, self.still.frozen, [c[0] for c in calls]))
        if self.name == "candidate":
            self.still.freeze()
        outs = [[self.f(c[0])] for c in calls]
        if consume:
            calls.clear()
        factor = self.second if len(self.log) % 2 == 0 else 1.0  # the log holds this Go already
        return None, outs, [], self.wall_ms * factor * len(outs)

    def settle(self):
        pass

    def limit_for(self, calls):
        return 10.0


def verify(ref_out, out, where):
    if ref_out != out:
        raise Verdict("incorrect", f"{where}: differs")


def run(k=3, batches=9, big=False, cand_ms=1.0, ref_ms=2.0, cand_f=lambda x: x * 2, second=1.0):
    still, log = Still(), []
    cand = FakeSide("candidate", cand_ms, still, log, cand_f, second)
    ref = FakeSide("reference", ref_ms, still, log, second=second)
    timing = time_batches(cand, ref, still, lambda seed: [seed % 1000], verify, k, batches, big, torch)
    return timing, log, still


def test_the_speedup_is_the_ratio_of_the_trusted_round_trips():
    timing, _, _ = run(cand_ms=1.0, ref_ms=2.5)
    fields = timing.fields()
    assert fields["speedup"] == pytest.approx(2.5)
    assert fields["runtime_ms"] == pytest.approx(1.0) and fields["ref_runtime_ms"] == pytest.approx(2.5)
    assert fields["batches"] == 10 and fields["calls_per_batch"] == 3 and fields["freeze"] == "fake"  # pairs


def test_what_coming_second_gains_cancels_in_each_pair():
    # H100, 2026-12-07: on huge tasks the side coming second was ~10% faster in a third of the
    # batches (a tenth coming first); a median of per-batch ratios fell where the random order
    # put more batches
    sequences = set()
    for big in (False, True):
        for _ in range(3):
            timing, log, _ = run(batches=12, big=big, cand_ms=2.0, ref_ms=2.0, second=0.88)
            orders = [tuple(side for side, _, _ in log[i:i + 2]) for i in range(4, len(log), 2)]
            assert orders.count(("candidate", "reference")) == orders.count(("reference", "candidate")) == 6
            sequences.add(tuple(orders))
            ratios = [r / n for r, n in zip(timing.ref_ms, timing.new_ms, strict=True)]
            assert [round(x, 3) for x in ratios] == [0.88, 1.136] * 6  # each pair: one of either order
            fields = timing.fields()
            assert fields["speedup"] == pytest.approx(1.0)
            assert fields["speedup_low"] == pytest.approx(1.0) == fields["speedup_high"]
    assert len(sequences) > 1  # shuffled: the next order is not told by the last
    assert any(a == b for seq in sequences for a, b in zip(seq, seq[1:], strict=False))  # not in pairs


def test_the_candidate_is_frozen_whenever_the_reference_runs_and_never_while_it_runs():
    _, log, still = run(batches=20)
    assert {frozen for side, frozen, _ in log if side == "reference"} == {True}
    assert {frozen for side, frozen, _ in log if side == "candidate"} == {False}
    orders = {tuple(side for side, _, _ in log[i:i + 2]) for i in range(0, len(log), 2)}
    assert orders == {("candidate", "reference"), ("reference", "candidate")}  # random order
    assert not still.frozen  # thawed at the end: energy and other shapes come next


def test_both_sides_get_the_same_inputs_and_every_output_is_verified():
    _, log, _ = run()
    for i in range(0, len(log), 2):
        assert log[i][2] == log[i + 1][2]
    with pytest.raises(Verdict, match="timed call 0 of batch 0"):
        run(cand_f=lambda x: x * 3)


def test_a_huge_task_runs_in_either_order_and_redraws_the_second_sides_inputs():
    # A fixed order (the candidate first) gave copies of huge elementwise problems 1.03-1.17.
    _, log, still = run(big=True, batches=20)
    orders = {tuple(side for side, _, _ in log[i:i + 2]) for i in range(0, len(log), 2)}
    assert orders == {("candidate", "reference"), ("reference", "candidate")}
    assert {frozen for side, frozen, _ in log if side == "reference"} == {True}
    for i in range(0, len(log), 2):
        assert log[i][2] == log[i + 1][2]  # drawn again from the same seeds
    assert not still.frozen


def test_batches_are_sized_by_the_references_time_and_memory():
    assert calls_per_batch(0.001, 1e3, 20.0, 1 << 30) == 20
    assert calls_per_batch(1e-9, 1e3, 20.0, 1 << 30) == 4096  # capped
    assert calls_per_batch(0.001, 1 << 29, 20.0, 1 << 30) == 2  # memory first
    assert calls_per_batch(10.0, 1 << 31, 20.0, 1 << 30) == 1


def test_a_reference_slowed_while_the_candidate_existed_is_not_credited():
    timing, _, _ = run(cand_ms=1.0, ref_ms=2.0)
    slowed = timing.fields(alone_ms=(1.0,) * 5)  # alone it took half: the candidate slowed it
    assert slowed["speedup"] == pytest.approx(1.05) and slowed["ref_contention"] == pytest.approx(2.0)
    noise = timing.fields(alone_ms=(1.95,) * 5)  # within the tolerance: left alone
    assert noise["speedup"] == pytest.approx(2.0)
    untouched = timing.fields(alone_ms=(3.0,) * 5)  # alone it was slower: nothing to take back
    assert untouched["speedup"] == pytest.approx(2.0) and untouched["ref_alone_runtime_ms"] == 3.0


def test_a_reference_faster_interleaved_than_alone_widens_only_the_upper_end():
    # H100, 2026-12-07: the reference worker of huge L1 copies ~10% faster interleaved than in its
    # own baseline, the candidate as fast as that baseline: copies at 0.88-0.94, intervals below 1
    copy = Timing(1, ref_ms=(0.9, 0.91) * 6, new_ms=(1.0, 0.99) * 6, freeze="cgroup")
    fields = copy.fields(alone_ms=(1.0,) * 6)
    turns = copy.fields()
    assert fields["speedup"] == turns["speedup"] and fields["speedup_low"] == turns["speedup_low"] < 1
    assert turns["speedup_high"] < 1 <= fields["speedup_high"]  # reaches the reference at its alone speed
    assert fields["speedup_high"] == pytest.approx(1.0 / 0.995)  # alone 1.0 against the candidate's pairs
    assert fields["ref_contention"] == pytest.approx(0.905)
    noise = copy.fields(alone_ms=(0.94,) * 6)  # within the tolerance: as it was
    assert noise["speedup_high"] == turns["speedup_high"]


# --- the reference timed alone before the candidate (the baseline), kept for a minute -----------
def test_the_baseline_stands_for_a_minute_and_says_when_the_reference_was_slowed_or_is_stale():
    from warpk.evaluator.timing_phase import (
        ALONE_MAX_AGE_S,
        CONTENTION_TOLERANCE,
        AloneTimes,
        Baseline,
        Timing,
        slowed,
        stale,
    )

    now = [0.0]
    times = AloneTimes(clock=lambda: now[0])
    key = ("task source", "cpu")
    assert times.fresh(key) is None
    times.add(key, Baseline(4, (1.0, 1.0, 1.0)))
    assert times.fresh(key).k == 4 and times.fresh(("another task", "cpu")) is None
    alike = Timing(4, ref_ms=(1.0, 1.02, 0.98, 1.0), new_ms=(1.0,) * 4, freeze="cgroup")
    assert not slowed(alike, times.fresh(key).ms) and not stale(alike, times.fresh(key).ms)
    slower = Timing(4, ref_ms=(1.0 + 2 * CONTENTION_TOLERANCE,) * 4, new_ms=(1.0,) * 4, freeze="cgroup")
    assert slowed(slower, times.fresh(key).ms)
    faster = Timing(4, ref_ms=(1.0 - 2 * CONTENTION_TOLERANCE,) * 4, new_ms=(1.0,) * 4, freeze="cgroup")
    assert stale(faster, times.fresh(key).ms) and not slowed(faster, times.fresh(key).ms)
    times.drop(key)
    assert times.fresh(key) is None  # measured again before the next candidate
    times.add(key, Baseline(4, (1.0,) * 3))
    now[0] = ALONE_MAX_AGE_S + 1
    assert times.fresh(key) is None  # a minute old: measured again


def test_a_reference_slowed_in_one_batch_of_most_pairs_is_seen_as_slowed():
    # Red team round 56: a candidate can tell which batches the reference runs right after it
    # and slow those alone; 4 of 12 batches, one in each of 4 pairs, 2x: the median of the
    # reference's batches did not move, the median of the pair ratios rose by all of it.
    from warpk.evaluator.timing_phase import Timing, slowed

    ref = [2.0, 1.0] * 4 + [1.0, 1.0] * 2
    attack = Timing(7, ref_ms=tuple(ref), new_ms=(1.0,) * 12, freeze="cgroup", new_alone_ms=(1.0,) * 6)
    assert statistics.median(attack.ref_ms) == 1.0  # what the check read before
    assert slowed(attack, (1.0,) * 6)
    fields = attack.fields(alone_ms=(1.0,) * 6)
    assert fields["interleaved_speedup"] == pytest.approx(1.5) and fields["basis"] == "alone"
    assert fields["speedup"] == pytest.approx(1.0)


# --- the candidate timed alone too: a slowdown both sides share is not charged to it ------------
def test_a_slowdown_both_sides_share_while_taking_turns_is_not_charged_to_the_candidate():
    from warpk.evaluator.timing_phase import Timing

    # A copy: both sides 1.8x slower taking turns than back to back (ResNet18 on the H100).
    copy = Timing(7, ref_ms=(1.8,) * 6, new_ms=(1.8,) * 6, freeze="cgroup", new_alone_ms=(1.0,) * 6)
    fields = copy.fields(alone_ms=(1.0,) * 6)
    assert fields["speedup"] == pytest.approx(1.0) and fields["ref_contention"] == pytest.approx(1.8)
    assert fields["new_alone_runtime_ms"] == pytest.approx(1.0)
    assert fields["basis"] in ("alone", "interleaved")  # equal here
    assert fields["ref_alone_after_runtime_ms"] is None  # not timed again here
    # The reference timed alone again afterwards is reported beside, and decides nothing.
    drifted = dataclasses.replace(copy, ref_alone_after_ms=(1.6,) * 6).fields(alone_ms=(1.0,) * 6)
    assert drifted["ref_alone_after_runtime_ms"] == pytest.approx(1.6)
    assert {k: v for k, v in drifted.items() if k != "ref_alone_after_runtime_ms"} == {
        k: v for k, v in fields.items() if k != "ref_alone_after_runtime_ms"}
    # Without the candidate alone, the old correction: the reference scaled to alone + 5%.
    scaled = Timing(7, ref_ms=(1.8,) * 6, new_ms=(1.8,) * 6, freeze="cgroup").fields(alone_ms=(1.0,) * 6)
    assert scaled["speedup"] == pytest.approx(1.05 / 1.8) and "basis" not in scaled


def test_a_reference_slowed_for_the_candidate_alone_gains_it_nothing():
    from warpk.evaluator.timing_phase import Timing

    # Corpus 54's shape: only the reference slowed (2x) while the candidate existed; both sides
    # alone the same: the interleaved 2.0 is refused, the both-alone ratio 1.0 is the speedup.
    attack = Timing(7, ref_ms=(2.0,) * 6, new_ms=(1.0,) * 6, freeze="cgroup", new_alone_ms=(1.0,) * 6)
    fields = attack.fields(alone_ms=(1.0,) * 6)
    assert fields["speedup"] == pytest.approx(1.0) and fields["basis"] == "alone"
    assert fields["runtime_ms"] == pytest.approx(1.0) and fields["ref_runtime_ms"] == pytest.approx(1.0)
    # A candidate faster alone than taking turns still gets no more than the interleaved ratio.
    shy = Timing(7, ref_ms=(2.0,) * 6, new_ms=(2.0,) * 6, freeze="cgroup", new_alone_ms=(0.5,) * 6)
    fields = shy.fields(alone_ms=(1.0,) * 6)
    assert fields["speedup"] == pytest.approx(1.0) and fields["basis"] == "interleaved"
    assert fields["ref_runtime_ms"] == pytest.approx(2.0)  # the interleaved batches, unscaled


def test_where_the_two_ratios_disagree_the_interval_reaches_the_interleaved_one_and_nothing_else_moves():
    from warpk.evaluator.timing_phase import Timing

    # An L3 copy on the H100 (2026-12-06): the baseline came out fast (0.8), the reference
    # interleaved and the candidate alone at 1.0: basis `alone` at 0.8, whose own interval lies
    # below 1; the interleaved ratio (1.0) is in the interval now, the point and low end are not
    # moved, and the interleaved ratio is recorded beside.
    noise = (0.99, 1.0, 1.01, 1.0, 1.0, 1.0)
    copy = Timing(7, ref_ms=noise, new_ms=(1.0,) * 6, freeze="cgroup", new_alone_ms=noise)
    fields = copy.fields(alone_ms=tuple(0.8 * x for x in noise))
    assert fields["basis"] == "alone" and fields["speedup"] == pytest.approx(0.8)
    assert fields["speedup_low"] == pytest.approx(0.8) and fields["speedup_high"] >= 1.0
    assert fields["interleaved_speedup"] == pytest.approx(1.0)
    # An attack that slows the reference 2x while it exists: point and low end as before (the
    # upper end, which no reward and no `faster` reads, reaches its 2.0)
    attack = Timing(7, ref_ms=tuple(2 * x for x in noise), new_ms=(1.0,) * 6, freeze="cgroup",
                    new_alone_ms=noise).fields(alone_ms=noise)
    assert attack["speedup"] == pytest.approx(1.0) and attack["speedup_low"] <= 1.0
    assert attack["speedup_high"] == pytest.approx(2.01)  # per pair: (2 * 1.01 + 2) / 2
    assert attack["interleaved_speedup"] == pytest.approx(2.0)
    # Scaled to alone (the candidate not timed alone): the same widening, the point scaled
    scaled = Timing(7, ref_ms=(1.8,) * 6, new_ms=(1.8,) * 6, freeze="cgroup").fields(alone_ms=(1.0,) * 6)
    assert scaled["speedup"] == scaled["speedup_low"] == pytest.approx(1.05 / 1.8)
    assert scaled["speedup_high"] == pytest.approx(1.0) == scaled["interleaved_speedup"]
    # Scaled on its pairs' median (what the ratios are made of), not on its batches' median,
    # which may lie above the bound after scaling: corpus 45b on the H100 (2026-12-07), 4 batches
    uneven = Timing(7, ref_ms=(1.0, 1.2, 1.2, 1.2), new_ms=(1.0,) * 4, freeze="cgroup")
    uneven = uneven.fields(alone_ms=(1.0,) * 4)
    assert uneven["ref_contention"] == pytest.approx(1.15)  # pairs' means 1.1 and 1.2
    assert uneven["speedup"] == pytest.approx(uneven["interleaved_speedup"] * 1.05 / 1.15)
    assert uneven["speedup"] == pytest.approx(1.05)
    assert uneven["ref_runtime_ms"] == pytest.approx(1.2 * 1.05 / 1.15)  # above 1.05: the batches' median
    # Not slowed: one ratio, nothing beside it
    calm = Timing(7, ref_ms=noise, new_ms=(1.0,) * 6, freeze="cgroup").fields(alone_ms=noise)
    assert "interleaved_speedup" not in calm and "basis" not in calm


class TensorSide(FakeSide):
    """A FakeSide whose outputs are tensors (the alone batches weigh and copy them)."""

    def go(self, calls, limit_s, consume=False, **flags):
        ran, outs, ins, wall = super().go(calls, limit_s, consume, **flags)
        return ran, [[torch.tensor([float(o[0])])] for o in outs], ins, wall


def test_the_candidate_alone_runs_back_to_back_and_is_verified_on_its_inputs_by_the_reference():
    from warpk.evaluator.timing_phase import candidate_alone, check_alone

    def same(ref_out, out, where):
        if not torch.equal(ref_out[0], out[0]):
            raise Verdict("incorrect", f"{where}: differs")

    still, log = Still(), []
    cand = TensorSide("candidate", 1.0, still, log)
    ref = TensorSide("reference", 2.0, still, log)
    draw = lambda seed: [seed % 1000]  # noqa: E731
    times, kept = candidate_alone(cand, draw, 3, 4, hold_bytes=3 * 4, most_bytes=1000)
    assert times == (1.0,) * 4 and len(kept) == 4
    assert [side for side, _, _ in log] == ["candidate"] * 5  # one warmup, nothing of the reference
    check_alone(ref, draw, 3, kept, same)
    assert [inputs for _, _, inputs in log[1:5]] == [inputs for _, _, inputs in log[5:]]  # same inputs
    assert {frozen for side, frozen, _ in log if side == "reference"} == {True}
    liar = TensorSide("candidate", 1.0, still, [], f=lambda x: x * 3)
    _, wrong = candidate_alone(liar, draw, 3, 4, 12, 1000)
    with pytest.raises(Verdict, match="call 0 of batch 0 timed alone"):
        check_alone(ref, draw, 3, wrong, same)
    # more bytes than the reference's outputs: incorrect at once, nothing kept beyond the bound
    with pytest.raises(Verdict, match="larger than the reference"):
        candidate_alone(cand, draw, 3, 4, hold_bytes=3 * 4 - 1, most_bytes=1000)
    # outputs that would not fit the memory they may hold: not timed alone (the old correction)
    assert candidate_alone(cand, draw, 3, 4, hold_bytes=300, most_bytes=1000) == ((), [])


def test_the_reference_frozen_after_each_huge_batch_when_asked(monkeypatch):
    # a diagnostic of the huge copies' two speeds (scripts/device_acceptance.sh FREEZE_REFERENCE=1)
    still, ref_still, log = Still(), Still(), []
    cand = FakeSide("candidate", 1.0, still, log)
    ref = FakeSide("reference", 2.0, ref_still, log)
    time_batches(cand, ref, still, lambda seed: [seed % 1000], verify, 1, 4, True, torch)
    assert ref_still.freezes == 0  # not unless asked
    monkeypatch.setenv("WARPK_DEBUG_FREEZE_REFERENCE", "1")
    time_batches(cand, ref, still, lambda seed: [seed % 1000], verify, 1, 4, True, torch)
    assert ref_still.freezes == 4 + 2  # each timed batch and the two warmups
    time_batches(cand, ref, still, lambda seed: [seed % 1000], verify, 1, 4, False, torch)
    assert ref_still.freezes == 6  # small tasks: never
