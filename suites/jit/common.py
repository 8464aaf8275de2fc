"""What every framework of the jit suite shares: the lengths, the inputs and the seed's numbers."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from suites.contract.errors import JobError
from suites.runtime.context import Context

# The seed's printed x1 and y1 ("sanity values"). x1 is exactly jnp.linspace(0, 4 pi, 6,
# dtype=float16): 2.512 is the float16 2.5117188, not float32's 2.5132742.
SEED_X16 = (0.0, 2.512, 5.023, 7.535, 10.05, 12.56)
SEED_F16 = (1.0, 1.398, -0.76, 1.653, 1.748, 3.508)

LOOP_NOTE = (
    "rows eager/jit L=.. K=..: steady = seconds per loop of K calls (the seed's quantity); "
    "first call = a single call of f (trace + compile + run)"
)

# How many loop outputs JAX may have in flight before the oldest is waited for (see impl_jax).
IN_FLIGHT = 2


def lengths(params: dict[str, Any]) -> list[tuple[int, int]]:
    """(L, K) pairs: L over the decades min_length..max_length, K = total // L calls per loop."""
    low, high, total = params["min_length"], params["max_length"], params["total"]
    if low > high:
        raise JobError(f"min_length={low} is above max_length={high}; lower min_length or raise max_length")
    found = []
    length = low
    while length <= high:
        found.append((length, max(1, total // length)))
        length *= 10
    return found


def short(n: int) -> str:
    """10000 -> '1e4'; other numbers as they are."""
    exponent = round(math.log10(n)) if n > 0 else 0
    return f"1e{exponent}" if n == 10**exponent and exponent >= 3 else str(n)


def name(variant: str, length: int, loops: int) -> str:
    return f"{variant} L={short(length)} K={short(loops)}"


def inputs(length: int) -> Any:
    """x = linspace(0, 4 pi, L) in float32, computed once by NumPy for every framework."""
    import numpy as np

    return np.linspace(0.0, 4.0 * np.pi, length, dtype=np.float32)


def check_points() -> Any:
    return inputs(6)


def seed_points() -> Any:
    import numpy as np

    return np.asarray(SEED_X16, dtype=np.float16)


def seed_error(values: Any) -> float:
    return max(abs(float(v) - s) for v, s in zip(values, SEED_F16, strict=True))


def loop_bytes(length: int, loops: int) -> float:
    """Least memory traffic of one sample (a loop of K calls): each call reads x and writes f(x).

    float32 in and out; the eager variants move more (one array per intermediate), so this
    is a lower bound on what really moved, which keeps the bandwidth lint from ever flagging
    an honest sample.
    """
    return float(loops) * length * 4 * 2


def loop_flops(length: int, loops: int) -> float:
    """Floating-point operations of one sample (a loop of K calls of f = 0.2 x + sin x + cos 2x).

    Per element two multiplies and two adds, with sin and cos counted as one operation each: a
    lower bound (a library's sin costs tens of instructions), so the FLOP lint never flags an
    honest sample and the roofline's arithmetic intensity (flops / `loop_bytes`) is a floor.
    """
    return 6.0 * length * loops


def describe_loop(variant: str, length: int, loops: int) -> str:
    return (
        f"{variant}: first call = one call of f on L={length} float32 elements (trace + compile + run); "
        f"each sample = a loop of K={loops} calls ({length * loops:.3g} elements), every output synchronised"
    )


class FirstCallThenLoops:
    """What `ctx.measure` times for one (variant, length).

    Its first invocation is a single call of f, so the contract's "first call" is what a user
    waits for before the first result (trace + compile + one run), not that plus K - 1 calls.
    Every later invocation (warm-up and samples) is the seed's loop of K calls.
    """

    def __init__(self, call: Callable[[], Any], loop: Callable[[], Any]) -> None:
        self._call, self._loop, self._first = call, loop, True

    def __call__(self) -> Any:
        if self._first:
            self._first = False
            return self._call()
        return self._loop()


def _metric(ctx: Context, metric_name: str) -> dict[str, Any]:
    return next(m for m in ctx.metrics if m["name"] == metric_name)


def record_speedup(ctx: Context, length: int, loops: int) -> None:
    """Jit-over-eager speed-up (ratio of steady medians) and the one-off cost of the first call."""
    eager = _metric(ctx, name("eager", length, loops))
    jit = _metric(ctx, name("jit", length, loops))
    ctx.value(
        f"speed-up L={short(length)}",
        eager["stats"]["median"] / jit["stats"]["median"],
        unit="x",
        description="steady eager loop / steady jit loop (medians); above 1: compiling paid off",
        derived_from=[eager["name"], jit["name"]],
    )
    ctx.value(
        f"compile L={short(length)}",
        jit["first_call"] - jit["stats"]["median"] / loops,
        unit="s",
        better="lower",
        description="first jit call minus the steady time per call: trace + compile, paid once per new shape "
        "(about 0 where a compiled kernel is reused)",
        derived_from=jit["name"],
    )
