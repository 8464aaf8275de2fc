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


def stream_bytes(elements: int) -> float:
    return 2.0 * 4 * elements  # read x, write y (float32)


def measure_all(ctx: Context, matmul: dict[str, Callable[[], Any]], stream: Callable[[], Any]) -> None:
    n = matmul_size(ctx)
    for dtype, fn in matmul.items():
        ctx.measure(f"matmul {dtype}", fn, flops=matmul_flops(n), dtype=dtype)
    ctx.measure("stream scale", stream, bytes_moved=stream_bytes(stream_elements(ctx)))
