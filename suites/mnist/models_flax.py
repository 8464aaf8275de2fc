"""The seed-000 CNN in Flax NNX (NHWC), with the VALID padding the PyTorch model uses."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jax.typing import DTypeLike

from suites.mnist.common import MEAN, STD


class CNN(nnx.Module):
    """`dtype`: what the layers compute in (bfloat16 under `--precision bf16`); parameters stay float32."""

    def __init__(self, rngs: nnx.Rngs, dtype: DTypeLike = jnp.float32) -> None:
        typed = {"dtype": dtype, "param_dtype": jnp.float32, "rngs": rngs}
        self.conv1 = nnx.Conv(1, 32, kernel_size=(3, 3), padding="VALID", **typed)
        self.conv2 = nnx.Conv(32, 64, kernel_size=(3, 3), padding="VALID", **typed)
        self.dropout1 = nnx.Dropout(0.25, rngs=rngs)
        self.fc1 = nnx.Linear(12 * 12 * 64, 256, **typed)
        self.dropout2 = nnx.Dropout(0.5, rngs=rngs)
        self.fc2 = nnx.Linear(256, 10, **typed)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = nnx.relu(self.conv1(x))
        x = nnx.relu(self.conv2(x))
        x = nnx.max_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = self.dropout1(x).reshape(x.shape[0], -1)
        x = self.dropout2(nnx.relu(self.fc1(x)))
        return self.fc2(x)  # logits; the loss applies log-softmax + NLL


def prepare(x: jax.Array, aux: None) -> jax.Array:
    """uint8 batch -> normalised float32, inside the compiled step (data stays uint8 on the device)."""
    return (x.astype(jnp.float32) / 255.0 - MEAN) / STD
