"""The workload and every planted mistake, once: each framework supplies only its array operations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from suites.contract.errors import Skip
from suites.runtime.context import Context

# inflated_flops claims this many times the device's float64 limit in the median time measured: tied
# to the time the machine gave, the rate is above the limit whatever the honest speed. A fixed 10x
# count was not: on a busy 2-core machine an honest 256 x 256 product ran at 1.7 GFLOP/s, and ten
# times that, 17 GFLOP/s, looked possible under a 250 GFLOP/s limit.
INFLATION = 2.0
# The mistakes that skip work show as a short call (a lookup, a dispatch) beside the work it skips;
# a busy machine slows the short call as much as anything (a deleted product's dispatch took 233 us,
# 144 GFLOP/s at N = 256 under that 250 GFLOP/s limit). At N = 1024 the work is 64 times larger and
# the short call no longer, so the rate it implies stays far above the limit. On a GPU the default
# N = 4096 already dwarfs the call.
CPU_SKIPPERS = ("unsynchronised", "memoised", "dead_code")
CPU_SKIPPER_SIZE = 1024
# retrace_epochs: the product timed as training suites time epochs (runtime/training.py), this many
# epochs of this many products each; epoch 1 is the first call, the others the steady samples.
EPOCHS, EPOCH_CALLS = 4, 4


@dataclass(frozen=True)
class Ops:
    put: Callable[[Any], Any]  # a NumPy array -> the framework's, on the job's device
    matmul: Callable[[Any, Any], Any]  # compiled where the framework compiles
    to_numpy: Callable[[Any], Any]
    as_float32: Callable[[Any], Any]
    # A compiled step that computes the product and returns something else (compilers delete it).
    discard: Callable[[Any, Any], Any] | None = None
    # The product compiled with a static argument: each new value is a new program (a retrace).
    specialised: Callable[[Any, Any, int], Any] | None = None
    # The product beside a cache that grows by one row per call (JAX decoding with a concatenated KV
    # cache): the cache is an argument, so each call has a new shape and compiles anew. Returns (C, cache).
    grow: Callable[[Any, Any, Any], tuple[Any, Any]] | None = None
    # Sets the framework's own compute pool to this many threads.
    threads: Callable[[int], None] | None = None


def size(ctx: Context) -> int:
    """Every framework of a run gets the same N: it follows the run's mistake, not who makes it."""
    if int(ctx.params["n"]):
        return int(ctx.params["n"])
    if ctx.device_kind == "gpu":
        return 4096
    return CPU_SKIPPER_SIZE if ctx.params["mistake"] in CPU_SKIPPERS else 256


def planted(ctx: Context) -> str:
    return str(ctx.params["mistake"]) if ctx.params["culprit"] == ctx.framework else "none"


