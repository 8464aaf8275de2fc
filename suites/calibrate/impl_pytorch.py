from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from suites.calibrate.common import SCALE, Matmul, matmul_size, measure_all, stream_elements
from suites.runtime.context import Context


@contextmanager
def float32_matmul(level: str) -> Iterator[None]:
    """torch.set_float32_matmul_precision(level) and the TF32 switch with it ("highest": off), as the
    pytorch adapter sets them for a job's --precision; the job's own settings come back after."""
    import torch

    saved = torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32
    torch.set_float32_matmul_precision(level)
    torch.backends.cuda.matmul.allow_tf32 = level != "highest"
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cuda.matmul.allow_tf32 = saved[1]


@contextmanager
def autocast_bf16(device_type: str) -> Iterator[None]:
    """Real bf16 as a job's --precision bf16 runs it: bfloat16 operands under torch.autocast, float32
    accumulation throughout (no bfloat16 split-K reduction), float32 matmuls left at full precision."""
    import torch

    matmul = torch.backends.cuda.matmul
    saved = matmul.allow_bf16_reduced_precision_reduction
    matmul.allow_bf16_reduced_precision_reduction = False
    try:
        with float32_matmul("highest"), torch.autocast(device_type=device_type, dtype=torch.bfloat16):
            yield
    finally:
        matmul.allow_bf16_reduced_precision_reduction = saved


def product(a: Any, b: Any) -> Callable[[int], Callable[[], Any]]:
    """Size M -> a timed product of the leading M x M blocks (contiguous copies, made once)."""

    def make(m: int) -> Callable[[], Any]:
        x, y = a[:m, :m].contiguous(), b[:m, :m].contiguous()
        return lambda: x @ y

    return make


def run(ctx: Context) -> None:
    import torch

    n, dev = matmul_size(ctx), ctx.device
    gen = torch.Generator(device=dev).manual_seed(0)
    a64 = torch.rand(n, n, dtype=torch.float64, device=dev, generator=gen)
    b64 = torch.rand(n, n, dtype=torch.float64, device=dev, generator=gen)
    a32, b32 = a64.float(), b64.float()
    a16, b16 = a32.bfloat16(), b32.bfloat16()
    x = torch.ones(stream_elements(ctx), dtype=torch.float32, device=dev)
    y = torch.empty_like(x)

    def on_device(a: Any, b: Any) -> Any:  # the probe's numpy operands, multiplied on this device
        return (torch.from_numpy(a).to(dev) @ torch.from_numpy(b).to(dev)).double().cpu().numpy()

    f32 = product(a32, b32)
    matmuls = [
        Matmul("float32", "fp32", f32, probe=on_device, setting=lambda: float32_matmul("highest")),
        Matmul("float32", "tf32", f32, probe=on_device, setting=lambda: float32_matmul("high")),
        Matmul("float32", "bf16", f32, probe=on_device, setting=lambda: autocast_bf16(dev.type)),
        Matmul("bfloat16", "bf16", product(a16, b16)),
        Matmul("float64", "fp64", product(a64, b64)),
    ]
    with torch.inference_mode():
        measure_all(ctx, matmuls, lambda: torch.mul(x, SCALE, out=y))
