"""What every framework of the suite shares: the inputs come from one NumPy seed, never each RNG."""

from __future__ import annotations

from typing import Any


def inputs(n: int, seed: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)


def flops(n: int) -> float:
    return 2.0 * n**3
