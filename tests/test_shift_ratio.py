"""The ratio and interval of a rounds row (statistics.shift_ratio): Hodges-Lehmann, inverting the
Mann-Whitney test, so a machine whose rounds fall in two speed modes cannot split test and interval."""

from __future__ import annotations

import math
import random

import pytest

from harness.core import statistics
from harness.core.statistics import ALPHA, mann_whitney_u, shift_ratio
from harness.judge.compare import evidence


def lognormal(rng: random.Random, n: int, level: float, sigma: float = 0.2) -> list[float]:
    return [level * math.exp(rng.gauss(0, sigma)) for _ in range(n)]


def two_modes(rng: random.Random, n: int, level: float) -> list[float]:
    """Round medians of this machine: each round in a fast or a slow state 1.65x apart, 2 % noise."""
    return [level * (1.65 if rng.random() < 0.5 else 1.0) * math.exp(rng.gauss(0, 0.02)) for _ in range(n)]


def test_the_interval_covers_the_true_ratio_as_often_as_it_claims() -> None:
    rng = random.Random(3)
    trials, covered, claimed = 2000, 0, []
    for _ in range(trials):
        n1, n2 = rng.randint(4, 14), rng.randint(4, 14)
        _, interval = shift_ratio(lognormal(rng, n1, 1.0), lognormal(rng, n2, 1.25))
        covered += interval.low <= 1.25 <= interval.high
        claimed.append(interval.coverage)
    assert min(claimed) >= 0.95  # the exact coverage, at least the nominal where a bound exists
    # the binomial's 99.9 % band around 0.95 at 2000 trials is about +-1.6 %
    assert covered / trials >= sum(claimed) / trials - 0.016, covered / trials


def test_the_interval_excludes_one_exactly_when_the_test_rejects() -> None:
    rng = random.Random(4)
    for n in (5, 8, 20, 60):  # the exact critical value up to 50 a side, the normal one beyond
        agree = 0
        for _ in range(300):
            a, b = lognormal(rng, n, 1.0), lognormal(rng, n, 1.0 + rng.choice((0.0, 0.05, 0.1, 0.2)))
            _, interval = shift_ratio(a, b)
            _, p = mann_whitney_u(a, b)
            agree += (p <= 1 - 0.95) == (not interval.low <= 1 <= interval.high)
        assert agree == 300, (n, agree)


@pytest.mark.parametrize(
    ("n1", "n2"), [(20, 20), (50, 50), (53, 53), (56, 56), (58, 58), (60, 60), (70, 90), (300, 250)]
)
def test_at_every_u_near_the_boundary_the_interval_and_the_test_agree(n1: int, n2: int) -> None:
    """Tie-free rounds with each U around the critical value, one by one: the interval excludes 1
    exactly when p <= 0.05. Beyond 50 a side the critical value takes the test's continuity
    correction (without it, at 53, 56 or 58 a side the interval cut one U further out than the test:
    at that U p was just above 0.05 and the interval excluded 1)."""
    sigma = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    near = math.floor(n1 * n2 / 2 - 0.5 - statistics.NormalDist().inv_cdf(0.975) * sigma)
    for target in range(near - 6, near + 7):
        below = [min(n2, max(0, target - n2 * i)) for i in range(n1)]  # a's i-th above below[i] of b's values
        a = [c + 0.5 + i * 1e-6 for i, c in enumerate(below)]
        b = [float(j + 1) for j in range(n2)]
        u, p = mann_whitney_u(a, b)
        assert u == target
        for x, y in ((a, b), (b, a)):  # either direction
            _, interval = shift_ratio(x, y)
            assert (p <= 0.05) == (not interval.low <= 1 <= interval.high), (n1, n2, target, p, interval)


def lattice(rng: random.Random, n: int, level: int, step: float = 0.05, spread: float = 1.0) -> list[float]:
    """Tied observations: the log of each on a lattice of `step` (a timer's resolution, in log space),
    the level plus a rounded normal draw, so b = lattice(level + k) is a shifted by exactly k steps."""
    return [math.exp(step * (level + round(rng.gauss(0, spread)))) for _ in range(n)]


