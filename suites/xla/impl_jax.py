from __future__ import annotations

from suites.runtime.context import Context
from suites.xla.common import counts, shared_factors


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
        ctx.measure("mean_sum", lambda: (jnp.mean(a), jnp.mean(b), jnp.sum(a), jnp.sum(b)), **counts("mean_sum", n))
        c = ctx.measure("matmul", lambda: a @ b, synchronise=sync, **counts("matmul", n))
        ctx.measure("inverse", lambda: jnp.linalg.inv(c), synchronise=sync, **counts("inverse", n))

        sa, sb = (jnp.asarray(m) for m in shared_factors(n, seed))
        sc = sa @ sb
        residual = jnp.max(jnp.abs(sc @ jnp.linalg.inv(sc) - jnp.eye(n, dtype=jnp.float64)))
        ctx.check("residual", float(residual))
        ctx.check("product_sum", float(jnp.sum(sc)))
