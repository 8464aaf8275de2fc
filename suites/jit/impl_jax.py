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


def in_flight_window(device_kind: str) -> int | None:
    """How many outputs a timed loop may leave unwaited before it waits for the oldest.

    On a CPU, JAX's client may run computations concurrently, so the last output finishing
    proves nothing about the earlier ones: every output is waited for, the oldest once IN_FLIGHT
    newer ones are queued (dispatch still overlaps compute, as in a real loop). On a GPU every
    call is enqueued on the device's one compute stream, in order, so the last output's
    completion implies all earlier ones: waiting on each would add a host round trip per call
    that the PyTorch loop does not pay (None: wait on the last only; the contract's barrier
    after each sample still catches any work that escaped).
    """
    return IN_FLIGHT if device_kind == "cpu" else None


def dispatch_loop(fn: Callable[[Any], Any], x: Any, loops: int, window: int | None) -> list[Any]:
    """`loops` calls of fn(x); returns the outputs the contract's block_until_ready must wait on.

    window None: the last output only. Otherwise at most `window` + 1 outputs are alive at once
    (memory stays bounded) and each older one is waited for before the loop goes on.
    """
    if window is None:
        out = None
        for _ in range(loops):
            out = fn(x)
        return [out]
    pending: deque[Any] = deque()
    for _ in range(loops):
        pending.append(fn(x))
        if len(pending) > window:
            pending.popleft().block_until_ready()
    return list(pending)


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp

    def f(x: Any) -> Any:
        return 0.2 * x + jnp.sin(x) + jnp.cos(2 * x)

    f_jit = jax.jit(f)

    window = in_flight_window(ctx.device_kind)

    def loop(fn: Callable[[Any], Any], x: Any, loops: int) -> list[Any]:
        return dispatch_loop(fn, x, loops, window)

    ctx.note(LOOP_NOTE)
    ctx.note(
        "jax loops wait on the last output only (one in-order GPU stream)"
        if window is None
        else f"jax loops wait on every output, the oldest once {window} newer ones are queued (CPU client)"
    )
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
