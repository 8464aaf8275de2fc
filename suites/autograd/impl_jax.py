"""JAX: jax.grad of a scalar function, vectorised with vmap, with and without jit."""

from __future__ import annotations

from typing import Any

from suites.autograd.common import (
    DESCRIPTIONS,
    GRAD_OF_SUM,
    JIT_SCALAR_LOOP,
    JIT_VMAP_GRAD,
    SCALAR_LOOP,
    VMAP_GRAD,
    check_points,
    max_spread,
    seed_error,
    seed_grad_20_error,
    timing_points,
)
from suites.runtime import perturb
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp

    def f(x: Any) -> Any:
        return 0.2 * x + jnp.sin(x) + jnp.cos(2 * x)

    grad = jax.grad(f)
    vmap_grad = jax.vmap(grad)
    jit_vmap_grad = jax.jit(vmap_grad)
    grad_of_sum = jax.grad(lambda x: jnp.sum(f(x)))
    jit_grad = jax.jit(grad)

    xs = jax.device_put(timing_points(ctx.params["points"]), ctx.device)
    # Split once, outside the clock: the loops time the gradients, not indexing.
    scalars = list(xs)

    outputs = [
        ctx.measure(VMAP_GRAD, lambda: vmap_grad(xs), description=DESCRIPTIONS[VMAP_GRAD]),
        ctx.measure(JIT_VMAP_GRAD, lambda: jit_vmap_grad(xs), description=DESCRIPTIONS[JIT_VMAP_GRAD]),
        ctx.measure(GRAD_OF_SUM, lambda: grad_of_sum(xs), description=DESCRIPTIONS[GRAD_OF_SUM]),
        # Each loop returns every per-point gradient; the contract's block_until_ready
        # waits for all of them, so asynchronous dispatch cannot leave work outside the clock.
        ctx.measure(SCALAR_LOOP, lambda: [grad(s) for s in scalars], description=DESCRIPTIONS[SCALAR_LOOP]),
        ctx.measure(JIT_SCALAR_LOOP, lambda: [jit_grad(s) for s in scalars], description=DESCRIPTIONS[JIT_SCALAR_LOOP]),
    ]

    three = jnp.float32(3.0)
    f3, g3 = float(f(three)), float(grad(three))
    perturb.check(ctx, "f_at_3", f3)
    perturb.check(ctx, "grad_at_3", g3)
    g20 = [float(v) for v in vmap_grad(jax.device_put(check_points(), ctx.device))]
    perturb.check(ctx, "grad_at_20", g20)
    perturb.check(ctx, "seed_error", seed_error(f3, g3))
    perturb.check(ctx, "seed_grad_20_error", seed_grad_20_error(g20))
    perturb.check(ctx, "methods_agree", max_spread([jnp.stack(o) if isinstance(o, list) else o for o in outputs]))
