from __future__ import annotations

from suites.contract.ranks import data_parallel
from suites.mnist.common import LAYERS, MOMENTUM, flops_per_sample, load, recipe
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import optax
    from flax import nnx

    from suites.mnist.models_flax import CNN, prepare
    from suites.runtime import training_jax

    p = ctx.params
    if data_parallel(p):
        from suites.runtime import data_parallel as dp
        from suites.runtime import dp_jax

        images, _ = load(ctx)
        model = lambda: CNN(nnx.Rngs(params=p["seed"], dropout=p["seed"] + 1))  # noqa: E731
        tx = optax.sgd(p["lr"], momentum=MOMENTUM)
        dp.run(
            ctx,
            dp_jax.image_recipe(
                model=model,
                prepare=prepare,
                layers=LAYERS,
                images=images,
                tx=tx,
                lr=p["lr"],
                seed=p["seed"],
                flops_per_row=flops_per_sample(),
            ),  # fmt: skip
            dp_jax.JaxLoop,
        )
        return
    training_jax.jax_variant(p["variant"])
    images, orders = load(ctx)
    data = training_jax.to_device(ctx, images.train_x, images.train_y, images.test_x, images.test_y, orders, None)
    model = CNN(nnx.Rngs(params=p["seed"], dropout=p["seed"] + 1), dtype=training_jax.compute_dtype(ctx))
    training_jax.run(
        ctx,
        model=model,
        tx=optax.sgd(p["lr"], momentum=MOMENTUM),
        prepare=prepare,
        data=data,
        recipe=recipe(ctx),
    )
