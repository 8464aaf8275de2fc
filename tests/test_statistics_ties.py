"""The exact Mann-Whitney test with ties (harness/core/statistics.py): the permutation distribution of the
mid-rank sum given the tie pattern, checked against enumerating every split, scipy's permutation
test, the tie-free exact test it replaces, and the moments of the rank sum at 50 v 50."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction
from typing import Any

import pytest

from harness.core.statistics import (
    EXACT_MAX_N,
    _exact_tied_pvalue,
    _exact_u_pvalue,
    mann_whitney_u,
    rank_sum_distribution,
    smallest_exact_p,
)


def doubled_ranks(values: list[float]) -> list[int]:
    """Each value's doubled mid-rank in `values`, counted one by one."""
    return [2 * sum(v < x for v in values) + sum(v == x for v in values) + 1 for x in values]


def brute_force_p(a: list[float], b: list[float]) -> float:
    """Two-sided permutation p of a's rank sum over all C(n1 + n2, n1) ways to split the pool."""
    ranks = doubled_ranks([*a, *b])
    observed = sum(ranks[: len(a)])
    sums = [sum(ranks[i] for i in chosen) for chosen in itertools.combinations(range(len(ranks)), len(a))]
    below = sum(s <= observed for s in sums)
    above = sum(s >= observed for s in sums)
    return min(1.0, 2 * min(below, above) / len(sums))


def tied_sample(rng: random.Random, n: int, levels: list[float]) -> list[float]:
    return [rng.choice(levels) for _ in range(n)]


def normal_p(a: list[float], b: list[float]) -> float:
    """The normal approximation with tie and continuity correction, written out again."""
    n1, n2 = len(a), len(b)
    pooled = [*a, *b]
    u = sum(doubled_ranks(pooled)[:n1]) / 2 - n1 * (n1 + 1) / 2
    n = n1 + n2
    ties = sum(t**3 - t for t in (pooled.count(v) for v in set(pooled)))
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    return min(1.0, math.erfc(max((abs(u - n1 * n2 / 2) - 0.5) / sigma, 0.0) / math.sqrt(2)))


def test_reproduced_cases() -> None:
    # The normal approximation gave 0.043 (falsely significant); the exact permutation p is 20/252.
    u, p = mann_whitney_u([2.0, 2, 2, 0, 0], [4.0, 3, 2, 4, 2])
    assert u == 3.0
    assert p == pytest.approx(20 / 252, abs=1e-15)
    assert p == pytest.approx(brute_force_p([2.0, 2, 2, 0, 0], [4.0, 3, 2, 4, 2]), abs=1e-15)
    # Two constant sides: the normal approximation gave 0.00126, below what any 6 v 6 test can reach.
    u, p = mann_whitney_u([1.0] * 6, [2.0] * 6)
    assert u == 0.0 and p == 2 / math.comb(12, 6)
    assert mann_whitney_u([2.0] * 6, [1.0] * 6) == (36.0, 2 / math.comb(12, 6))
    # Everything equal: nothing to tell apart.
    assert mann_whitney_u([3.0] * 4, [3.0] * 5) == (10.0, 1.0)


def test_matches_enumerating_every_split() -> None:
    rng = random.Random(20240611)
    for _ in range(150):
        n1, n2 = rng.randint(1, 7), rng.randint(1, 7)
        levels = [float(v) for v in rng.sample(range(10), rng.choice([2, 3, 4]))]
        a, b = tied_sample(rng, n1, levels), tied_sample(rng, n2, levels)
        u, p = mann_whitney_u(a, b)
        assert p == pytest.approx(brute_force_p(a, b), abs=1e-12), (a, b)
        assert u == sum(doubled_ranks([*a, *b])[:n1]) / 2 - n1 * (n1 + 1) / 2


def test_swapping_the_sides_keeps_p_and_mirrors_u() -> None:
    rng = random.Random(5)
    for _ in range(100):
        a = tied_sample(rng, rng.randint(1, 15), [0.0, 1.0, 2.0, 3.5])
        b = tied_sample(rng, rng.randint(1, 15), [0.0, 1.0, 2.0, 3.5])
        u_ab, p_ab = mann_whitney_u(a, b)
        u_ba, p_ba = mann_whitney_u(b, a)
        assert p_ab == p_ba and u_ab + u_ba == len(a) * len(b)