def test_with_ties_the_interval_covers_at_least_what_it_states() -> None:
    """Ties leave the interval's critical value the tie-free one; the closed interval then covers at
    least what it states (Noether 1967), in the exact range and under the normal approximation beyond."""
    rng = random.Random(56)
    for n1, n2, trials in ((5, 5, 400), (8, 8, 400), (12, 10, 400), (20, 20, 300), (60, 60, 200)):
        covered, stated = 0, 0.0
        for _ in range(trials):
            a, b = lattice(rng, n1, 0), lattice(rng, n2, 2)
            assert len(set(a)) < n1 or len(set(b)) < n2  # tied
            _, interval = shift_ratio(a, b)
            true = math.exp(0.05 * 2)
            covered += interval.low * (1 - 1e-12) <= true <= interval.high * (1 + 1e-12)
            stated += interval.coverage
        # the binomial's 99.9 % band around 0.95 at 200 trials is about +-5 %
        assert covered / trials >= stated / trials - 0.05, (n1, n2, covered / trials, stated / trials)
        assert stated / trials >= 0.95 - 1e-9


def test_pairwise_order_statistics_are_those_of_every_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond _SORT_PAIRS differences the selection never forms them all: it must pick the same
    elements as sorting them, ties and duplicates included (checked here with a tiny _SORT_PAIRS)."""
    monkeypatch.setattr(statistics, "_SORT_PAIRS", 8)
    rng = random.Random(7)
    for _ in range(600):
        n1, n2 = rng.randint(1, 25), rng.randint(1, 25)
        if rng.random() < 0.5:
            xs = sorted(rng.choice([0.0, 0.1, 0.3, 1.0]) for _ in range(n1))
            ys = sorted(rng.choice([0.0, 0.2, 0.3, 1.1]) for _ in range(n2))
        else:
            xs, ys = sorted(rng.gauss(0, 1) for _ in range(n1)), sorted(rng.gauss(0, 1) for _ in range(n2))
        every = sorted(y - x for x in xs for y in ys)
        ranks = [0, len(every) - 1, *(rng.randrange(len(every)) for _ in range(3))]
        assert statistics.pairwise_order_statistics(xs, ys, ranks) == [every[k] for k in ranks]


def test_many_rounds_a_side_get_the_same_ratio_and_interval_as_sorting_every_ratio() -> None:
    """A budget's rounds (here 600 v 500, 300,000 ratios, selected rather than sorted): the estimate
    and the normal approximation's interval, [d_(C+1), d_(n1 n2 - C)] with C = floor(n1 n2 / 2 - 1/2 - z sigma)."""
    rng = random.Random(8)
    a, b = two_modes(rng, 600, 1.0), two_modes(rng, 500, 1.05)
    ratio, interval = shift_ratio(a, b)
    every = sorted(math.log(y) - math.log(x) for x in sorted(a) for y in sorted(b))
    total = len(every)
    sigma = math.sqrt(total * (600 + 500 + 1) / 12)
    critical = math.floor(total / 2 - 0.5 - statistics.NormalDist().inv_cdf(0.975) * sigma)
    assert ratio == math.exp((every[total // 2 - 1] + every[total // 2]) / 2)
    assert (interval.low, interval.high) == (math.exp(every[critical]), math.exp(every[total - 1 - critical]))
    assert 0.95 <= interval.coverage < 0.951 and interval.low < 1.05 < interval.high


def test_the_estimate_is_the_median_of_every_pairwise_ratio() -> None:
    ratio, interval = shift_ratio([1.0, 2.0, 4.0], [2.0, 4.0, 8.0])
    assert ratio == 2.0 and interval.low <= 2.0 <= interval.high
    assert math.isnan(shift_ratio([1.0, 0.0], [1.0, 2.0])[0])  # no log of 0: no ratio


def test_rounds_in_two_speed_modes_still_show_a_thirty_percent_change_and_no_false_one() -> None:
    """The finding behind it: real `ab` sessions of 32 rounds a side, p 1e-4, whose ratio of medians
    (1.11 [0.89-1.64]) flipped with the mode the medians landed in."""
    rng = random.Random(5)
    sessions = 200

    def called(shift: float) -> int:
        found = 0
        for _ in range(sessions):
            a, b = two_modes(rng, 32, 1.0), two_modes(rng, 32, 1.0 + shift)
            ratio, interval, p = evidence(a, b, rounds=True)
            found += p < ALPHA and not interval.low <= 1 <= interval.high
        return found

    assert called(0.30) >= 0.9 * sessions
    assert called(0.0) <= 0.09 * sessions  # 5 % expected; 18 is past the binomial's 99.9th percentile
