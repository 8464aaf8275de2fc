"""The shared inputs: one seed, NumPy, float32."""

from __future__ import annotations

from typing import Any

# plant=matmul chains this many extra products: one 384^3 product is about 0.5 ms on a 2-core CPU,
# within twice the noise between two profiled processes (0.15-0.3 ms); four stand well clear of it.
PLANTED_PRODUCTS = 4


def inputs(size: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(7)
    x = rng.standard_normal((size, size), dtype=np.float32) / np.sqrt(size)
    w = rng.standard_normal((size, size), dtype=np.float32) / np.sqrt(size)
    return x, w
