from __future__ import annotations

from suites.contract.ranks import data_parallel
from suites.mnist.common import LAYERS, MOMENTUM, flops_per_sample, load, recipe
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import torch

    from suites.mnist.models_torch import CNN, prepare
    from suites.runtime import training_torch

    p = ctx.params
    if data_parallel(p):
        from suites.runtime import data_parallel as dp
        from suites.runtime import dp_torch

        images, _ = load(ctx)
        training_torch.seed_everything(p["seed"])

        def optimizer(m: torch.nn.Module) -> torch.optim.Optimizer:
            return torch.optim.SGD(m.parameters(), lr=p["lr"], momentum=MOMENTUM)

        made = dp_torch.image_recipe(ctx, model=CNN, prepare=prepare, layers=LAYERS, images=images,
                                     optimizer=optimizer, lr=p["lr"], seed=p["seed"],
                                     flops_per_row=flops_per_sample())  # fmt: skip
        dp.run(ctx, made, lambda ranks, recipe, shape: dp_torch.TorchLoop(ranks, recipe, shape, ctx.device))
        return
    training_torch.torch_variant(p["variant"], ctx.device)  # an unsupported variant skips before any work
    images, orders = load(ctx)
    data = training_torch.to_device(ctx, images.train_x, images.train_y, images.test_x, images.test_y, orders, None)
    training_torch.seed_everything(p["seed"])
    model = CNN().to(ctx.device)
    training_torch.run(
        ctx,
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=p["lr"], momentum=MOMENTUM),
        prepare=prepare,
        data=data,
        recipe=recipe(ctx),
    )
