"""Speed statistics of the interleaved timed batches (warpk.evaluator.trusted).

The speedup is the median of the reference/candidate ratios (interleaved batches: per pair of
batches, one with either side first), robust to a stalled batch, with a distribution-free 95%
interval from order statistics; "faster" (records.faster) means its lower end is above 1 +
records.SPEED_BIAS_MARGIN.

Non-goals: no timing itself, no torch.
"""

from __future__ import annotations

import math
import statistics


def median_interval(values: list[float]) -> tuple[float, float]:
    """A distribution-free >= 95% interval for the median: order statistics k and n+1-k with
    P(Binomial(n, 1/2) < k) <= 2.5% ([min, max] below 6 values, where none reaches 95%)."""
    ordered, n = sorted(values), len(values)
    k, below = 0, 0.0
    while True:
        below_next = below + math.comb(n, k) / 2**n
        if below_next > 0.025:
            break
        below, k = below_next, k + 1
    k = max(k, 1)
    return ordered[k - 1], ordered[n - k]


def pair_means(ms) -> list[float]:
    """The mean of each pair of consecutive batches (timing_phase.time_batches lists them in
    pairs, one of either order): what the interleaved ratios are made of."""
    return [(ms[i] + ms[i + 1]) / 2 for i in range(0, len(ms) - 1, 2)]


def speed_summary(ref_ms: list[float], new_ms: list[float], pairs: bool = False) -> dict:
    """Medians and IQRs per call; the speedup is the median of the ratios (robust to a stalled
    batch) with its distribution-free 95% interval. The ratios are per batch, or with `pairs` per
    pair of consecutive batches (the sums of its two), one with either side first
    (timing_phase.time_batches): neither order then weighs more in any ratio, and the median no
    longer depends on how many batches a random order put either way (H100, 2026-12-07: on huge
    L1 elementwise tasks a side's batch was in a ~10% faster mode in 29-37% of the batches it came
    second in, 4-11% of those it came first in). Pairs halve the count: 12 batches give 6 ratios,
    whose 95% interval is their range (10 per-batch ratios: from the second lowest to the second
    highest)."""
    def iqr(values):
        if len(values) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return q3 - q1

    if pairs:
        if len(ref_ms) % 2 or len(new_ms) != len(ref_ms):
            raise ValueError(f"{len(ref_ms)} and {len(new_ms)} batches are not whole pairs")
        ratios = [r / n for r, n in zip(pair_means(ref_ms), pair_means(new_ms), strict=True)]
    else:
        ratios = [r / n for r, n in zip(ref_ms, new_ms, strict=True)]
    low, high = median_interval(ratios)
    return dict(
        runtime_ms=statistics.median(new_ms),
        runtime_iqr_ms=iqr(new_ms),
        ref_runtime_ms=statistics.median(ref_ms),
        ref_runtime_iqr_ms=iqr(ref_ms),
        speedup=statistics.median(ratios),
        speedup_low=low,
        speedup_high=high,
    )
