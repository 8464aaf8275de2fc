from __future__ import annotations

from suites.cifar10.common import load, recipe
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import torch

    from suites.cifar10.models_torch import CNN, make_prepare
    from suites.runtime import training_torch

    p = ctx.params
    training_torch.torch_variant(p["variant"], ctx.device)  # an unsupported variant skips before any work
    images, orders, aux = load(ctx)
    data = training_torch.to_device(ctx, images.train_x, images.train_y, images.test_x, images.test_y, orders, aux)
    training_torch.seed_everything(p["seed"])
    model = CNN().to(ctx.device)
    training_torch.run(
        ctx,
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=p["lr"]),
        prepare=make_prepare(ctx.device),
        data=data,
        recipe=recipe(ctx),
    )
