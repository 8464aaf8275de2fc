"""The bootstrap's fast path against the straightforward one it replaced (issue 23).

`bootstrap_medians` draws each resample's median from the order statistics of uniforms instead of
sorting n draws with replacement. These tests hold it to the plain definition on small inputs:
its medians follow the exact bootstrap distribution (every one of the n**n resamples counted),
and the intervals built on it agree with intervals from plain resampling. Not timed:
benchmarks/readers.py times the readers on a folder at the caps.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections import Counter
from collections.abc import Sequence

import pytest

from harness.core.statistics import (
    BOOTSTRAP_RESAMPLES,
    CONFIDENCE,
    bootstrap_median_ci,
    bootstrap_medians,
    bootstrap_ratio_ci,
    mann_whitney_u,
)


def exact_bootstrap_cdf(samples: Sequence[float]) -> dict[float, float]:
    """P(median of a resample <= m) for every median m a resample can have, over all n**n resamples."""
    counts = Counter(statistics.median(r) for r in itertools.product(samples, repeat=len(samples)))
    total, running, cdf = len(samples) ** len(samples), 0, {}
    for m in sorted(counts):
        running += counts[m]
        cdf[m] = running / total
    return cdf


def reference_medians(samples: Sequence[float], rng: random.Random, resamples: int) -> list[float]:
    """The straightforward bootstrap: draw n with replacement, take the median."""
    return [statistics.median(rng.choices(samples, k=len(samples))) for _ in range(resamples)]


def percentile_interval(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    tail = (1 - CONFIDENCE) / 2

    def at(q: float) -> float:
        pos = q * (len(ordered) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    return at(tail), at(1 - tail)


@pytest.mark.parametrize(
    "samples",
    [
        [3.0, 1.0, 4.0, 1.5, 9.0],  # odd n
        [2.0, 7.0, 1.0, 8.0, 2.5, 6.0],  # even n: the mean of two order statistics
        [1.0, 1.0, 2.0, 5.0, 5.0, 5.0],  # ties
        [0.5, 0.25],  # the smallest sample that is bootstrapped
    ],
)
def test_fast_medians_follow_the_exact_bootstrap_distribution(samples: list[float]) -> None:
    cdf = exact_bootstrap_cdf(samples)
    draws = 40_000
    drawn = Counter(bootstrap_medians(samples, random.Random(5), draws))
    assert set(drawn) <= set(cdf), "a median no resample can have"
    running = 0
    for m, p in cdf.items():
        running += drawn[m]
        # Kolmogorov distance: 0.012 at 40,000 draws is exceeded with probability < 2 exp(-11.5).
        assert abs(running / draws - p) < 0.012, (m, running / draws, p)


def test_fast_medians_match_plain_resampling_on_lognormal_timings() -> None:
    """Beyond enumeration (n = 13 and 24): the two samplers' distributions agree (two-sample KS)."""
    rng = random.Random(11)
    for n in (13, 24):
        samples = [rng.lognormvariate(0, 0.3) for _ in range(n)]
        fast = sorted(bootstrap_medians(samples, random.Random(1), 20_000))
        plain = sorted(reference_medians(samples, random.Random(2), 20_000))
        support = sorted(set(fast) | set(plain))
        worst = max(abs(_ecdf(fast, m) - _ecdf(plain, m)) for m in support)
        assert worst < 0.02, (n, worst)  # 5 % critical value at 20,000 a side: 0.0136; 0.02 is p < 1e-3


def _ecdf(ordered: list[float], x: float) -> float:
    from bisect import bisect_right

    return bisect_right(ordered, x) / len(ordered)


def test_intervals_agree_with_plain_resampling() -> None:
    """The public intervals (2000 resamples) land where plain resampling puts them, within Monte Carlo noise."""
    rng = random.Random(3)
    for n in (10, 15, 40):
        a = [rng.lognormvariate(0, 0.1) for _ in range(n)]
        b = [1.2 * rng.lognormvariate(0, 0.1) for _ in range(n + 3)]
        low, high = bootstrap_median_ci(a)
        ref_low, ref_high = percentile_interval(reference_medians(a, random.Random(9), 20_000))
        spread = ref_high - ref_low
        assert abs(low - ref_low) < 0.25 * spread and abs(high - ref_high) < 0.25 * spread, (n, low, high)
        r_low, r_high = bootstrap_ratio_ci(a, b)
        ref_ratios = [
            mb / ma
            for ma, mb in zip(
                reference_medians(a, random.Random(7), 20_000),
                reference_medians(b, random.Random(8), 20_000),
                strict=True,
            )
        ]
        ref_r_low, ref_r_high = percentile_interval(ref_ratios)
        spread = ref_r_high - ref_r_low
        assert abs(r_low - ref_r_low) < 0.25 * spread and abs(r_high - ref_r_high) < 0.25 * spread, (n, r_low, r_high)


def test_the_same_seed_gives_the_same_interval_and_the_default_resamples_are_used() -> None:
    data = [random.Random(i).lognormvariate(0, 0.2) for i in range(25)]
    assert bootstrap_median_ci(data) == bootstrap_median_ci(data)
    assert bootstrap_median_ci(data, seed=1) != bootstrap_median_ci(data, seed=2)  # the seed is used
    assert bootstrap_ratio_ci(data, data[::-1]) == bootstrap_ratio_ci(data, data[::-1])
    assert len(bootstrap_medians(data, random.Random(0))) == BOOTSTRAP_RESAMPLES


def test_mann_whitney_agrees_with_ranks_counted_one_by_one() -> None:
    """The rank sum from bisection equals mid-ranks assigned over the pooled, sorted samples."""
    rng = random.Random(4)
    for _ in range(300):
        pool = [1.0, 2.0, 2.5, 3.0] if rng.random() < 0.5 else None
        a = [rng.choice(pool) if pool else rng.gauss(0, 1) for _ in range(rng.randint(1, 30))]
        b = [rng.choice(pool) if pool else rng.gauss(0, 1) for _ in range(rng.randint(1, 30))]
        pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
        values = [x for x, _ in pooled]
        r1 = 0.0
        for x, side in pooled:
            if side == 0:
                first, count = values.index(x), values.count(x)
                r1 += first + (count + 1) / 2
        u, _ = mann_whitney_u(a, b)
        assert u == r1 - len(a) * (len(a) + 1) / 2
