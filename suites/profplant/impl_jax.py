"""The planted step in JAX: jitted halves, so a planted host read sits between two programs."""

from __future__ import annotations

import time
from typing import Any

from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from suites.profplant.common import PLANTED_PRODUCTS, inputs

    size, plant = int(ctx.params["size"]), str(ctx.params["plant"])
    x_np, w_np = inputs(size)
    x, w = jax.device_put((x_np, w_np), ctx.device)

    @jax.jit
    def forward(w: Any, x: Any) -> Any:
        return jnp.tanh(x @ w)

    @jax.jit
    def backward(w: Any, x: Any, h: Any) -> Any:
        grad = x.T @ (1.0 - h * h)
        out = w - 0.01 * grad / jnp.linalg.norm(grad)
        for _ in range(PLANTED_PRODUCTS if plant == "matmul" else 0):
            out = out @ w
        return out

    def step() -> Any:
        h = forward(w, x)
        if plant == "sync":  # the activation through the host, mid-step: read back, put again
            h = jax.device_put(np.asarray(h), ctx.device)
        if plant == "sleep":
            time.sleep(float(ctx.params["sleep_ms"]) / 1000)
        return backward(w, x, h)

    out = ctx.measure("step", step, flops=None, description="forward, backward, update; plus the planted cost")
    ctx.check("output_sum", float(jnp.sum(out)))
