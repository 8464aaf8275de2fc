"""The shared inputs: one seed, NumPy, float32."""

from __future__ import annotations

from typing import Any


def inputs(size: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(7)
    x = rng.standard_normal((size, size), dtype=np.float32) / np.sqrt(size)
    w = rng.standard_normal((size, size), dtype=np.float32) / np.sqrt(size)
    return x, w
