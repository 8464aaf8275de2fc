from __future__ import annotations

from typing import Any

from suites.mistakes.common import Ops
from suites.mistakes.common import run as run_mistake
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import torch

    def specialised(a: Any, b: Any, step: int) -> Any:
        return torch.matmul(a, b) + 0.0 * step

    def compiled(a: Any, b: Any, step: int) -> Any:
        # dynamic=False: TorchDynamo specialises on the int, so each new value is a new graph. The
        # eager backend keeps the compile to TorchDynamo's own tracing (no C++ compiler on the path).
        return torch.compile(specialised, backend="eager", dynamic=False)(a, b, step)

    run_mistake(ctx, Ops(
        put=lambda x: torch.from_numpy(x).to(ctx.device),
        matmul=torch.matmul,
        to_numpy=lambda x: x.cpu().numpy(),
        as_float32=lambda x: x.float(),
        # TorchDynamo only when planted
        specialised=compiled if ctx.params["mistake"] in ("retrace", "retrace_epochs") else None,
        threads=torch.set_num_threads,
    ))  # fmt: skip
