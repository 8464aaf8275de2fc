"""Sizes and counts every framework's calibration shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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


ITEMSIZE = {"float32": 4, "float64": 8}


def matmul_bytes(n: int, dtype: str) -> float:
    """Compulsory traffic of C = A @ B: read A and B, write C, once each. The roofline needs both
    quantities of every metric; the bandwidth this implies is far below the stream's, so the
    calibration's best-of (harness/calibration.py) still takes bandwidth from the stream."""
    return 3.0 * n * n * ITEMSIZE[dtype]


def stream_bytes(elements: int) -> float:
    return 2.0 * 4 * elements  # read x, write y (float32)


def stream_flops(elements: int) -> float:
    """One multiply per element: the stream's place on the roofline (its FLOP/s never sets a ceiling)."""
    return float(elements)


def measure_all(ctx: Context, matmul: dict[str, Callable[[], Any]], stream: Callable[[], Any]) -> None:
    n = matmul_size(ctx)
    for dtype, fn in matmul.items():
        ctx.measure(f"matmul {dtype}", fn, flops=matmul_flops(n), bytes_moved=matmul_bytes(n, dtype), dtype=dtype)
    elements = stream_elements(ctx)
    ctx.measure(
        "stream scale", stream, bytes_moved=stream_bytes(elements), flops=stream_flops(elements), dtype="float32"
    )
