"""TEMPLATE, PyTorch: asynchronous on GPUs; the runtime's sync is torch.cuda.synchronize()."""

from __future__ import annotations

from suites._template.common import flops, inputs
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import torch

    n = ctx.params["n"]
    a, b = (torch.from_numpy(m).to(ctx.device) for m in inputs(n, ctx.params["seed"]))
    with torch.inference_mode():
        c = ctx.measure("matmul", lambda: a @ b, flops=flops(n), dtype="float32")
        ctx.check("product_sum", float(c.double().sum()))
