"""The inference contract's statistics (suites/contract/inference.py): percentiles as numpy takes
them, order-statistic intervals whose stated coverage is the one they have, the sweep and saturation."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from harness.core.result_types import MAX_SAMPLES
from suites.contract import inference
from suites.contract.inference import percentile, quantile_interval, saturation, sweep


@pytest.mark.parametrize("q", [0.0, 0.5, 0.9, 0.99, 1.0])
def test_percentiles_are_numpys_linear_ones(q: float) -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 300):
        samples = rng.exponential(size=n).tolist()
        assert percentile(samples, q) == pytest.approx(float(np.percentile(samples, 100 * q)), rel=1e-12)


def exact_coverage(n: int, q: float, low: int, high: int) -> float:
    """P(low <= B <= high - 1) for B ~ Binomial(n, q), by direct sums (no logs)."""
    return sum(math.comb(n, k) * q**k * (1 - q) ** (n - k) for k in range(low, high))


@pytest.mark.parametrize(("n", "q"), [(5, 0.5), (20, 0.9), (50, 0.5), (300, 0.99), (30, 0.99), (100, 0.01)])
def test_the_stated_coverage_is_the_binomial_probability_of_the_ranks_chosen(n: int, q: float) -> None:
    ranks = list(range(1, n + 1))  # samples equal to their ranks: the interval's ends are the ranks chosen
    low, high, coverage = quantile_interval([float(r) for r in reversed(ranks)], q)
    assert 1 <= low < high <= n
    assert coverage == pytest.approx(exact_coverage(n, q, int(low), int(high)), abs=1e-9)


@pytest.mark.parametrize(("n", "q"), [(300, 0.99), (50, 0.5), (200, 0.99), (1000, 0.9)])
def test_intervals_cover_the_true_percentile_as_often_as_they_say(n: int, q: float) -> None:
    """Exponential latencies (a long right tail), 2,000 seeded draws: the observed coverage is within
    three binomial standard errors of the stated one, and at 300 requests p99's reaches 95 %."""
    rng = random.Random(11)
    truth = -math.log(1 - q)
    draws, hits, stated = 2000, 0, 0.0
    for _ in range(draws):
        low, high, stated = quantile_interval([rng.expovariate(1.0) for _ in range(n)], q)
        hits += low <= truth <= high
    error = 3 * math.sqrt(stated * (1 - stated) / draws)
    assert abs(hits / draws - stated) <= error, (hits / draws, stated)
    if (n, q) == (300, 0.99):
        assert stated >= inference.LEVEL


def test_p99_of_few_requests_says_how_little_it_covers() -> None:
    """30 requests: the max bounds p99 only with probability 1 - 0.99**30, and the interval says 26 %, not 95 %."""
    low, high, coverage = quantile_interval([float(i) for i in range(30)], 0.99)
    assert high == 29.0 and low < high
    assert coverage == pytest.approx(1 - 0.99**30 - exact_coverage(30, 0.99, 0, int(low) + 1), abs=1e-9)
    assert coverage < 0.3


def test_299_requests_are_the_fewest_whose_p99_interval_reaches_95_percent() -> None:
    assert quantile_interval([float(i) for i in range(299)], 0.99)[2] >= 0.95
    assert quantile_interval([float(i) for i in range(298)], 0.99)[2] < 0.95
    assert inference.REQUESTS >= 299


def test_one_sample_has_no_interval_and_none_is_refused() -> None:
    assert quantile_interval([2.0], 0.5) == (2.0, 2.0, 0.0)
    with pytest.raises(ValueError):
        quantile_interval([], 0.5)
    with pytest.raises(ValueError):
        percentile([1.0], 1.5)


def test_the_sweep_grows_by_its_factor_and_ends_at_max_batch() -> None:
    assert sweep(1) == [1]
    assert sweep(8) == [1, 8]
    assert sweep(512) == [1, 8, 64, 512]
    assert sweep(100) == [1, 8, 64, 100]
    assert len(sweep(1 << 20)) <= inference.MAX_SWEEP


def test_saturation_is_the_smallest_batch_near_the_best() -> None:
    assert saturation([(1, 100.0), (8, 700.0), (64, 950.0), (512, 1000.0)]) == 64
    assert saturation([(1, 100.0), (8, 1000.0), (64, 600.0)]) == 8  # past the best it fell (memory, cache)
    assert saturation([(1, 5.0)]) == 1
    assert saturation([]) is None


def test_the_modes_checks_and_refusals() -> None:
    assert inference.checks_of({"mode": "infer"}) == inference.INFER_CHECKS
    assert inference.checks_of({"mode": "generate"}) == inference.GENERATE_CHECKS
    assert inference.checks_of({"mode": "train"}) == () == inference.checks_of({})
    problem = inference.mode_problem({"mode": "infer", "devices": 2})
    assert problem is not None and "devices=2" in problem
    assert inference.mode_problem({"mode": "infer", "devices": 0}) is None
    assert inference.mode_problem({"mode": "train", "devices": 2}) is None


def test_a_metric_can_hold_every_request_asked_for() -> None:
    assert inference.MAX_REQUESTS == MAX_SAMPLES
    requests = next(p for p in inference.mode_params() if p.name == "requests")
    assert requests.max == MAX_SAMPLES
