"""Sizes, counts and the arithmetic-keyed matmul measurement every framework's calibration shares."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from suites.contract import precision
from suites.runtime.context import Context

SCALE = 1.0001  # STREAM "scale": y = s * x reads and writes every element once


def matmul_size(ctx: Context) -> int:
    n = int(ctx.params["matmul_size"])
    return n or (8192 if ctx.device_kind == "gpu" else 1024)


def stream_elements(ctx: Context) -> int:
    mib = int(ctx.params["stream_mib"]) or (2048 if ctx.device_kind == "gpu" else 256)
    return mib * 2**20 // 4  # float32 elements


def matmul_flops(n: int) -> float:
    return 2.0 * n**3


ITEMSIZE = {"float32": 4, "float64": 8, "bfloat16": 2}


def matmul_bytes(n: int, dtype: str) -> float:
    """Compulsory traffic of C = A @ B: read A and B, write C, once each. The roofline needs both
    quantities of every metric; the bandwidth this implies is far below the stream's, so the
    calibration's best-of (harness/store/calibration.py) still takes bandwidth from the stream."""
    return 3.0 * n * n * ITEMSIZE[dtype]


def stream_bytes(elements: int) -> float:
    return 2.0 * 4 * elements  # read x, write y (float32)


def stream_flops(elements: int) -> float:
    """One multiply per element: the stream's place on the roofline (its FLOP/s never sets a ceiling)."""
    return float(elements)


@contextmanager
def unchanged() -> Iterator[None]:
    yield


@dataclass(frozen=True)
class Matmul:
    """One matmul to calibrate: its operands' dtype and the arithmetic asked for them.

    A float32 matmul is keyed by the class the precision probe measures through the same code path
    (`probe`), not by what was asked: a tf32 request on a CPU computes fp32, and is then the fp32
    ceiling measured twice. bfloat16 and float64 operands compute in their own arithmetic."""

    dtype: str  # float32, bfloat16 or float64: the operands' dtype, as the host keys it
    asked: str  # fp32, tf32, bf16, fp64: the arithmetic asked for (flags, casts or dtype)
    make: Callable[[int], Callable[[], Any]]  # size M -> one timed product of M x M operands
    # float32 only: the same product of the probe's operands (numpy float32) as an array-like.
    probe: Callable[[Any, Any], Any] | None = None
    # The framework settings this arithmetic needs, held while it is probed and timed.
    setting: Callable[[], AbstractContextManager[Any]] = field(default=unchanged)


KEYED = {"bfloat16": "bfloat16/bf16", "float64": "float64/fp64"}


def measured_key(case: Matmul, probe: precision.Probe) -> tuple[str, str]:
    """(ceiling key, how it was found) of one matmul, inside its setting."""
    if case.dtype != "float32" or case.probe is None:
        return KEYED[case.dtype], f"{case.dtype} operands"
    import numpy as np

    found = probe.measure(np.asarray(case.probe(probe.lhs, probe.rhs), dtype=np.float64))
    return f"float32/{found['class']}", f"asked {case.asked}; the precision probe measured {found['bits']} bits"


# Each matmul at N, N/2 and N/4 (metric name suffix): a ceiling is the best the machine reaches,
# and on a shared machine a sample of a few milliseconds finds it quiet far more often than one of
# a hundred (on a loaded 2-core machine a 1024^3 float64 product reached 49 GFLOP/s, 512^3 126).
# On a GPU the smaller products are slower and simply never the best.
SIZES = ((1, ""), (2, " n/2"), (4, " n/4"))
MIN_SIZE = 16
# A product that takes seconds (PyTorch's bfloat16 on a CPU without bf16 units: 2.3 s at 1024 on
# this project's 2-core machine, 50 of its 80-second calibration) gets fewer samples: a ceiling is
# its best sample, and long samples do not find a quiet moment by number. At least MIN_SAMPLES
# (or the suite's repeat, when a test asks for fewer).
SAMPLE_BUDGET_S = 3.0
MIN_SAMPLES = 3


def samples_for(ctx: Context, fn: Callable[[], Any]) -> int:
    """How many samples `fn` gets: the suite's repeat, fewer when one call (timed here, synchronised,
    after the compile of its first) would make them take over SAMPLE_BUDGET_S."""
    ctx.sync(fn())  # compiles where the framework compiles: not what is timed next
    began = time.perf_counter()
    ctx.sync(fn())
    once = time.perf_counter() - began
    return min(ctx.repeat, max(MIN_SAMPLES, int(SAMPLE_BUDGET_S / max(once, 1e-9))))  # never above repeat


def measure_all(ctx: Context, matmuls: Sequence[Matmul], stream: Callable[[], Any]) -> None:
    """Each matmul under its own arithmetic, named by the ceiling key it measured ("matmul
    float32/tf32", "... n/2"), then the stream. A key measured already is not measured again."""
    n = matmul_size(ctx)
    probe = precision.matmul_probe()
    done: dict[str, str] = {}
    for case in matmuls:
        with case.setting():
            key, how = measured_key(case, probe)
            if key in done:
                ctx.note(f"matmul {case.dtype} asked {case.asked}: computes as {key}, measured already ({done[key]})")
                continue
            done[key] = f"asked {case.asked}"
            for size, suffix in ((n // d, suffix) for d, suffix in SIZES if n // d >= MIN_SIZE):
                product = case.make(size)
                ctx.measure(
                    f"matmul {key}{suffix}",
                    product,
                    repeat=samples_for(ctx, product),
                    warmup=0,  # samples_for ran it twice
                    flops=matmul_flops(size),
                    bytes_moved=matmul_bytes(size, case.dtype),
                    dtype=case.dtype,
                    description=f"{how}; N = {size}",
                )
    elements = stream_elements(ctx)
    ctx.measure(
        "stream scale", stream, bytes_moved=stream_bytes(elements), flops=stream_flops(elements), dtype="float32"
    )
