"""Statistics of a report, all computed with scipy.stats / numpy from the values given.

  t_interval      CI of a mean over seeds: mean +- t(1 - a/2, n-1) * sd / sqrt(n) (scipy.stats.t)
  bootstrap_ci    CI of a mean over tasks by resampling tasks (scipy.stats.bootstrap)
  wilcoxon        paired signed-rank test over tasks (scipy.stats.wilcoxon, two-sided) with the
                  matched-pairs rank-biserial correlation r = (W+ - W-) / (W+ + W-) as effect size
                  (+1: every nonzero difference favours the first sample)
  holm            Holm-Bonferroni step-down adjustment of a family of p-values
  unreachable     whether a family of tests can reach significance at all (PairedTest.min_p)

A statistic that cannot be computed (one seed, one task, no nonzero difference) is None with a
reason, never a placeholder number.

Non-goals: no choice of what to compare (the report stage decides); no p-value is ever typed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Interval:
    """An estimate and its confidence interval; low/high None with `reason` when not computable."""

    estimate: float | None
    low: float | None
    high: float | None
    n: int
    method: str
    reason: str | None = None


def t_interval(values: list[float], confidence: float) -> Interval:
    """Student-t interval of the mean of `values` (one value per seed)."""
    n = len(values)
    if n == 0:
        return Interval(None, None, None, 0, "t", "no values")
    mean = float(np.mean(values))
    if n < 2:
        return Interval(mean, None, None, n, "t", "one seed: no interval")
    sem = float(stats.sem(values))
    if sem == 0.0:
        return Interval(mean, mean, mean, n, "t", "identical values over seeds")
    low, high = stats.t.interval(confidence, n - 1, loc=mean, scale=sem)
    return Interval(mean, float(low), float(high), n, "t")


def geometric_t_interval(values: list[float], confidence: float) -> Interval:
    """`t_interval` of positive ratios on the log scale, shown back as a geometric mean and its
    interval (speedups, energy ratios)."""
    t = t_interval([math.log(v) for v in values], confidence)
    back = [None if v is None else math.exp(v) for v in (t.estimate, t.low, t.high)]
    return Interval(*back, t.n, "t (log scale)", t.reason)


def bootstrap_ci(
    values: list[float], confidence: float, n_resamples: int, seed: int, method: str = "percentile"
) -> Interval:
    """Bootstrap interval of the mean of `values` (one value per task), resampling tasks."""
    n = len(values)
    if n == 0:
        return Interval(None, None, None, 0, f"bootstrap-{method}", "no values")
    mean = float(np.mean(values))
    if n < 2:
        return Interval(mean, None, None, n, f"bootstrap-{method}", "one task: no interval")
    if len(set(values)) == 1:
        return Interval(mean, mean, mean, n, f"bootstrap-{method}", "identical values over tasks")
    result = stats.bootstrap(
        (np.asarray(values, dtype=float),),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method=method,
        rng=np.random.default_rng(seed),
    )
    ci = result.confidence_interval
    return Interval(mean, float(ci.low), float(ci.high), n, f"bootstrap-{method}")


@dataclass(frozen=True)
class PairedTest:
    """A two-sided Wilcoxon signed-rank test of x vs y paired by task."""

    n_pairs: int
    n_nonzero: int
    statistic: float | None  # scipy's W (the smaller of W+ and W-)
    p_value: float | None
    rank_biserial: float | None  # effect size in [-1, 1]; > 0: x tends to exceed y
    median_diff: float | None  # median of x - y
    reason: str | None = None

    @property
    def min_p(self) -> float | None:
        """The smallest two-sided p this design can give: every nonzero difference of one sign,
        2 / 2^n for n nonzero pairs (exact test); None without a nonzero pair."""
        return min(1.0, 2.0 ** (1 - self.n_nonzero)) if self.n_nonzero else None


def unreachable(tests: list[PairedTest], alpha: float) -> str | None:
    """A sentence saying that no test of this family can be significant after Holm, or None.

    Holm rejects nothing unless its smallest p is below alpha / m (m tests with a p-value), and
    no test's p can be below its `min_p`."""
    floors = [t.min_p for t in tests if t.p_value is not None and t.min_p is not None]
    if not floors:
        return None
    m, best = len(floors), min(floors)
    if best * m < alpha:
        return None
    pairs = max(t.n_nonzero for t in tests if t.p_value is not None)
    return (f"This design cannot reach significance: with at most {pairs} nonzero pairs the smallest "
            f"possible p is {best:.3g}, and Holm over {m} tests needs p < {alpha / m:.3g}; "
            "'no' here is not evidence of no effect")


def wilcoxon(x: list[float], y: list[float]) -> PairedTest:
    """Wilcoxon signed-rank test of x vs y (same length, paired); zeros dropped ('wilcox')."""
    if len(x) != len(y):
        raise ValueError(f"paired samples differ in length: {len(x)} vs {len(y)}")
    diff = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    n = len(diff)
    nonzero = diff[diff != 0]
    median = float(np.median(diff)) if n else None
    if n == 0:
        return PairedTest(0, 0, None, None, None, None, "no task with a value in both arms")
    if len(nonzero) == 0:
        return PairedTest(n, 0, None, None, None, median, "no nonzero paired difference")
    ranks = stats.rankdata(np.abs(nonzero))
    w_plus, w_minus = float(ranks[nonzero > 0].sum()), float(ranks[nonzero < 0].sum())
    effect = (w_plus - w_minus) / (w_plus + w_minus)
    result = stats.wilcoxon(x, y, zero_method="wilcox", alternative="two-sided")
    return PairedTest(n, len(nonzero), float(result.statistic), float(result.pvalue), effect, median)


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (same order; None stays None and is not counted).

    Sorted ascending p_(1) <= ... <= p_(m): adjusted p_(i) = max over j <= i of (m - j + 1) p_(j),
    capped at 1 (Holm 1979).
    """
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None and not math.isnan(p))
    m = len(present)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted
