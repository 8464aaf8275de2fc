from __future__ import annotations

from suites.calibrate.common import SCALE, matmul_size, measure_all, stream_elements
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import torch

    n, dev = matmul_size(ctx), ctx.device
    gen = torch.Generator(device=dev).manual_seed(0)
    a64 = torch.rand(n, n, dtype=torch.float64, device=dev, generator=gen)
    b64 = torch.rand(n, n, dtype=torch.float64, device=dev, generator=gen)
    a32, b32 = a64.float(), b64.float()
    x = torch.ones(stream_elements(ctx), dtype=torch.float32, device=dev)
    y = torch.empty_like(x)
    with torch.inference_mode():
        measure_all(
            ctx,
            {"float32": lambda: a32 @ b32, "float64": lambda: a64 @ b64},
            lambda: torch.mul(x, SCALE, out=y),
        )
