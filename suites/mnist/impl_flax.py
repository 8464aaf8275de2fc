from __future__ import annotations

from suites.mnist.common import MOMENTUM, load, recipe
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import optax
    from flax import nnx

    from suites.mnist.models_flax import CNN, prepare
    from suites.runtime import training_jax

    p = ctx.params
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
