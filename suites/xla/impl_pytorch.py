from __future__ import annotations

from suites.runtime.context import Context
from suites.xla.common import counts, shared_factors


def run(ctx: Context) -> None:
    import torch

    n, seed = ctx.params["matrix_size"], ctx.params["seed"]
    sync = ctx.params["synchronise"]
    dev = ctx.device
    gen = torch.Generator(device=dev).manual_seed(seed)

    def generate() -> tuple[torch.Tensor, torch.Tensor]:
        return (
            torch.rand(n, n, dtype=torch.float64, device=dev, generator=gen),
            torch.rand(n, n, dtype=torch.float64, device=dev, generator=gen),
        )

    with torch.inference_mode():
        a, b = ctx.measure("generate", generate)
        ctx.measure("mean_sum", lambda: (a.mean(), b.mean(), a.sum(), b.sum()), **counts("mean_sum", n))
        c = ctx.measure("matmul", lambda: a @ b, synchronise=sync, **counts("matmul", n))
        ctx.measure("inverse", lambda: torch.linalg.inv(c), synchronise=sync, **counts("inverse", n))

        sa, sb = (torch.from_numpy(m).to(dev) for m in shared_factors(n, seed))
        sc = sa @ sb
        eye = torch.eye(n, dtype=torch.float64, device=dev)
        ctx.check("residual", float((sc @ torch.linalg.inv(sc) - eye).abs().max()))
        ctx.check("product_sum", float(sc.sum()))
