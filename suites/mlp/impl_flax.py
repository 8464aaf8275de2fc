from __future__ import annotations

from typing import Any

from suites.mlp.common import HIDDEN, load, recipe
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from suites.runtime import training_jax

    class MLP(nnx.Module):
        def __init__(self, rngs: nnx.Rngs, dtype: Any) -> None:
            # dtype: bfloat16 under `--precision bf16` (float32 parameters either way)
            self.hidden = nnx.Linear(2, HIDDEN, dtype=dtype, param_dtype=jnp.float32, rngs=rngs)
            self.out = nnx.Linear(HIDDEN, 2, dtype=dtype, param_dtype=jnp.float32, rngs=rngs)

        def __call__(self, x: jax.Array) -> jax.Array:
            return self.out(nnx.relu(self.hidden(x)))  # logits; the loss applies log-softmax + NLL

    def prepare(x: Any, aux: Any) -> Any:
        return x

    p = ctx.params
    training_jax.jax_variant(p["variant"])
    points, orders = load(ctx)
    data = training_jax.to_device(ctx, points.train_x, points.train_y, points.test_x, points.test_y, orders, None)
    training_jax.run(
        ctx,
        model=MLP(nnx.Rngs(params=p["seed"]), training_jax.compute_dtype(ctx)),
        tx=optax.adam(p["lr"]),
        prepare=prepare,
        data=data,
        recipe=recipe(ctx),
    )
