"""The data both implementations fit, generated once by NumPy from one seed (float64)."""

from __future__ import annotations

from typing import Any

X0 = (1.0, 0.0)  # (slope, offset), as in the seed
TOL = 1e-4


def make_data(n: int, seed: int) -> tuple[Any, Any]:
    """a = sin t + 1 + t/10 + N(0, 0.3); b = a * N(1.5, 0.1) + N(3, 0.1), elementwise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 100.0, n)
    a = np.sin(t) + 1.0 + t / 10.0 + rng.normal(0.0, 0.3, n)
    b = a * rng.normal(1.5, 0.1, n) + rng.normal(3.0, 0.1, n)
    return a, b