def test_matches_scipy_permutation_test() -> None:
    np = pytest.importorskip("numpy")
    stats = pytest.importorskip("scipy.stats")

    def rank_sum(x: Any, y: Any) -> float:
        return float(stats.rankdata(np.concatenate([x, y]))[: len(x)].sum())

    rng = random.Random(11)
    cases = [([2.0, 2, 2, 0, 0], [4.0, 3, 2, 4, 2]), ([1.0, 1, 2, 2, 3], [2.0, 3, 3, 4, 4])]
    for _ in range(6):
        cases.append((tied_sample(rng, rng.randint(3, 6), [1.0, 2.0, 3.0]), tied_sample(rng, 6, [1.0, 2.0, 3.0])))
    for a, b in cases:
        result = stats.permutation_test(
            (np.array(a), np.array(b)),
            rank_sum,
            permutation_type="independent",
            n_resamples=np.inf,
            alternative="two-sided",
        )
        assert mann_whitney_u(a, b)[1] == pytest.approx(result.pvalue, abs=1e-12), (a, b)


def test_tie_free_p_is_the_old_exact_tests_to_the_bit() -> None:
    """Every U of every tie-free size up to 10 v 10, random ones up to 20 v 20, and the lopsided
    sizes (2 v 200, 1 v 400) whose n1 * n2 <= 400 kept them exact before."""

    def with_u(n1: int, n2: int, below: list[int]) -> tuple[list[float], list[float]]:
        # a's i-th value sits above `below[i]` of b's 0, 1, ..., n2 - 1: U = sum(below), no ties.
        return [c - 0.5 + i * 1e-6 for i, c in enumerate(below)], [float(j) for j in range(n2)]

    rng = random.Random(3)
    sizes = [(n1, n2) for n1 in range(1, 11) for n2 in range(1, 11)]
    for n1, n2 in sizes:
        for target in range(n1 * n2 + 1):
            below = [min(n2, max(0, target - n2 * i)) for i in range(n1)]  # fill greedily
            a, b = with_u(n1, n2, below)
            u, p = mann_whitney_u(a, b)
            assert u == target and p == _exact_u_pvalue(u, n1, n2), (n1, n2, target)
    for n1, n2 in [(20, 20), (13, 17), (20, 9), (2, 200), (1, 400)]:
        for _ in range(20):
            a, b = with_u(n1, n2, [rng.randint(0, n2) for _ in range(n1)])
            u, p = mann_whitney_u(a, b)
            assert p == _exact_u_pvalue(u, n1, n2), (n1, n2, u)


def test_distribution_at_50_v_50_has_the_rank_sums_moments() -> None:
    """The whole tied distribution at 50 v 50: C(100, 50) splits, and the mean and variance of the
    rank sum given the ties (n1 (N + 1) / 2 and n1 n2 / 12 (N + 1 - sum(t^3 - t) / (N (N - 1))))."""
    rng = random.Random(8)
    a, b = tied_sample(rng, 50, [1.0, 2.0, 3.0, 4.0, 5.0]), tied_sample(rng, 50, [1.0, 2.0, 3.0, 4.0, 5.0])
    pooled = sorted([*a, *b])
    groups = tuple(len(list(run)) for _, run in itertools.groupby(pooled))
    step, base, cumulative = rank_sum_distribution(50, groups)
    counts = [c - (cumulative[i - 1] if i else 0) for i, c in enumerate(cumulative)]
    assert cumulative[-1] == math.comb(100, 50) and min(counts) >= 0
    total = cumulative[-1]
    mean = Fraction(sum(c * (base + step * i) for i, c in enumerate(counts)), 2 * total)
    second = Fraction(sum(c * (base + step * i) ** 2 for i, c in enumerate(counts)), 4 * total)
    ties = sum(t**3 - t for t in groups)
    assert mean == Fraction(50 * 101, 2)
    assert second - mean**2 == Fraction(50 * 50, 12) * (101 - Fraction(ties, 100 * 99))


def test_50_v_50_with_ties_matches_monte_carlo() -> None:
    rng = random.Random(9)
    levels = [1.0, 2.0, 3.0, 4.0, 5.0]
    a = tied_sample(rng, 50, levels)
    b = [min(5.0, x + (rng.random() < 0.15)) for x in tied_sample(rng, 50, levels)]
    u, p = mann_whitney_u(a, b)
    assert 0.0 <= p <= 1.0
    ranks = doubled_ranks([*a, *b])
    observed = sum(ranks[:50])
    draws = 20000
    below = above = 0
    for _ in range(draws):
        s = sum(rng.sample(ranks, 50))
        below += s <= observed
        above += s >= observed
    estimate = min(1.0, 2 * min(below, above) / draws)
    assert 0.02 < estimate < 0.98  # a case where the tails are not empty
    assert p == pytest.approx(estimate, abs=0.02)  # several standard errors (~0.004)


