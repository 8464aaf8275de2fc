"""The seed-002 CNN in Flax NNX (NHWC, Flax's default SAME padding, as in the seed)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jax.typing import DTypeLike

from suites.cifar10.common import MEANS, SIZE, STDS


class CNN(nnx.Module):
    """`dtype`: what the layers compute in (bfloat16 under `--precision bf16`); parameters stay float32."""

    def __init__(self, rngs: nnx.Rngs, dtype: DTypeLike = jnp.float32) -> None:
        typed = {"dtype": dtype, "param_dtype": jnp.float32, "rngs": rngs}
        self.conv1 = nnx.Conv(3, 32, kernel_size=(3, 3), padding="SAME", **typed)
        self.conv2 = nnx.Conv(32, 64, kernel_size=(3, 3), padding="SAME", **typed)
        self.fc1 = nnx.Linear(8 * 8 * 64, 256, **typed)
        self.fc2 = nnx.Linear(256, 10, **typed)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = nnx.avg_pool(nnx.relu(self.conv1(x)), window_shape=(2, 2), strides=(2, 2))
        x = nnx.avg_pool(nnx.relu(self.conv2(x)), window_shape=(2, 2), strides=(2, 2))
        x = nnx.relu(self.fc1(x.reshape(x.shape[0], -1)))
        return self.fc2(x)


def _interpolation(start: jax.Array, length: jax.Array) -> jax.Array:
    """(B, 32 out, 32 in) bilinear weights resizing [start, start + length) to 32 pixels."""
    pos = jnp.arange(SIZE, dtype=jnp.float32) + 0.5
    src = jnp.clip(pos[None, :] * (length[:, None] / SIZE) - 0.5, 0.0, length[:, None] - 1.0) + start[:, None]
    return jnp.maximum(0.0, 1.0 - jnp.abs(src[:, :, None] - jnp.arange(SIZE, dtype=jnp.float32)))


def prepare(x: jax.Array, aux: jax.Array | None) -> jax.Array:
    """uint8 NHWC batch -> (flip + resized crop when `aux` is given) -> normalised float32."""
    x = x.astype(jnp.float32)
    if aux is not None:
        top, height, left, width, flip = (aux[:, i] for i in range(5))
        rows = _interpolation(top, height)
        cols = _interpolation(left, width)
        cols = jnp.where(flip[:, None, None] > 0.5, cols[:, :, ::-1], cols)  # read the mirrored column
        x = jnp.einsum("bih,bhwc,bjw->bijc", rows, x, cols)
    return (x / 255.0 - jnp.asarray(MEANS, jnp.float32)) / jnp.asarray(STDS, jnp.float32)
