from __future__ import annotations

from suites.runtime.context import Context
from suites.xla.common import (
    bytes_inverse,
    bytes_matmul,
    bytes_mean_sum,
    flops_inverse,
    flops_matmul,
    flops_mean_sum,
    shared_factors,
)


def run(ctx: Context) -> None:
    import numpy as np

    n, seed = ctx.params["matrix_size"], ctx.params["seed"]
    sync = ctx.params["synchronise"]
    rng = np.random.default_rng(seed)
    a, b = ctx.measure("generate", lambda: (rng.random((n, n)), rng.random((n, n))))
    ctx.measure(
        "mean_sum",
        lambda: (a.mean(), b.mean(), a.sum(), b.sum()),
        bytes_moved=bytes_mean_sum(n),
        flops=flops_mean_sum(n),
        dtype="float64",
    )
    c = ctx.measure(
        "matmul", lambda: a @ b, flops=flops_matmul(n), bytes_moved=bytes_matmul(n), dtype="float64", synchronise=sync
    )
    ctx.measure(
        "inverse",
        lambda: np.linalg.inv(c),
        flops=flops_inverse(n),
        bytes_moved=bytes_inverse(n),
        dtype="float64",
        synchronise=sync,
    )

    sa, sb = shared_factors(n, seed)
    sc = sa @ sb
    ctx.check("residual", float(np.abs(sc @ np.linalg.inv(sc) - np.eye(n)).max()))
    ctx.check("product_sum", float(sc.sum()))
