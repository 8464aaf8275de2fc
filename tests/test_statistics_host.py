from __future__ import annotations

import pytest

from harness.core.statistics import (
    bootstrap_median_ci,
    describe,
    geometric_mean,
    mann_whitney_u,
    outliers,
)


def test_mann_whitney_exact_small_samples() -> None:
    # Complete separation of 5 vs 5: U = 0; exact two-sided p = 2 / C(10, 5) = 2 / 252.
    u, p = mann_whitney_u([1.0, 2, 3, 4, 5], [6.0, 7, 8, 9, 10])
    assert u == 0.0 and p == pytest.approx(2 / 252)
    u, p = mann_whitney_u([1.0, 3, 5], [2.0, 4, 6])
    assert u == 3.0 and p == pytest.approx(0.7)  # U=3 of 9: P(U<=3) = 7/20, doubled


def test_mann_whitney_with_ties_is_exact() -> None:
    _, p = mann_whitney_u([1.0, 1, 2, 2, 3], [2.0, 3, 3, 4, 4])
    assert p == pytest.approx(20 / 252)  # exact permutation p given the ties; the normal approximation said 0.0524


def test_outliers_by_median_absolute_deviation() -> None:
    assert outliers([1.0, 1.1, 0.9, 1.05, 0.95, 9.0]) == (5,)
    assert outliers([1.0, 1.0, 1.0]) == ()


def test_describe_flags_unstable_spread_and_brackets_the_median() -> None:
    steady = describe([1.00, 1.01, 0.99, 1.00, 1.02])
    assert not steady.unstable and steady.ci_low <= steady.median <= steady.ci_high
    noisy = describe([1.0, 1.5, 0.7, 1.3, 0.8])
    assert noisy.unstable  # IQR 0.5 of median 1.0 > 10 %


def test_bootstrap_is_deterministic() -> None:
    data = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert bootstrap_median_ci(data) == bootstrap_median_ci(data)
    low, high = bootstrap_median_ci(data)
    assert 1.0 <= low < 3.5 < high <= 6.0


def test_geometric_mean() -> None:
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)


def test_small_sample_intervals_state_the_coverage_they_really_have() -> None:
    """Monte Carlo on lognormal timings: the printed coverage is never more than what is achieved."""
    import random

    from harness.core.statistics import median_coverage, ratio_interval

    assert median_coverage(3, 1) == 0.75 and median_coverage(4, 1) == 0.875 and median_coverage(5, 1) == 0.9375
    rng = random.Random(7)
    true_ratio = 1.0  # both sides from one distribution: the ratio of population medians is 1
    for n in (3, 4, 6):
        hits, claimed = 0, set()
        for _ in range(3000):
            a = [rng.lognormvariate(0, 0.2) for _ in range(n)]
            b = [rng.lognormvariate(0, 0.2) for _ in range(n)]
            interval = ratio_interval(a, b)
            claimed.add(round(interval.coverage, 6))
            hits += interval.low <= true_ratio <= interval.high
        (coverage,) = claimed
        assert hits / 3000 >= coverage - 0.02, (n, hits / 3000, coverage)
        assert coverage < 0.95  # and it says so instead of claiming 95 %


def test_outliers_are_found_when_most_samples_are_equal() -> None:
    from harness.core.statistics import outliers

    assert outliers([1.0, 1.0, 1.0, 1.0, 100.0]) == (4,)  # MAD = 0: the mean deviation decides
    assert outliers([1.0, 1.0, 1.0]) == ()
    assert outliers([1.0, 1.01, 0.99, 1.0, 1.02]) == ()
