from __future__ import annotations

from suites.cifar10.common import load, recipe
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import optax
    from flax import nnx

    from suites.cifar10.models_flax import CNN, prepare
    from suites.runtime import training_jax

    p = ctx.params
    training_jax.jax_variant(p["variant"])
    images, orders, aux = load(ctx)
    data = training_jax.to_device(ctx, images.train_x, images.train_y, images.test_x, images.test_y, orders, aux)
    training_jax.run(
        ctx,
        model=CNN(nnx.Rngs(params=p["seed"]), dtype=training_jax.compute_dtype(ctx)),
        tx=optax.adam(p["lr"]),
        prepare=prepare,
        data=data,
        recipe=recipe(ctx),
    )
