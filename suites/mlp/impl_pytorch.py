from __future__ import annotations

from typing import Any

from suites.mlp.common import HIDDEN, load, recipe
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import torch
    from torch import nn

    from suites.runtime import training_torch

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hidden = nn.Linear(2, HIDDEN)
            self.out = nn.Linear(HIDDEN, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(torch.relu(self.hidden(x)))  # logits; the loss applies log-softmax + NLL

    def prepare(x: Any, aux: Any) -> Any:
        return x

    p = ctx.params
    training_torch.torch_variant(p["variant"], ctx.device)
    points, orders = load(ctx)
    data = training_torch.to_device(ctx, points.train_x, points.train_y, points.test_x, points.test_y, orders, None)
    training_torch.seed_everything(p["seed"])
    model = MLP().to(ctx.device)
    training_torch.run(
        ctx,
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=p["lr"]),
        prepare=prepare,
        data=data,
        recipe=recipe(ctx),
    )
