"""NumPy: the eager baseline (no compiler; every call returns a finished array)."""

from __future__ import annotations

from typing import Any

from suites.jit.common import (
    LOOP_NOTE,
    FirstCallThenLoops,
    check_points,
    describe_loop,
    inputs,
    lengths,
    loop_bytes,
    loop_flops,
    name,
    seed_error,
    seed_points,
)
from suites.runtime import perturb
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import numpy as np

    def f(x: Any) -> Any:
        return 0.2 * x + np.sin(x) + np.cos(2 * x)  # Python scalars keep float32 (NEP 50)

    def loop(x: Any, loops: int) -> Any:
        for _ in range(loops):
            y = f(x)
        return y

    ctx.note(LOOP_NOTE)
    for length, loops in lengths(ctx.params):
        x = inputs(length)
        ctx.progress(f"L={length}, K={loops}")
        ctx.measure(
            name("eager", length, loops),
            FirstCallThenLoops(lambda x=x: f(x), lambda x=x, loops=loops: loop(x, loops)),
            description=describe_loop("numpy", length, loops),
            dtype="float32",
            bytes_moved=loop_bytes(length, loops),
            flops=loop_flops(length, loops),
        )
    ctx.note("NumPy's sin/cos/add run on one thread whatever --threads says")

    perturb.check(ctx, "f_at_6", [float(v) for v in f(check_points())])
    perturb.check(ctx, "seed_f16_error", seed_error(f(seed_points())))