def operands(n: int, seed: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return rng.random((n, n)), rng.random((n, n))


def epochs(ctx: Context, ops: Ops, a: Any, b: Any, retrace: bool) -> Any:
    """The product timed in epochs through the training suites' loop and records (runtime/training.py):
    the `epoch` metric and the `throughput` derived from it. `retrace`: every epoch specialises the
    product on its epoch number (a static argument), so each steady epoch compiles anew."""
    from suites.runtime import training

    if retrace and ops.specialised is None:
        raise ValueError(f"{ctx.framework} compiles nothing here: retrace_epochs does not apply")
    specialised = ops.specialised

    def run_epoch(e: int) -> Any:
        out = None
        for _ in range(EPOCH_CALLS):
            out = specialised(a, b, e) if retrace and specialised is not None else ops.matmul(a, b)
        return out

    last: dict[str, Any] = {}

    def read(out: Any) -> tuple[float, float]:
        last["c"] = out
        return 0.0, 0.0  # no loss here: the product is checked below

    # A framework with no compiled product here (NumPy, eager PyTorch) compiles nothing: counted as 0.
    counter = ctx.compile_count() if specialised is not None else None
    history = training.train(ctx, epochs=EPOCHS, run_epoch=run_epoch, read=read, samples_per_epoch=EPOCH_CALLS,
                             compilations=counter)  # fmt: skip
    training.record(ctx, history, variant="retraced every epoch" if retrace else None)
    return last["c"]


def run(ctx: Context, ops: Ops) -> None:
    n, seed, mistake = size(ctx), int(ctx.params["seed"]), planted(ctx)
    a_np, b_np = operands(n, seed)
    a, b = ops.put(a_np), ops.put(b_np)
    if ctx.params["mistake"] == "retrace_epochs":  # every framework trains in epochs; the culprit's retrace
        c = epochs(ctx, ops, a, b, retrace=mistake == "retrace_epochs")
        _check(ctx, ops, c)
        return

    def honest() -> Any:
        return ops.matmul(a, b)

    timed: Callable[[], Any] = honest
    flops = 2.0 * n**3
    if mistake == "own_data":  # its own random inputs, not the shared ones
        import numpy as np

        rng = np.random.default_rng(seed + 1)
        own_a, own_b = ops.put(rng.random((n, n))), ops.put(rng.random((n, n)))
        timed = lambda: ops.matmul(own_a, own_b)  # noqa: E731
    elif mistake == "float32":  # float32 arithmetic under a float64 suite
        a32, b32 = ops.as_float32(a), ops.as_float32(b)
        timed = lambda: ops.matmul(a32, b32)  # noqa: E731
    elif mistake == "half_work":  # half the rows: less work than the metric claims
        top = ops.put(a_np[: n // 2])
        timed = lambda: ops.matmul(top, b)  # noqa: E731
    elif mistake == "memoised":  # the result kept from the first call
        kept: dict[str, Any] = {}

        def timed() -> Any:
            if "c" not in kept:
                kept["c"] = honest()
            return kept["c"]
    elif mistake == "dead_code":  # the product is never used: the compiler deletes it
        if ops.discard is None:
            raise ValueError(f"{ctx.framework} compiles nothing here: dead_code does not apply")
        discard = ops.discard
        timed = lambda: discard(a, b)  # noqa: E731
    elif mistake == "retrace":  # a static argument that changes with every call: compiled each time
        if ops.specialised is None:
            raise ValueError(f"{ctx.framework} compiles nothing here: retrace does not apply")
        specialised, calls = ops.specialised, iter(range(1 << 30))
        timed = lambda: specialised(a, b, next(calls))  # noqa: E731
    elif mistake == "growing_cache":  # a decode step whose cache grows a row per call: a new shape, a compile each
        if ops.grow is None:
            raise ValueError(f"{ctx.framework} compiles nothing here: growing_cache does not apply")
        grow = ops.grow
        state = {"cache": ops.put(a_np[:1])}

        def timed() -> Any:
            c, state["cache"] = grow(a, b, state["cache"])
            return c
    elif mistake == "extra_threads":  # the run's core limit undone: every core, a thread on each
        import os

        if ops.threads is None:
            raise ValueError(f"{ctx.framework} sizes no pool of its own here: extra_threads does not apply")
        everything = range(os.cpu_count() or 1)
        os.sched_setaffinity(0, everything)
        ops.threads(len(everything))
    elif mistake == "inflated_flops" and not float(ctx.params["limit"]):
        raise Skip(
            "inflated_flops claims a multiple of the device's float64 FLOP/s limit: no --param limit "
            "given (selftest --mistakes passes it where the device's peak is known)"
        )
    elif mistake == "unsynchronised":  # the result stored aside, nothing returned to wait on
        held: dict[str, Any] = {}

        def timed() -> Any:
            held["c"] = honest()

    c = ctx.measure("matmul", timed, flops=flops, bytes_moved=3.0 * n * n * 8, dtype="float64",
                    description=f"C = A @ B, {n} x {n} float64" + (f" (planted: {mistake})" if mistake != "none" else ""))  # fmt: skip
    if mistake == "inflated_flops":
        inflate(ctx.metrics[-1], float(ctx.params["limit"]))
    if mistake in ("memoised", "dead_code", "inflated_flops", "unsynchronised"):
        c = honest()  # these leave the product right: only the timing guard may catch them
    _check(ctx, ops, c)


def inflate(metric: dict[str, Any], limit: float) -> None:
    """The count the inflated_flops mistake claims, set once the samples are in: INFLATION times what
    the device can do (`limit`, FLOP/s) in the median time measured, so the rate the host reads
    (the count over that median) is INFLATION x `limit` however slow the machine was."""
    metric["flops"] = INFLATION * limit * metric["stats"]["median"]


def _check(ctx: Context, ops: Ops, c: Any) -> None:
    product = ops.to_numpy(c).astype("float64")
    rows, cols = product.shape  # what the timed call returned, whatever it computed
    ctx.check("product", [float(product.sum()), float(product[0, 0]), float(product[-1, -1]),
                          float(product[rows // 2, cols // 3])])  # fmt: skip
