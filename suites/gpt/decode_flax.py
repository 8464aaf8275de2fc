"""Greedy decoding with a KV cache in JAX, on the training model's own modules (models_flax.py).

The cache has a static shape (layers, batch, length, heads, head width) for the whole generation; a
step writes its positions with `lax.dynamic_update_slice` at a traced start and attends over the
whole cache under a mask of the positions written so far. The position is data, not a shape, so the
decode step compiles once: a cache grown by concatenation changes shape every token and retraces
every token (the mistakes suite plants exactly that). Same arithmetic as decode_torch.py.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from suites.gpt.models_flax import GPT


def empty_cache(model: GPT, batch: int, length: int, dtype: Any) -> tuple[jax.Array, jax.Array]:
    attn = model.h[0].attn
    width = model.wte.embedding[...].shape[1]
    shape = (len(model.h), batch, length, attn.n_head, width // attn.n_head)
    return jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)


def forward(
    model: GPT, cache: tuple[jax.Array, jax.Array], tokens: jax.Array, start: jax.Array
) -> tuple[jax.Array, Any]:
    """Logits (batch, t, vocab) of `tokens` (batch, t) at positions start..start+t-1, and the cache with
    their keys and values written; each query attends to the cached positions at or before its own."""
    keys_all, values_all = cache
    b, t = tokens.shape
    length = keys_all.shape[2]
    positions = start + jnp.arange(t)
    x = model.wte(tokens) + model.wpe(positions)
    visible = jnp.arange(length)[None, :] <= positions[:, None]  # (t, length)
    new_k, new_v = [], []
    for i, block in enumerate(model.h):
        attn = block.attn
        h = block.ln1(x)
        c = h.shape[-1]
        q, k, v = (z.reshape(b, t, attn.n_head, c // attn.n_head) for z in jnp.split(attn.qkv(h), 3, axis=-1))
        layer_k = jax.lax.dynamic_update_slice(keys_all[i], k.astype(keys_all.dtype), (0, start, 0, 0))
        layer_v = jax.lax.dynamic_update_slice(values_all[i], v.astype(values_all.dtype), (0, start, 0, 0))
        new_k.append(layer_k)
        new_v.append(layer_v)
        with jax.named_scope("attention"):
            y = jax.nn.dot_product_attention(
                q, layer_k.astype(q.dtype), layer_v.astype(q.dtype), mask=visible[None, None]
            )
        x = x + attn.proj(y.reshape(b, t, c))
        x = x + block.proj(jax.nn.gelu(block.fc(block.ln2(x)), approximate=False))
    logits = model.wte.attend(model.ln_f(x))
    return logits, (jnp.stack(new_k), jnp.stack(new_v))
