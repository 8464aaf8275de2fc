"""PyTorch: torch.func's vmap(grad), the sum trick, and the seed's loop of scalar backward passes."""

from __future__ import annotations

from typing import Any

from suites.autograd.common import (
    DESCRIPTIONS,
    GRAD_OF_SUM,
    SCALAR_LOOP,
    VMAP_GRAD,
    check_points,
    max_spread,
    seed_error,
    seed_grad_20_error,
    timing_points,
)
from suites.runtime import perturb
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import torch

    def f(x: Any) -> Any:
        return 0.2 * x + torch.sin(x) + torch.cos(2 * x)

    vmap_grad = torch.func.vmap(torch.func.grad(f))

    def grad_of_sum(x: Any) -> Any:
        leaf = x.detach().requires_grad_()
        (gradient,) = torch.autograd.grad(f(leaf).sum(), leaf)
        return gradient

    def scalar_loop(points: list[Any]) -> list[Any]:
        # The seed's algorithm: one forward and one backward pass per point. autograd.grad
        # instead of .backward() so repeated samples do not accumulate into .grad.
        grads = []
        for point in points:
            (gradient,) = torch.autograd.grad(f(point), point)
            grads.append(gradient)
        return grads

    xs = torch.from_numpy(timing_points(ctx.params["points"])).to(ctx.device)
    # Split once, outside the clock: the loop times the gradients, not indexing.
    leaves = [p.detach().clone().requires_grad_() for p in xs.unbind()]

    outputs = [
        ctx.measure(VMAP_GRAD, lambda: vmap_grad(xs), description=DESCRIPTIONS[VMAP_GRAD]),
        ctx.measure(GRAD_OF_SUM, lambda: grad_of_sum(xs), description=DESCRIPTIONS[GRAD_OF_SUM]),
        ctx.measure(SCALAR_LOOP, lambda: scalar_loop(leaves), description=DESCRIPTIONS[SCALAR_LOOP]),
    ]

    three = torch.tensor(3.0, dtype=torch.float32, device=ctx.device, requires_grad=True)
    value = f(three)
    (slope,) = torch.autograd.grad(value, three)
    f3, g3 = float(value.detach()), float(slope)
    perturb.check(ctx, "f_at_3", f3)
    perturb.check(ctx, "grad_at_3", g3)
    g20 = [float(v) for v in vmap_grad(torch.from_numpy(check_points()).to(ctx.device)).cpu()]
    perturb.check(ctx, "grad_at_20", g20)
    perturb.check(ctx, "seed_error", seed_error(f3, g3))
    perturb.check(ctx, "seed_grad_20_error", seed_grad_20_error(g20))
    stacked = [torch.stack(o) if isinstance(o, list) else o for o in outputs]
    perturb.check(ctx, "methods_agree", max_spread([o.detach().cpu().numpy() for o in stacked]))
    ctx.note("no jit rows for PyTorch: the seed compiled nothing there (torch.compile is timed by the jit suite)")
