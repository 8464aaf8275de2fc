"""TEMPLATE, NumPy: synchronous, so the timed callback's return is already finished work."""

from __future__ import annotations

from suites._template.common import flops, inputs
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    n = ctx.params["n"]
    a, b = inputs(n, ctx.params["seed"])
    c = ctx.measure("matmul", lambda: a @ b, flops=flops(n), dtype="float32")
    ctx.check("product_sum", float(c.sum(dtype="float64")))
