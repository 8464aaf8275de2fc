from __future__ import annotations

from suites.calibrate.common import SCALE, matmul_size, measure_all, stream_elements
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import numpy as np

    n, rng = matmul_size(ctx), np.random.default_rng(0)
    a64 = rng.random((n, n))
    b64 = rng.random((n, n))
    a32, b32 = a64.astype(np.float32), b64.astype(np.float32)
    x = np.ones(stream_elements(ctx), dtype=np.float32)
    y = np.empty_like(x)
    measure_all(
        ctx,
        {"float32": lambda: a32 @ b32, "float64": lambda: a64 @ b64},
        lambda: np.multiply(x, np.float32(SCALE), out=y),
    )