def test_normal_approximation_beyond_exact_sizes() -> None:
    assert EXACT_MAX_N >= 50  # every --rounds allows (harness/execute/rounds.py MAX_ROUNDS) gets the exact test
    rng = random.Random(4)
    n = EXACT_MAX_N + 1
    # Two constant sides: exact would be 2 / C(102, 51) ~ 5e-30; the approximation says ~1e-23.
    a, b = [1.0] * n, [2.0] * n
    u, p = mann_whitney_u(a, b)
    assert u == 0.0 and p == pytest.approx(normal_p(a, b), rel=1e-9)
    assert p > 1e6 * 2 / math.comb(2 * n, n)
    a, b = tied_sample(rng, n, [1.0, 2.0, 3.0]), tied_sample(rng, n, [1.0, 2.0, 3.0])
    assert mann_whitney_u(a, b)[1] == pytest.approx(normal_p(a, b), rel=1e-9)
    # Both sides must be within the limit: 50 v 50 is exact, 50 v 51 is not.
    assert mann_whitney_u([1.0] * 50, [2.0] * 50)[1] == 2 / math.comb(100, 50)
    a, b = [1.0] * 50, [2.0] * 51
    assert mann_whitney_u(a, b)[1] == pytest.approx(normal_p(a, b), rel=1e-9)


def test_exact_limit_covers_every_round_count() -> None:
    from harness.execute.rounds import MAX_ROUNDS

    assert EXACT_MAX_N >= MAX_ROUNDS


def test_beyond_50_a_side_the_p_is_the_permutation_p_within_the_approximations_error() -> None:
    """A budget's rounds (51 to 2,000 a side) get the normal approximation with tie and continuity
    correction. At 55 v 55 it is held to the exact permutation p (the distribution counted as the
    exact test counts it, given the tie pattern); at 150 v 200 to a Monte Carlo of permutations."""
    rng = random.Random(56)

    def draw(levels: int) -> float:
        return rng.gauss(0, 1) if not levels else float(rng.randrange(levels))

    for levels in (0, 5, 12):  # 0: no ties
        a = [draw(levels) for _ in range(55)]
        b = [draw(levels) + (0.4 if not levels else rng.random() < 0.4) for _ in range(55)]
        pooled = sorted([*a, *b])
        groups = tuple(len(list(run)) for _, run in itertools.groupby(pooled))
        exact = _exact_tied_pvalue(sum(doubled_ranks(pooled)[pooled.index(x)] for x in a), 55, groups)
        approximate = mann_whitney_u(a, b)[1]
        assert 0.001 < exact < 0.5, exact  # near the thresholds verdicts use
        assert abs(approximate - exact) < 0.003 + 0.1 * exact, (levels, approximate, exact)
    a = tied_sample(rng, 150, [1.0, 2.0, 3.0, 4.0, 5.0])
    b = [min(5.0, x + (rng.random() < 0.2)) for x in tied_sample(rng, 200, [1.0, 2.0, 3.0, 4.0, 5.0])]
    _, p = mann_whitney_u(a, b)
    ranks = doubled_ranks([*a, *b])
    observed = sum(ranks[:150])
    draws, below, above = 10000, 0, 0
    for _ in range(draws):
        total = sum(rng.sample(ranks, 150))
        below += total <= observed
        above += total >= observed
    estimate = min(1.0, 2 * min(below, above) / draws)
    assert 0.005 < estimate < 0.3, estimate
    standard_error = 2 * math.sqrt(estimate / 2 * (1 - estimate / 2) / draws)
    assert abs(p - estimate) < 4 * standard_error + 0.002, (p, estimate, standard_error)


def test_the_smallest_p_beyond_the_exact_range_is_the_approximations() -> None:
    """What `compare` and `ab --budget` ask before testing (can these rounds reach alpha at all): beyond
    the exact range, the approximation's p at complete separation with each side constant, which no
    data of those sizes goes below."""
    for n1, n2 in ((51, 51), (60, 80), (2000, 2000)):
        assert smallest_exact_p(n1, n2) == mann_whitney_u([1.0] * n1, [2.0] * n2)[1]
    assert smallest_exact_p(50, 50) == 2 / math.comb(100, 50) == mann_whitney_u([1.0] * 50, [2.0] * 50)[1]
    rng = random.Random(3)
    for _ in range(50):
        a = tied_sample(rng, 51, [1.0, 2.0, 3.0])
        b = [x + 10 * rng.random() for x in tied_sample(rng, 51, [4.0, 5.0])]
        assert mann_whitney_u(a, b)[1] >= smallest_exact_p(51, 51)
