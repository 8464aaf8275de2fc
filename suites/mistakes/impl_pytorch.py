from __future__ import annotations

from suites.mistakes.common import Ops
from suites.mistakes.common import run as run_mistake
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import torch

    run_mistake(ctx, Ops(
        put=lambda x: torch.from_numpy(x).to(ctx.device),
        matmul=torch.matmul,
        to_numpy=lambda x: x.cpu().numpy(),
        as_float32=lambda x: x.float(),
    ))  # fmt: skip
