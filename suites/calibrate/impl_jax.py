from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from suites.calibrate.common import SCALE, Matmul, matmul_size, measure_all, stream_elements
from suites.runtime.context import Context


def product(fn: Callable[[Any, Any], Any], a: Any, b: Any) -> Callable[[int], Callable[[], Any]]:
    """Size M -> a timed `fn` of the leading M x M blocks (sliced once, on the device)."""

    def make(m: int) -> Callable[[], Any]:
        x, y = a[:m, :m], b[:m, :m]
        return lambda: fn(x, y)

    return make


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp

    n = matmul_size(ctx)
    with jax.default_device(ctx.device):
        keys = jax.random.split(jax.random.key(0), 2)
        a64, b64 = (jax.random.uniform(k, (n, n), dtype=jnp.float64) for k in keys)
        a32, b32 = a64.astype(jnp.float32), b64.astype(jnp.float32)
        a16, b16 = a32.astype(jnp.bfloat16), b32.astype(jnp.bfloat16)
        x = jnp.ones(stream_elements(ctx), dtype=jnp.float32)
        # Each float32 arithmetic as the jobs ask for it: the precision of the dot (what
        # jax_default_matmul_precision sets for a job), or bfloat16 operands with float32 storage
        # (a Flax layer with dtype=bfloat16 casts its float32 input and kernel so).
        fp32 = jax.jit(partial(jnp.matmul, precision="highest"))
        tf32 = jax.jit(partial(jnp.matmul, precision="tensorfloat32"))
        cast = jax.jit(lambda a, b: jnp.matmul(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)))
        mm = jax.jit(jnp.matmul)

        def on_device(fn: Callable[..., Any]) -> Callable[[Any, Any], Any]:  # the probe's numpy operands
            return lambda a, b: fn(jnp.asarray(a), jnp.asarray(b)).astype(jnp.float32)

        matmuls = [
            Matmul("float32", "fp32", product(fp32, a32, b32), probe=on_device(fp32)),
            Matmul("float32", "tf32", product(tf32, a32, b32), probe=on_device(tf32)),
            Matmul("float32", "bf16", product(cast, a32, b32), probe=on_device(cast)),
            Matmul("bfloat16", "bf16", product(mm, a16, b16)),
            Matmul("float64", "fp64", product(mm, a64, b64)),
        ]
        scale = jax.jit(lambda v: v * jnp.float32(SCALE))
        measure_all(ctx, matmuls, lambda: scale(x))
