"""ResNet18 in Flax NNX (NHWC) with PyTorch's padding, BatchNorm convention and initial weights.

Explicit paddings: Flax's "SAME" pads a stride-2 7x7 convolution (2, 3) on even inputs where
PyTorch pads (3, 3) -- a different model under the same name, the very mistake seed 000's two
MNIST models made. BatchNorm momentum 0.9 here is PyTorch's 0.1 (Flax weighs the old value).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.typing import DTypeLike

from suites.resnet18.common import BLOCKS, BN_EPS, BN_MOMENTUM, MEAN, STAGES, STD


def _bn(channels: int, rngs: nnx.Rngs, dtype: DTypeLike) -> nnx.BatchNorm:
    # use_fast_variance=False: the two-pass variance PyTorch computes, not E[x^2] - E[x]^2. In
    # bfloat16 the output is bfloat16; Flax computes the statistics in float32 and keeps them so.
    return nnx.BatchNorm(channels, momentum=1.0 - BN_MOMENTUM, epsilon=BN_EPS, use_fast_variance=False,
                         dtype=dtype, param_dtype=jnp.float32, rngs=rngs)  # fmt: skip


def _conv(cin: int, cout: int, k: int, stride: int, pad: int, rngs: nnx.Rngs, dtype: DTypeLike) -> nnx.Conv:
    return nnx.Conv(
        cin,
        cout,
        kernel_size=(k, k),
        strides=(stride, stride),
        padding=((pad, pad), (pad, pad)),
        use_bias=False,
        dtype=dtype,
        param_dtype=jnp.float32,
        rngs=rngs,
    )


class BasicBlock(nnx.Module):
    def __init__(self, cin: int, cout: int, stride: int, rngs: nnx.Rngs, dtype: DTypeLike = jnp.float32) -> None:
        self.conv1 = _conv(cin, cout, 3, stride, 1, rngs, dtype)
        self.bn1 = _bn(cout, rngs, dtype)
        self.conv2 = _conv(cout, cout, 3, 1, 1, rngs, dtype)
        self.bn2 = _bn(cout, rngs, dtype)
        # An empty list, not None, when the shapes match: NNX fixes an attribute's kind (data or
        # static) at its first assignment.
        needed = stride != 1 or cin != cout
        down = [_conv(cin, cout, 1, stride, 0, rngs, dtype), _bn(cout, rngs, dtype)] if needed else []
        self.downsample = nnx.List(down)

    def __call__(self, x: jax.Array) -> jax.Array:
        out = nnx.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = self.downsample[1](self.downsample[0](x)) if len(self.downsample) else x
        return nnx.relu(out + identity)


class ResNet18(nnx.Module):
    """`dtype`: what the layers compute in (bfloat16 under `--precision bf16`); parameters stay float32."""

    def __init__(self, rngs: nnx.Rngs, dtype: DTypeLike = jnp.float32) -> None:
        self.conv1 = _conv(3, 64, 7, 2, 3, rngs, dtype)
        self.bn1 = _bn(64, rngs, dtype)
        cin = 64
        for s, (cout, stride) in enumerate(STAGES, start=1):
            blocks = [BasicBlock(cin if b == 0 else cout, cout, stride if b == 0 else 1, rngs, dtype)
                      for b in range(BLOCKS)]  # fmt: skip
            setattr(self, f"layer{s}", nnx.List(blocks))
            cin = cout
        self.fc = nnx.Linear(512, 1, dtype=dtype, param_dtype=jnp.float32, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = nnx.relu(self.bn1(self.conv1(x)))
        x = nnx.max_pool(x, window_shape=(3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))  # pads with -inf
        for s in range(1, len(STAGES) + 1):
            for block in getattr(self, f"layer{s}"):
                x = block(x)
        x = jnp.mean(x, axis=(1, 2))
        return self.fc(x)[:, 0]  # one logit per image


def torch_name(path: tuple[Any, ...]) -> str:
    """('layer1', 0, 'conv1', 'kernel') -> 'layer1.0.conv1.weight' (PyTorch's state-dict name)."""
    parts = [str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path]
    if parts[-1] == "value":  # the Variable's own attribute, below the parameter's name
        parts.pop()
    leaf = parts[-1]
    parts[-1] = {"kernel": "weight", "scale": "weight", "bias": "bias"}[leaf]
    return ".".join(parts)


def to_flax_layout(name: str, value: Any) -> Any:
    if value.ndim == 4:  # conv (out, in, kh, kw) -> (kh, kw, in, out)
        return np.transpose(value, (2, 3, 1, 0))
    if value.ndim == 2:  # linear (out, in) -> (in, out)
        return value.T
    return value


def load_weights(model: ResNet18, weights: dict[str, Any]) -> None:
    """Overwrite every nnx.Param with the shared NumPy initial weights (names mapped, layouts converted)."""
    state = nnx.state(model, nnx.Param)
    seen: set[str] = set()

    def replace(path: tuple[Any, ...], leaf: Any) -> Any:
        name = torch_name(path)
        seen.add(name)
        value = to_flax_layout(name, weights[name])
        if tuple(value.shape) != tuple(leaf.shape):
            raise ValueError(f"{name}: shape {value.shape} does not fit {leaf.shape}")
        return jnp.asarray(value)

    new_state = jax.tree_util.tree_map_with_path(replace, state)
    if seen != set(weights):
        raise ValueError(f"parameter names differ: {sorted(seen ^ set(weights))[:6]}")
    nnx.update(model, new_state)


def build(seed: int, dtype: DTypeLike, weights: dict[str, Any]) -> ResNet18:
    """A ResNet18 holding the shared initial weights and BatchNorm's initial statistics (mean 0, variance 1,
    PyTorch's and Flax's), built abstractly (nnx.eval_shape): Flax's own random draws, which `load_weights`
    overwrites anyway, cost about 12 s of eager per-shape compilations on a CPU, against 1 s this way."""
    model = nnx.eval_shape(lambda: ResNet18(nnx.Rngs(seed), dtype))
    fill = {"mean": jnp.zeros, "var": jnp.ones}

    def initial(path: tuple[Any, ...], leaf: Any) -> Any:
        names = [str(getattr(k, "key", getattr(k, "name", k))) for k in path]
        return fill[[n for n in names if n != "value"][-1]](leaf.shape, leaf.dtype)

    nnx.update(model, jax.tree_util.tree_map_with_path(initial, nnx.state(model, nnx.BatchStat)))
    load_weights(model, weights)
    return model


def prepare(x: jax.Array) -> jax.Array:
    """uint8 NHWC batch -> normalised float32, inside the compiled step (data stays uint8 on the device)."""
    mean = jnp.asarray(MEAN, jnp.float32)
    std = jnp.asarray(STD, jnp.float32)
    return (x.astype(jnp.float32) / 255.0 - mean) / std
