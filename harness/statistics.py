"""Host-side statistics: intervals, outliers, stability, Mann-Whitney U.

Standard library only, so the host never needs numpy/scipy. Randomness is seeded: the same
samples always give the same interval.

Small samples get honest intervals. A percentile bootstrap of the median claims 95 % but covers
about 77 % at n = 3 and 87 % at n = 4 (training suites give 4 steady epochs by default), so below
`BOOTSTRAP_MIN_N` samples per side the interval comes from order statistics instead, whose coverage
is exact and distribution-free (at n = 3 the range [min, max] holds the median with probability
75 %), and the coverage it reaches is shown next to it rather than a 95 % it does not have.
"""

from __future__ import annotations

import functools
import math
import random
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from harness.text.numbers import fmt_share
from suites.runtime.stats import summarize

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
# IQR above 10 % of the median: pyperf warns at a similar relative spread (stdev > 10 % of mean).
UNSTABLE_RELATIVE_IQR = 0.10
# |x - median| / (1.4826 MAD) above this is an outlier (Iglewicz and Hoaglin's modified z-score).
OUTLIER_Z = 3.5
ALPHA = 0.05
BOOTSTRAP_MIN_N = 10
# Mean absolute deviation x 1.2533 estimates sigma like MAD x 1.4826 (Iglewicz and Hoaglin), for
# samples where more than half are equal (MAD = 0) and one is far off.
MEANAD_SCALE = 1.253314


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    iqr: float
    min: float
    max: float
    mean: float
    stdev: float
    ci_low: float
    ci_high: float
    outliers: tuple[int, ...]  # indices into the samples
    unstable: bool
    ci_coverage: float = CONFIDENCE  # what [ci_low, ci_high] really covers (below 95 % for small n)

    @property
    def relative_iqr(self) -> float:
        return self.iqr / abs(self.median) if self.median else 0.0


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_medians(
    samples: Sequence[float], rng: random.Random, resamples: int = BOOTSTRAP_RESAMPLES
) -> list[float]:
    """The medians of `resamples` bootstrap resamples of `samples`, each drawn in O(1), not O(n log n).

    A resample is n draws with replacement: positions floor(n * U) of the sorted samples for n
    uniforms U, so its median is the sorted sample at the middle order statistic of those n
    uniforms, and the k-th smallest of n uniforms is Beta(k, n + 1 - k). For even n the other
    middle one is the smallest of the n - k uniforms above it. The same distribution as sorting
    every resample (tests/test_statistics_bootstrap.py checks it against all n**n resamples), so
    the intervals keep their meaning, but a 10,000-sample metric costs 2000 draws, not 2000 sorts.
    """
    data = sorted(samples)
    n = len(data)
    k = (n + 1) // 2  # the rank of the (lower) middle draw, from 1
    last, above = n - 1, n - k
    medians = []
    for _ in range(resamples):
        u = rng.betavariate(k, n + 1 - k)
        low = data[min(int(u * n), last)]
        if n % 2:
            medians.append(low)
            continue
        # The least of `above` uniforms on (u, 1): u + (1 - u) * (1 - W ** (1 / above)), W uniform on (0, 1].
        v = 1.0 - (1.0 - u) * (1.0 - rng.random()) ** (1.0 / above)
        medians.append((low + data[min(int(v * n), last)]) / 2)
    return medians


