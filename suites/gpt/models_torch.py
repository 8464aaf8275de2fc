"""The GPT decoder in PyTorch, nanoGPT's structure: the same function as models_flax.py."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from suites.gpt.common import VOCAB, Config

EPSILON = 1e-5  # LayerNorm's; Flax's default is 1e-6, so models_flax.py sets this one


class Attention(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.n_head, self.dropout, self.fused = cfg.n_head, cfg.dropout, cfg.attention == "fused"
        self.drop = nn.Dropout(cfg.dropout)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
        if self.fused:
            y = F.scaled_dot_product_attention(
                q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
            )
        else:  # written out: scores, causal mask, softmax, weighted sum
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            scores = scores.masked_fill(~self.mask[:t, :t], float("-inf"))
            y = self.drop(F.softmax(scores, dim=-1)) @ v
        return self.drop(self.proj(y.transpose(1, 2).contiguous().view(b, t, c)))


class Block(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd, eps=EPSILON)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd, eps=EPSILON)
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.proj(F.gelu(self.fc(self.ln2(x)))))  # exact (erf) GELU in both


class GPT(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=EPSILON)
        self.register_buffer("pos", torch.arange(cfg.block_size), persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.wte(idx) + self.wpe(self.pos[: idx.shape[1]]))
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # output tied to the token embedding


def tensors(model: GPT) -> dict[str, torch.Tensor]:
    """The model's parameters under common.shapes' names (PyTorch's layout)."""
    found = {
        "wte": model.wte.weight,
        "wpe": model.wpe.weight,
        "ln_f.scale": model.ln_f.weight,
        "ln_f.bias": model.ln_f.bias,
    }
    for i, block in enumerate(model.h):
        parts = {"ln1": block.ln1, "attn.qkv": block.attn.qkv, "attn.proj": block.attn.proj, "ln2": block.ln2,
                 "mlp.fc": block.fc, "mlp.proj": block.proj}  # fmt: skip
        for name, module in parts.items():
            is_norm = isinstance(module, nn.LayerNorm)
            found[f"h{i}.{name}.{'scale' if is_norm else 'kernel'}"] = module.weight
            found[f"h{i}.{name}.bias"] = module.bias
    return found


def load(model: GPT, weights: dict[str, Any]) -> None:
    """The shared NumPy weights (Flax's (in, out) layout) into the model; Linear kernels transposed."""
    with torch.no_grad():
        for name, tensor in tensors(model).items():
            w = weights[name].T if name.endswith(".kernel") else weights[name]
            if tuple(tensor.shape) != w.shape:
                raise ValueError(f"{name}: model {tuple(tensor.shape)}, shared weights {w.shape}")
            tensor.copy_(torch.from_numpy(w.copy()))


def export(model: GPT) -> dict[str, Any]:
    """NumPy copies in the shared layout, for the first-step checks."""
    return {
        name: (t.detach().cpu().numpy().T if name.endswith(".kernel") else t.detach().cpu().numpy()).copy()
        for name, t in tensors(model).items()
    }
