"""The GPT decoder in Flax NNX: the same function as models_torch.py (parameters in (in, out) layout)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.typing import DTypeLike

from suites.gpt.common import VOCAB, Config

EPSILON = 1e-5  # PyTorch's LayerNorm default (Flax's is 1e-6)


class Attention(nnx.Module):
    def __init__(self, cfg: Config, typed: dict[str, Any], rngs: nnx.Rngs) -> None:
        self.qkv = nnx.Linear(cfg.n_embd, 3 * cfg.n_embd, **typed, rngs=rngs)
        self.proj = nnx.Linear(cfg.n_embd, cfg.n_embd, **typed, rngs=rngs)
        self.n_head, self.fused, self.dtype = cfg.n_head, cfg.attention == "fused", typed["dtype"]
        self.drop = nnx.Dropout(cfg.dropout, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, c = x.shape
        q, k, v = (z.reshape(b, t, self.n_head, c // self.n_head) for z in jnp.split(self.qkv(x), 3, axis=-1))
        # The scope names the compiled operations (metadata only, the program is the same), so a
        # profile can tell attention from the other products (suites/runtime/hlo_ops.py).
        with jax.named_scope("attention"):
            if self.fused:  # XLA's composition on the CPU; cuDNN's fused kernel where XLA:GPU picks it
                y = jax.nn.dot_product_attention(q, k, v, is_causal=True)
            else:  # written out: scores, causal mask, softmax (float32), weighted sum
                scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.float32(k.shape[-1])).astype(q.dtype)
                mask = jnp.tril(jnp.ones((t, t), dtype=bool))
                scores = jnp.where(mask, scores.astype(jnp.float32), -jnp.inf)
                weights = self.drop(jax.nn.softmax(scores, axis=-1)).astype(v.dtype)
                y = jnp.einsum("bhqk,bkhd->bqhd", weights, v)
        return self.drop(self.proj(y.reshape(b, t, c)))


class Block(nnx.Module):
    def __init__(self, cfg: Config, typed: dict[str, Any], rngs: nnx.Rngs) -> None:
        self.ln1 = nnx.LayerNorm(cfg.n_embd, epsilon=EPSILON, **typed, rngs=rngs)
        self.attn = Attention(cfg, typed, rngs)
        self.ln2 = nnx.LayerNorm(cfg.n_embd, epsilon=EPSILON, **typed, rngs=rngs)
        self.fc = nnx.Linear(cfg.n_embd, 4 * cfg.n_embd, **typed, rngs=rngs)
        self.proj = nnx.Linear(4 * cfg.n_embd, cfg.n_embd, **typed, rngs=rngs)
        self.drop = nnx.Dropout(cfg.dropout, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.proj(jax.nn.gelu(self.fc(self.ln2(x)), approximate=False)))  # erf, as PyTorch's


class GPT(nnx.Module):
    """`dtype`: what the layers compute in (bfloat16 under `--precision bf16`); parameters stay float32."""

    def __init__(self, cfg: Config, rngs: nnx.Rngs, dtype: DTypeLike = jnp.float32) -> None:
        typed = {"dtype": dtype, "param_dtype": jnp.float32}
        self.wte = nnx.Embed(VOCAB, cfg.n_embd, **typed, rngs=rngs)
        self.wpe = nnx.Embed(cfg.block_size, cfg.n_embd, **typed, rngs=rngs)
        self.drop = nnx.Dropout(cfg.dropout, rngs=rngs)
        self.h = nnx.List([Block(cfg, typed, rngs) for _ in range(cfg.n_layer)])
        self.ln_f = nnx.LayerNorm(cfg.n_embd, epsilon=EPSILON, **typed, rngs=rngs)

    def __call__(self, idx: jax.Array) -> jax.Array:
        x = self.drop(self.wte(idx) + self.wpe(jnp.arange(idx.shape[1])))
        for block in self.h:
            x = block(x)
        return self.wte.attend(self.ln_f(x))  # output tied to the token embedding


def variables(model: GPT) -> dict[str, Any]:
    """The model's parameter Variables under common.shapes' names."""
    found = {"wte": model.wte.embedding, "wpe": model.wpe.embedding, "ln_f.scale": model.ln_f.scale,
             "ln_f.bias": model.ln_f.bias}  # fmt: skip
    for i, block in enumerate(model.h):
        parts = {"ln1": block.ln1, "attn.qkv": block.attn.qkv, "attn.proj": block.attn.proj, "ln2": block.ln2,
                 "mlp.fc": block.fc, "mlp.proj": block.proj}  # fmt: skip
        for name, module in parts.items():
            weight = "scale" if isinstance(module, nnx.LayerNorm) else "kernel"
            found[f"h{i}.{name}.{weight}"] = getattr(module, weight)
            found[f"h{i}.{name}.bias"] = module.bias
    return found


def load(model: GPT, weights: dict[str, Any]) -> None:
    for name, variable in variables(model).items():
        if tuple(variable[...].shape) != weights[name].shape:
            raise ValueError(f"{name}: model {tuple(variable[...].shape)}, shared weights {weights[name].shape}")
        variable[...] = jnp.asarray(weights[name])


def export(model: GPT) -> dict[str, Any]:
    import numpy as np

    return {name: np.asarray(jax.device_get(v[...])).copy() for name, v in variables(model).items()}
