from __future__ import annotations

from suites.calibrate.common import SCALE, matmul_size, measure_all, stream_elements
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp

    n = matmul_size(ctx)
    with jax.default_device(ctx.device):
        keys = jax.random.split(jax.random.key(0), 2)
        a64, b64 = (jax.random.uniform(k, (n, n), dtype=jnp.float64) for k in keys)
        a32, b32 = a64.astype(jnp.float32), b64.astype(jnp.float32)
        x = jnp.ones(stream_elements(ctx), dtype=jnp.float32)
        mm = jax.jit(jnp.matmul)
        scale = jax.jit(lambda v: v * jnp.float32(SCALE))
        measure_all(ctx, {"float32": lambda: mm(a32, b32), "float64": lambda: mm(a64, b64)}, lambda: scale(x))
