"""Greedy decoding with a KV cache in PyTorch, on the training model's own modules (models_torch.py).

The cache is static, as Hugging Face's StaticCache and JAX's decoding are: keys and values for every
position up to prompt + new tokens are allocated once, a step writes its position with `index_copy_`
and attends over the whole cache under a mask of the positions written so far. Every step then has
one shape, so `torch.compile` (`variant=compiled`) compiles the decode step once, and eager and
compiled do the same arithmetic as the JAX step (suites/gpt/decode_flax.py).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from suites.gpt.models_torch import GPT


class Cache:
    """Keys and values of each layer: (batch, heads, length, head width), zeros until written. One tensor per
    layer, not one indexed per step: a view per layer and step is dispatcher time a batch-1 step feels."""

    def __init__(self, model: GPT, batch: int, length: int, device: Any, dtype: Any) -> None:
        block = model.h[0].attn
        width = model.wte.weight.shape[1] // block.n_head
        shape = (batch, block.n_head, length, width)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in model.h]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in model.h]
        self.length = length
        # Row p: the positions a query at p may attend to. Made once: building the mask every step is two
        # more kernels per token, measurable at batch 1 (gpt-fast indexes a table like this one).
        self.visible = torch.tril(torch.ones(length, length, dtype=torch.bool, device=device))


def forward(model: GPT, cache: Cache, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Logits (batch, t, vocab) of `tokens` (batch, t) at `positions` (t,), writing their keys and values
    into the cache; each query attends to the cached positions at or before its own."""
    b, t = tokens.shape
    x = model.wte(tokens) + model.wpe(positions)
    visible = cache.visible[positions]  # (t, length): causal over what is written
    for i, block in enumerate(model.h):
        attn = block.attn
        h = block.ln1(x)
        c = h.shape[-1]
        q, k, v = (z.view(b, t, attn.n_head, c // attn.n_head).transpose(1, 2) for z in attn.qkv(h).split(c, dim=2))
        # The cache holds the compute dtype (autocast's bf16 under --precision bf16): no cast per step.
        cache.k[i].index_copy_(2, positions, k)
        cache.v[i].index_copy_(2, positions, v)
        y = F.scaled_dot_product_attention(q, cache.k[i], cache.v[i], attn_mask=visible)
        x = x + attn.proj(y.transpose(1, 2).reshape(b, t, c))
        x = x + block.proj(F.gelu(block.fc(block.ln2(x))))
    return F.linear(model.ln_f(x), model.wte.weight)


def greedy(model: GPT, prompt: torch.Tensor, new_tokens: int, dtype: Any) -> tuple[list[list[int]], torch.Tensor]:
    """Tokens generated greedily after `prompt` (batch, p) and every step's logits (batch, new_tokens, vocab)."""
    b, p = prompt.shape
    cache = Cache(model, b, p + new_tokens, prompt.device, dtype)
    logits = forward(model, cache, prompt, torch.arange(p, device=prompt.device))[:, -1]
    steps, out = [logits], []
    for j in range(new_tokens):
        token = logits.argmax(dim=-1)
        out.append(token)
        if j + 1 == new_tokens:
            break
        logits = forward(model, cache, token[:, None], torch.tensor([p + j], device=prompt.device))[:, -1]
        steps.append(logits)
    return torch.stack(out, dim=1).tolist(), torch.stack(steps, dim=1)
