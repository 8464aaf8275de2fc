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


def bytes_matmul(n: int) -> float:
    """3 n^2 float64: the compulsory traffic (read A and B, write C once); blocking re-reads come on top,
    so the arithmetic intensity it gives is the ceiling a roofline holds the kernel against."""
    return 3.0 * n * n * 8


def bytes_inverse(n: int) -> float:
    """2 n^2 float64: read C, write its inverse, once each; the factorisation's own passes come on top."""
    return 2.0 * n * n * 8


def flops_mean_sum(n: int) -> float:
    """4 n^2: a sum and a mean of each of the two N x N matrices, one add per element each (the
    mean's final division is one operation, not counted), so mean_sum sits on the roofline too."""
    return 4.0 * n * n


def bytes_mean_sum(n: int) -> float:
    """Least traffic of mean and sum of A and B: each float64 N x N matrix read once (a fused pass)."""
    return 2.0 * n * n * 8


def counts(operation: str, n: int) -> dict[str, Any]:
    """What one call of a timed operation costs, as `ctx.measure` keywords: declared once here for
    every framework, so the FLOP lint, the bandwidth lint and the roofline see the same counts."""
    found = {
        "mean_sum": (flops_mean_sum(n), bytes_mean_sum(n)),
        "matmul": (flops_matmul(n), bytes_matmul(n)),
        "inverse": (flops_inverse(n), bytes_inverse(n)),
    }
    flops, moved = found[operation]
    return {"flops": flops, "bytes_moved": moved, "dtype": "float64"}
