"""ResNet18 inference in Flax NNX (`mode=infer`): the shared initial weights in evaluation mode
(BatchNorm on its running statistics), one `jax.jit` of the forward pass over the split state,
through runtime/inference.py. A request's images are on the device before its clock starts.

The jitted function takes the model's state as an argument (as a served model's parameters are):
closing over it would bake the weights into the executable as constants, which XLA may fold, and
time a different program from the one users deploy.
"""

from __future__ import annotations

from typing import Any

from suites.resnet18 import common
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import jax
    import numpy as np
    from flax import nnx

    from suites.resnet18.models_flax import build, prepare
    from suites.runtime.training_jax import compute_dtype

    images, _ = common.load(ctx)
    dev = ctx.device
    weights = common.init_weights(int(ctx.params["seed"]))
    ctx.note("flax inference: jax.jit of the forward pass, evaluation mode (BatchNorm running statistics)")

    def forward_of(dtype: Any) -> tuple[Any, Any]:
        model = build(int(ctx.params["seed"]), dtype, weights)
        model.eval()
        graphdef, state = nnx.split(model)

        @jax.jit
        def forward(state: Any, x: Any) -> Any:
            return nnx.merge(graphdef, state)(prepare(x))

        return forward, jax.device_put(state, dev)

    # The agreement check in float32 whatever --precision, as PyTorch's is.
    check, check_state = forward_of(np.float32)
    outputs = check(check_state, jax.device_put(common.probe_batch(images), dev))
    ctx.check("infer_outputs", [float(v) for v in np.asarray(outputs, dtype=np.float32)])
    forward, state = forward_of(compute_dtype(ctx))

    def request(batch: int) -> Any:
        x = jax.device_put(common.inference_images(images, batch), dev)
        return lambda: forward(state, x)

    common.infer(ctx, request, "jax.jit")
