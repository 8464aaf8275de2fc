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
    import jax
    import jax.numpy as jnp

    n, seed = ctx.params["matrix_size"], ctx.params["seed"]
    sync = ctx.params["synchronise"]
    key_a, key_b = jax.random.split(jax.random.key(seed))
    with jax.default_device(ctx.device):

        def generate() -> tuple[jax.Array, jax.Array]:
            return (
                jax.random.uniform(key_a, (n, n), dtype=jnp.float64),
                jax.random.uniform(key_b, (n, n), dtype=jnp.float64),
            )

        a, b = ctx.measure("generate", generate)
        ctx.measure(
            "mean_sum",
            lambda: (jnp.mean(a), jnp.mean(b), jnp.sum(a), jnp.sum(b)),
            bytes_moved=bytes_mean_sum(n),
            flops=flops_mean_sum(n),
            dtype="float64",
        )
        c = ctx.measure(
            "matmul",
            lambda: a @ b,
            flops=flops_matmul(n),
            bytes_moved=bytes_matmul(n),
            dtype="float64",
            synchronise=sync,
        )
        ctx.measure(
            "inverse",
            lambda: jnp.linalg.inv(c),
            flops=flops_inverse(n),
            bytes_moved=bytes_inverse(n),
            dtype="float64",
            synchronise=sync,
        )

        sa, sb = (jnp.asarray(m) for m in shared_factors(n, seed))
        sc = sa @ sb
        residual = jnp.max(jnp.abs(sc @ jnp.linalg.inv(sc) - jnp.eye(n, dtype=jnp.float64)))
        ctx.check("residual", float(residual))
        ctx.check("product_sum", float(jnp.sum(sc)))
