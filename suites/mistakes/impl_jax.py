from __future__ import annotations

from typing import Any

from suites.mistakes.common import Ops
from suites.mistakes.common import run as run_mistake
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    def discard(a: Any, b: Any) -> Any:
        _ = a @ b  # never used: XLA removes it
        return a[0, 0]

    def specialised(a: Any, b: Any, step: int) -> Any:
        return a @ b + 0.0 * step  # `step` is static: every new value traces and compiles anew

    def grow(a: Any, b: Any, cache: Any) -> tuple[Any, Any]:
        # The classic decode loop: the new row appended with concatenate, so the cache's shape is one row
        # longer every call and the jitted step compiles for each new length (a static cache with a
        # position index, as suites/gpt/decode_flax.py keeps, compiles once).
        grown = jnp.concatenate([cache, a[:1]], axis=0)
        return a @ b + 0.0 * grown[-1, 0], grown

    run_mistake(ctx, Ops(
        put=lambda x: jax.device_put(jnp.asarray(x), ctx.device),
        matmul=jax.jit(jnp.matmul),
        to_numpy=np.asarray,
        as_float32=lambda x: x.astype(jnp.float32),
        discard=jax.jit(discard),
        specialised=jax.jit(specialised, static_argnums=2),
        grow=jax.jit(grow),
    ))  # fmt: skip
