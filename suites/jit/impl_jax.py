"""JAX: op-by-op ("eager") dispatch against one jax.jit-compiled function."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from suites.jit.common import (
    IN_FLIGHT,
    LOOP_NOTE,
    FirstCallThenLoops,
    check_points,
    describe_loop,
    inputs,
    lengths,
    loop_bytes,
    loop_flops,
    name,
    record_speedup,
    seed_error,
    seed_points,
)
from suites.runtime import perturb
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp

    def f(x: Any) -> Any:
        return 0.2 * x + jnp.sin(x) + jnp.cos(2 * x)

    f_jit = jax.jit(f)

    def loop(fn: Callable[[Any], Any], x: Any, loops: int) -> list[Any]:
        # JAX dispatches asynchronously and the CPU client may run computations concurrently,
        # so waiting for the last output alone would not prove the earlier ones finished.
        # Every output is waited for: the oldest once IN_FLIGHT newer ones are queued (Python
        # dispatch still overlaps the compute, as in a real loop), the rest by the contract's
        # block_until_ready on the returned list. Memory stays at IN_FLIGHT + 1 outputs.
        pending: deque[Any] = deque()
        for _ in range(loops):
            pending.append(fn(x))
            if len(pending) > IN_FLIGHT:
                pending.popleft().block_until_ready()
        return list(pending)

    ctx.note(LOOP_NOTE)
    for length, loops in lengths(ctx.params):
        x = jax.device_put(inputs(length), ctx.device)
        ctx.progress(f"L={length}, K={loops}")
        for variant, fn in (("eager", f), ("jit", f_jit)):
            ctx.measure(
                name(variant, length, loops),
                FirstCallThenLoops(lambda fn=fn, x=x: fn(x), lambda fn=fn, x=x, loops=loops: loop(fn, x, loops)),
                description=describe_loop(f"jax {variant}", length, loops),
                dtype="float32",
                bytes_moved=loop_bytes(length, loops),
                flops=loop_flops(length, loops),
            )
        record_speedup(ctx, length, loops)

    first_length = lengths(ctx.params)[0][0]
    x = jax.device_put(inputs(first_length), ctx.device)
    perturb.check(ctx, "f_at_6", [float(v) for v in f_jit(jax.device_put(check_points(), ctx.device))])
    perturb.check(ctx, "jit_vs_eager", float(jnp.max(jnp.abs(f_jit(x) - f(x)))))
    perturb.check(ctx, "seed_f16_error", seed_error(f(jax.device_put(seed_points(), ctx.device))))