def bootstrap_median_ci(samples: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median."""
    if len(samples) < 2:
        return samples[0], samples[0]
    medians = sorted(bootstrap_medians(samples, random.Random(seed)))
    tail = (1 - CONFIDENCE) / 2
    return _percentile(medians, tail), _percentile(medians, 1 - tail)


def bootstrap_ratio_ci(a: Sequence[float], b: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """Interval of median(b) / median(a), resampling each side independently."""
    rng = random.Random(seed)
    medians_a = bootstrap_medians(a, rng)
    medians_b = bootstrap_medians(b, rng)
    ratios = sorted(mb / ma for ma, mb in zip(medians_a, medians_b, strict=True) if ma != 0)
    if not ratios:
        return math.nan, math.nan
    tail = (1 - CONFIDENCE) / 2
    return _percentile(ratios, tail), _percentile(ratios, 1 - tail)


def outliers(samples: Sequence[float]) -> tuple[int, ...]:
    """Indices with a modified z-score above OUTLIER_Z; MAD = 0 falls back to the mean deviation."""
    med = median(samples)
    scale = 1.4826 * median(abs(x - med) for x in samples)
    if scale == 0:
        scale = MEANAD_SCALE * sum(abs(x - med) for x in samples) / len(samples)
    if scale == 0:
        return ()  # every sample equal
    return tuple(i for i, x in enumerate(samples) if abs(x - med) / scale > OUTLIER_Z)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    coverage: float  # the probability it holds the true value (nominal for the bootstrap)
    method: str  # "bootstrap" or "order statistics"

    @property
    def claimed(self) -> str:
        """'' at the nominal level, else the coverage to print next to the interval."""
        return "" if self.coverage >= CONFIDENCE - 1e-9 else fmt_share(self.coverage)


def median_coverage(n: int, k: int) -> float:
    """P(x_(k) <= true median <= x_(n+1-k)) for n samples of a continuous distribution."""
    below = sum(math.comb(n, i) for i in range(k)) / float(2**n)
    return 1.0 - 2.0 * below


def order_statistic_rank(n: int, target: float) -> int:
    """The largest k whose interval [x_(k), x_(n+1-k)] still covers `target`; 1 if none does."""
    best = 1
    for k in range(1, (n + 1) // 2 + 1):
        if median_coverage(n, k) >= target:
            best = k
    return best


def ratio_interval(a: Sequence[float], b: Sequence[float], seed: int = 0) -> Interval:
    """Interval of median(b) / median(a) with the coverage it really has.

    Bootstrap when both sides have BOOTSTRAP_MIN_N samples; otherwise each median's order-statistic
    interval at sqrt(95 %) where the sample size allows it, and their quotient range, whose coverage
    is at least the product of the two (independent) coverages.
    """
    if min(len(a), len(b)) >= BOOTSTRAP_MIN_N:
        low, high = bootstrap_ratio_ci(a, b, seed)
        return Interval(low, high, CONFIDENCE, "bootstrap")
    side = math.sqrt(CONFIDENCE)
    sa, sb = sorted(a), sorted(b)
    ka, kb = order_statistic_rank(len(sa), side), order_statistic_rank(len(sb), side)
    a_low, a_high = sa[ka - 1], sa[len(sa) - ka]
    b_low, b_high = sb[kb - 1], sb[len(sb) - kb]
    coverage = median_coverage(len(sa), ka) * median_coverage(len(sb), kb)
    if a_low <= 0 or a_high <= 0:
        return Interval(math.nan, math.nan, coverage, "order statistics")
    return Interval(b_low / a_high, b_high / a_low, coverage, "order statistics")


def median_interval(samples: Sequence[float]) -> Interval:
    """Interval of the median: bootstrap from BOOTSTRAP_MIN_N samples, order statistics below."""
    if len(samples) >= BOOTSTRAP_MIN_N:
        low, high = bootstrap_median_ci(samples)
        return Interval(low, high, CONFIDENCE, "bootstrap")
    data = sorted(samples)
    k = order_statistic_rank(len(data), CONFIDENCE)
    coverage = median_coverage(len(data), k) if len(data) > 1 else 0.0
    return Interval(data[k - 1], data[len(data) - k], coverage, "order statistics")


def describe(samples: Sequence[float]) -> Summary:
    base = summarize(samples)
    interval = median_interval(samples)
    low, high = interval.low, interval.high
    rel_iqr = base["iqr"] / abs(base["median"]) if base["median"] else 0.0
    return Summary(
        n=int(base["n"]),
        median=base["median"],
        q1=base["q1"],
        q3=base["q3"],
        iqr=base["iqr"],
        min=base["min"],
        max=base["max"],
        mean=base["mean"],
        stdev=base["stdev"],
        ci_low=low,
        ci_high=high,
        outliers=outliers(samples),
        unstable=rel_iqr > UNSTABLE_RELATIVE_IQR,
        ci_coverage=interval.coverage,
    )


@functools.lru_cache(maxsize=64)
def u_distribution(n1: int, n2: int) -> tuple[int, ...]:
    """counts[k] = the arrangements of n1 and n2 tie-free observations giving U = k (the standard recurrence)."""
    table: dict[tuple[int, int], list[int]] = {}
    for a in range(n1 + 1):
        for b in range(n2 + 1):
            if a == 0 or b == 0:
                table[(a, b)] = [1]
                continue
            left, right = table[(a - 1, b)], table[(a, b - 1)]  # largest value from the first sample: adds b to U
            merged = [0] * (a * b + 1)
            for k, c in enumerate(left):
                merged[k + b] += c
            for k, c in enumerate(right):
                merged[k] += c
            table[(a, b)] = merged
    return tuple(table[(n1, n2)])


def _exact_u_pvalue(u: float, n1: int, n2: int) -> float:
    """Two-sided exact p-value of U (no ties) by counting, for small samples."""
    d = u_distribution(n1, n2)
    total = sum(d)
    u_small = min(u, n1 * n2 - u)
    tail = sum(c for k, c in enumerate(d) if k <= u_small + 1e-9)
    return min(1.0, 2 * tail / total)


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(U of a, two-sided p-value). Exact when small and tie-free, else normal with tie correction."""
    n1, n2 = len(a), len(b)
    pooled = sorted([*a, *b])
    # x's (mid-)rank: the values below it, plus the middle of its run of equal values. Ranks are
    # halves, so their sum is exact in any order.
    r1 = sum((bisect_left(pooled, x) + bisect_right(pooled, x) + 1) / 2 for x in a)
    tie_term = float(sum(t**3 - t for t in Counter(pooled).values() if t > 1))
    u1 = r1 - n1 * (n1 + 1) / 2
    if tie_term == 0 and n1 * n2 <= 400:
        return u1, _exact_u_pvalue(u1, n1, n2)
    n = n1 + n2
    mu = n1 * n2 / 2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    if sigma == 0:
        return u1, 1.0
    z = (abs(u1 - mu) - 0.5) / sigma  # continuity correction
    return u1, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def geometric_mean(values: Sequence[float]) -> float:
    positive = [v for v in values if v > 0]
    if not positive:
        return math.nan
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def smallest_exact_p(n1: int, n2: int) -> float:
    """The smallest two-sided p the exact Mann-Whitney test can give with n1 and n2 observations.

    It is reached when every observation of one side is below every one of the other: one
    arrangement of C(n1 + n2, n1) at each tail. With 3 a side that is 0.1, so no amount of
    difference is ever significant at 0.05; with 4 a side 0.029.
    """
    if n1 < 1 or n2 < 1:
        return 1.0
    try:
        return min(1.0, 2.0 / math.comb(n1 + n2, n1))
    except OverflowError:  # C(n1 + n2, n1) is beyond a float (1,000s of rounds a side): 2 / it is 0 to a float
        return 0.0


def observations_needed(family: int, alpha: float = ALPHA) -> int:
    """Observations a side (rounds) with which a family of `family` Holm-corrected tests can reject
    at all: Holm's strictest threshold is alpha / family, so the smallest attainable p must be below it."""
    k = 2
    while smallest_exact_p(k, k) * max(family, 1) >= alpha:
        k += 1
    return k


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input's order: reject where adjusted < alpha.

    Controls the family-wise error (the chance of one or more false alarms among all the tests)
    at alpha under any dependence between the tests, and rejects everything Bonferroni rejects.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
