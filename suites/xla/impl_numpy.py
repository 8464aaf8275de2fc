from __future__ import annotations

from suites.runtime.context import Context
from suites.xla.common import counts, shared_factors


def run(ctx: Context) -> None:
    import numpy as np

    n, seed = ctx.params["matrix_size"], ctx.params["seed"]
    sync = ctx.params["synchronise"]
    rng = np.random.default_rng(seed)
    a, b = ctx.measure("generate", lambda: (rng.random((n, n)), rng.random((n, n))))
    ctx.measure("mean_sum", lambda: (a.mean(), b.mean(), a.sum(), b.sum()), **counts("mean_sum", n))
    c = ctx.measure("matmul", lambda: a @ b, synchronise=sync, **counts("matmul", n))
    ctx.measure("inverse", lambda: np.linalg.inv(c), synchronise=sync, **counts("inverse", n))

    sa, sb = shared_factors(n, seed)
    sc = sa @ sb
    ctx.check("residual", float(np.abs(sc @ np.linalg.inv(sc) - np.eye(n)).max()))
    ctx.check("product_sum", float(sc.sum()))
