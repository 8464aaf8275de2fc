"""The planted step in PyTorch, eager."""

from __future__ import annotations

import time
from typing import Any

from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import torch

    from suites.profplant.common import PLANTED_PRODUCTS, inputs

    size, plant = int(ctx.params["size"]), str(ctx.params["plant"])
    x_np, w_np = inputs(size)
    x, w = (torch.from_numpy(a).to(ctx.device) for a in (x_np, w_np))

    def step() -> Any:
        with torch.no_grad():
            h = torch.tanh(x @ w)
            if plant == "sync":
                h.sum().item()  # a number back on the host, mid-step (a CPU tensor is host memory already)
            if plant == "sleep":
                time.sleep(float(ctx.params["sleep_ms"]) / 1000)
            grad = x.T @ (1.0 - h * h)
            out = w - 0.01 * grad / torch.linalg.norm(grad)
            for _ in range(PLANTED_PRODUCTS if plant == "matmul" else 0):
                out = out @ w
            return out

    out = ctx.measure("step", step, flops=None, description="forward, backward, update; plus the planted cost")
    ctx.check("output_sum", float(out.sum()))
