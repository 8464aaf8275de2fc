"""TEMPLATE, JAX: asynchronous. The timed callback must *return* its result (the runtime waits on
what it returns, and a barrier after the clock flags the metric if anything was left running)."""

from __future__ import annotations

from suites._template.common import flops, inputs
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp

    n = ctx.params["n"]
    a, b = (jax.device_put(m, ctx.device) for m in inputs(n, ctx.params["seed"]))
    matmul = jax.jit(jnp.matmul)
    c = ctx.measure("matmul", lambda: matmul(a, b), flops=flops(n), dtype="float32")
    ctx.check("product_sum", float(jnp.sum(c.astype(jnp.float32))))
