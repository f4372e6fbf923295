"""Report statistics against scipy and against their textbook definitions, on known inputs."""

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from warpk import stats
from warpk.records import EvalRecord
from warpk.report.failures import category
from warpk.report.figures import pareto_front
from warpk.report.metrics import pass_at_k

RNG = np.random.default_rng(7)
X = RNG.normal(1.0, 0.5, size=12).tolist()
Y = (np.asarray(X) - RNG.normal(0.3, 0.4, size=12)).tolist()


def test_t_interval_is_scipys_student_t_interval():
    got = stats.t_interval(X[:3], 0.95)
    low, high = sps.t.interval(0.95, 2, loc=np.mean(X[:3]), scale=sps.sem(X[:3]))
    assert (got.low, got.high) == pytest.approx((low, high))
    # with 3 seeds the t quantile is 4.30, not the 1.96 of a normal approximation (audit §5.2)
    assert (got.high - got.estimate) / sps.sem(X[:3]) == pytest.approx(4.3027, abs=1e-3)


def test_t_interval_of_one_seed_has_no_interval_and_says_why():
    got = stats.t_interval([0.7], 0.95)
    assert got.estimate == 0.7 and got.low is None and got.high is None
    assert "one seed" in got.reason


def test_bootstrap_matches_scipy_with_the_same_generator():
    got = stats.bootstrap_ci(X, 0.9, 2000, seed=3)
    ref = sps.bootstrap(
        (np.asarray(X),),
        np.mean,
        n_resamples=2000,
        confidence_level=0.9,
        method="percentile",
        rng=np.random.default_rng(3),
    ).confidence_interval
    assert (got.low, got.high) == pytest.approx((ref.low, ref.high))
    assert got.low < np.mean(X) < got.high


def test_wilcoxon_matches_scipy_and_rank_biserial_matches_its_definition():
    got = stats.wilcoxon(X, Y)
    ref = sps.wilcoxon(X, Y)
    assert got.statistic == pytest.approx(ref.statistic)
    assert got.p_value == pytest.approx(ref.pvalue)
    d = np.asarray(X) - np.asarray(Y)
    ranks = sps.rankdata(np.abs(d))
    # r = (W+ - W-) / (n(n+1)/2) with no zero differences
    assert got.rank_biserial == pytest.approx((ranks[d > 0].sum() - ranks[d < 0].sum()) / (12 * 13 / 2))
    assert stats.wilcoxon(Y, X).rank_biserial == pytest.approx(-got.rank_biserial)


def test_wilcoxon_without_nonzero_difference_is_not_a_number():
    got = stats.wilcoxon([1.0, 2.0], [1.0, 2.0])
    assert got.p_value is None and got.reason == "no nonzero paired difference"


def _holm_by_definition(p):
    """Reject-set form of Holm: adjusted p_(i) = max_{j<=i} min(1, (m-j+1) p_(j))."""
    m, order = len(p), np.argsort(p)
    out = np.empty(m)
    for i, idx in enumerate(order):
        out[idx] = max(min(1.0, (m - j) * p[order[j]]) for j in range(i + 1))
    return out.tolist()


def test_holm_matches_its_definition_and_skips_none():
    # a family of real p-values: scipy's tests of shifted copies of X against Y
    family = [float(sps.wilcoxon(np.asarray(X) + shift, Y).pvalue) for shift in (-0.6, -0.3, 0.0, 0.3)]
    assert stats.holm(family) == pytest.approx(_holm_by_definition(family))
    assert all(a >= p for a, p in zip(stats.holm(family), family, strict=True))
    with_gap = stats.holm([family[0], None, family[2]])
    assert with_gap[1] is None
    assert [with_gap[0], with_gap[2]] == pytest.approx(_holm_by_definition([family[0], family[2]]))


def test_pass_at_k_equals_brute_force_over_subsets():
    for n, c in [(4, 0), (4, 1), (5, 2), (6, 6)]:
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(outcomes, k))
            assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    assert pass_at_k(2, 1, 3) is None


def test_pareto_front_keeps_only_non_dominated_points():
    points = [(1.0, 3.0), (2.0, 2.0), (2.5, 2.5), (3.0, 1.0), (4.0, 1.0)]
    assert pareto_front(points) == [(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)]


@pytest.mark.parametrize(
    "status, error, expected",
    [
        (
            "incorrect",
            "trial 0: output 0 differs: max abs err 0.0985 > tolerance 0.0001",
            "numerical mismatch",
        ),
        ("incorrect", "trial 0: output 0 dtype torch.float64 != reference torch.float32", "dtype mismatch"),
        ("runtime_error", "forward raised RuntimeError: shape '[-1, 2]' is invalid", "shape mismatch"),
        ("compile_error", "SyntaxError: invalid syntax (line 3)", "syntax error"),
        (
            "static_reject",
            "no ModelNew class: the candidate must define ModelNew",
            "static: no ModelNew class",
        ),
        ("crashed", "worker killed by SIGKILL", "worker killed"),
        ("runtime_error", "something nobody anticipated", "other"),
    ],
)
def test_failure_categories(status, error, expected):
    record = EvalRecord(task_id="t", candidate="c", candidate_sha="0", status=status, error=error)
    assert category(record) == expected


def test_the_smallest_possible_p_is_the_all_one_sign_exact_p():
    six = stats.wilcoxon([1, 2, 3, 4, 5, 6], [0] * 6)
    assert six.min_p == 2 / 2**6 == pytest.approx(six.p_value)  # all six favour x: the floor itself
    assert stats.wilcoxon([1, 1], [1, 1]).min_p is None  # no nonzero pair


def test_a_family_that_cannot_reach_significance_after_holm_says_so():
    six = stats.wilcoxon([1, 2, 3, 4, 5, 6], [0] * 6)  # min p 0.031
    note = stats.unreachable([six] * 12, 0.05)  # Holm over 12 needs p < 0.0042
    assert note.startswith("This design cannot reach significance") and "0.0312" in note
    assert stats.unreachable([six], 0.05) is None  # one test: 0.031 < 0.05 is reachable
    twenty = stats.wilcoxon(list(range(1, 21)), [0] * 20)
    assert stats.unreachable([twenty] * 12, 0.05) is None
