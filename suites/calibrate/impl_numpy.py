from __future__ import annotations

from collections.abc import Callable
from typing import Any

from suites.calibrate.common import SCALE, Matmul, matmul_size, measure_all, stream_elements
from suites.runtime.context import Context


def product(a: Any, b: Any) -> Callable[[int], Callable[[], Any]]:
    """Size M -> a timed product of the leading M x M blocks (contiguous copies, made once)."""
    import numpy as np

    def make(m: int) -> Callable[[], Any]:
        x, y = np.ascontiguousarray(a[:m, :m]), np.ascontiguousarray(b[:m, :m])
        return lambda: x @ y

    return make


def run(ctx: Context) -> None:
    import numpy as np

    n, rng = matmul_size(ctx), np.random.default_rng(0)
    a64 = rng.random((n, n))
    b64 = rng.random((n, n))
    a32, b32 = a64.astype(np.float32), b64.astype(np.float32)
    x = np.ones(stream_elements(ctx), dtype=np.float32)
    y = np.empty_like(x)
    # NumPy has one float32 arithmetic (its BLAS) and no bfloat16.
    matmuls = [
        Matmul("float32", "fp32", product(a32, b32), probe=lambda a, b: a @ b),
        Matmul("float64", "fp64", product(a64, b64)),
    ]
    measure_all(ctx, matmuls, lambda: np.multiply(x, np.float32(SCALE), out=y))
