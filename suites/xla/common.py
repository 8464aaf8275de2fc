"""Data every framework shares: the check matrices come from one NumPy seed, not each RNG."""

from __future__ import annotations

from typing import Any

# Offset so the shared check data never coincides with what numpy's own timed RNG draws.
CHECK_SEED_OFFSET = 1_000_003


def shared_factors(n: int, seed: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(seed + CHECK_SEED_OFFSET)
    return rng.random((n, n)), rng.random((n, n))


def flops_matmul(n: int) -> float:
    """2 n^3: one multiply and one add per inner-product term."""
    return 2.0 * n**3


def flops_inverse(n: int) -> float:
    """2 n^3: LU factorisation (2/3 n^3) plus inverting from the factors (4/3 n^3)."""
    return 2.0 * n**3


def bytes_mean_sum(n: int) -> float:
    """Least traffic of mean and sum of A and B: each float64 N x N matrix read once (a fused pass)."""
    return 2.0 * n * n * 8
