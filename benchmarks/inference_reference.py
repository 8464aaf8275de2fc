"""Is the suites' inference as fast as the plain loop people write? (issue 60: inference)

For flax and pytorch, two workloads measured two ways, each side in its own process:
  resnet18 -- latency of single requests at batch 1 (ResNet18, BasicBlock [2, 2, 2, 2], BatchNorm,
              one-logit head, on uint8 images normalised inside the call);
     suite:     `harness run --suite resnet18 --param mode=infer --param max_batch=1 --param requests=N`:
                the median of its latency metric (the result's inference.latency.metric) and its p99;
     reference: the loop each framework's documentation shows, on a ResNet18 of its own defined here
                with its own initial weights, on a uint8 image of its own of the same size, the same
                number of requests:
                pytorch -- `model.eval()`, `with torch.inference_mode(): out = model(x)`,
                           `torch.cuda.synchronize()` on a GPU (nothing on a CPU: eager calls return
                           finished), `time.perf_counter()` around each call;
                flax    -- `model.eval()`, `@nnx.jit def predict(model, x): return model(x)` (the NNX
                           guides' way: the module is the argument), `jax.block_until_ready`.
  gpt      -- greedy generation with a KV cache (the suite's decoder: learned positions, pre-LayerNorm
              blocks of causal fused attention and a 4x exact-GELU MLP, output tied to the embedding);
     suite:     `harness run --suite gpt --param mode=generate`: the medians of "time to first token"
                (result inference.generate.prefill) and of the decode step (inference.latency.metric),
                and the decode step's p99;
     reference: a model of its own with a static KV cache, written the way people write one:
                pytorch -- gpt-fast / nanoGPT: a `KVCache` buffer per layer written at `input_pos`
                           (`k_out[:, :, input_pos] = k_val`), a causal mask indexed by `input_pos`,
                           `prefill` and `decode_one_token` under `torch.inference_mode()`, argmax,
                           `input_pos += 1`;
                flax    -- the Flax/JAX docs' decoding: `nnx.Cache` keys and values preallocated for
                           prompt + new tokens, written with `jax.lax.dynamic_update_slice` at the
                           position passed as a traced int, one `@nnx.jit` step (the prompt's shape
                           and the single token's: two compilations), argmax.
              Each times the prefill `PREFILL_REPEAT` times (as the suite does: time to first token),
              then generates from the prompt again and again, each decode step its own clock, until
              it has the requested number of decode steps.
Both sides float32 (TF32 off, JAX's matmul precision "highest", as the harness sets them), the same
sizes; only speed is compared. Each reference checks its model has the suite's parameter count.
Warm-up as the suite's (suites/runtime/inference.py): the first call reported apart, then
min(10, max(1, n // 10)) untimed calls, then n timed ones (the reference keeps Python's garbage
collector on, as a plain loop does; the suite turns it off inside its samples).

`--rounds` interleaved rounds (each round: every workload and framework, the reference then the
suite, back to back): the verdict of a row is the median over rounds of the suite/reference time
ratio within a round, which cancels most drift from other load on the machine. Target:
suite / reference <= 1 (within 2 %: parity, the rounds' spread on a shared 2-core machine).

    python benchmarks/inference_reference.py [--workloads resnet18,gpt] [--frameworks flax,pytorch]
        [--device cpu|gpu] [--rounds 3] [--image-size 32] [--requests 200] [--n-layer 4] [--n-head 4]
        [--n-embd 128] [--block-size 128] [--prompt-len 64] [--new-tokens 64] [--gen-batch 1]
        [--decode-steps 200] [--json PATH]

The defaults are the suite's gpt model and generation and a small image, so that four rounds take
a few minutes on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, NoReturn

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = ("resnet18", "gpt")
FRAMEWORKS = ("flax", "pytorch")
# What a reference returns, checked before it is believed (its stdout is read back like any file).
REFERENCE_KEYS = {
    "resnet18": ("first", "latency"),
    "gpt": ("prefill_first", "prefill", "decode_first", "decode"),
}
MEAN = (0.485, 0.456, 0.406)  # the ImageNet statistics the suite normalises with
STD = (0.229, 0.224, 0.225)
VOCAB = 256  # bytes
INIT_STD = 0.02  # nanoGPT's normal(0.02)
PARITY = 0.02  # the band around 1 that is neither a win nor a loss


class BenchError(Exception):
    """A reference or suite process failed, or returned what cannot be believed."""


@dataclass(frozen=True)
class Shape:
    """What both sides share: the image and the requests, the gpt model and its generation."""

    image_size: int = 32
    requests: int = 200
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    block_size: int = 128
    prompt_len: int = 64
    new_tokens: int = 64
    gen_batch: int = 1
    decode_steps: int = 200
    seed: int = 0


def warmup_of(n: int) -> int:
    """Untimed calls between the first call and the samples, as suites/runtime/inference.py counts them."""
    from suites.runtime.inference import WARM_REQUESTS

    return min(WARM_REQUESTS, max(1, n // 10))


def prefill_repeat() -> int:
    from suites.runtime.inference import PREFILL_REPEAT

    return int(PREFILL_REPEAT)


def p99(samples: Sequence[float]) -> float:
    """The suite's percentile (linear between order statistics), so both sides' p99 mean one thing."""
    from suites.contract.inference import percentile

    return percentile(samples, 0.99)


def gpt_config(shape: Shape) -> Any:
    """The suite's Config of the same model, for its own parameter count (training fields: the defaults)."""
    from suites.gpt.common import Config

    return Config(
        n_layer=shape.n_layer, n_head=shape.n_head, n_embd=shape.n_embd, block_size=shape.block_size, batch=16,
        dropout=0.0, intervals=6, steps=50, lr=1e-3, warmup=30, min_lr_ratio=0.1, weight_decay=0.1, grad_clip=1.0,
        eval_windows=64, attention="fused", variant="default", seed=shape.seed,
    )  # fmt: skip


def suite_param_count(workload: str, shape: Shape) -> int:
    """The parameters of the suite's model of this workload (the count the reference must match)."""
    if workload == "resnet18":
        from suites.resnet18.common import expected_param_count

        return int(expected_param_count())
    from suites.gpt.common import param_count

    return int(param_count(gpt_config(shape)))


def prompt_tokens(shape: Shape) -> Any:
    """(gen_batch, prompt_len) int64 prompts: consecutive windows of the suite's validation bytes."""
    import numpy as np

    from suites.contract.datasets import text_split
    from suites.gpt.common import bundled_corpus

    val = np.frombuffer(text_split(bundled_corpus())[1], dtype=np.uint8)
    rows = [val[i * shape.prompt_len : (i + 1) * shape.prompt_len] for i in range(shape.gen_batch)]
    return np.stack(rows).astype(np.int64)


def request_image(shape: Shape) -> Any:
    """One uint8 NHWC image of the requested size, from the seed (the values do not change the work)."""
    import numpy as np

    rng = np.random.default_rng(shape.seed)
    return rng.integers(0, 256, size=(1, shape.image_size, shape.image_size, 3), dtype=np.uint8)


def time_calls(
    call: Callable[[], Any], sync: Callable[[Any], Any], n: int, warm: int | None = None
) -> tuple[float, list[float]]:
    """The first call's seconds, then `n` timed calls' after `warm` untimed ones (the suite's warm-up when
    None): a plain perf_counter loop, each call synchronised before its clock stops."""
    start = time.perf_counter()
    sync(call())
    first = time.perf_counter() - start
    for _ in range(warmup_of(n) if warm is None else warm):
        sync(call())
    times = []
    for _ in range(n):
        start = time.perf_counter()
        out = call()
        sync(out)
        times.append(time.perf_counter() - start)
    return first, times


def generation_times(
    prefill: Callable[[], Any],
    decode: Callable[[], Any],
    sync: Callable[[Any], Any],
    shape: Shape,
    compilations: Callable[[], int] | None = None,
) -> dict[str, Any]:
    """Time to first token (`prefill()` repeated, as the suite times it), then decode steps: generation
    after generation from the prompt (`prefill()` untimed, then `decode()` new_tokens - 1 times, each its
    own clock) until the first step, the warm-up and `decode_steps` timed steps are done.
    `compilations`: a counter of the framework's compilations, read when the timed steps begin and end
    ("steady_compilations": a step that recompiles inside the samples is counted, not hidden)."""
    prefill_first, prefills = time_calls(prefill, sync, prefill_repeat(), warm=1)
    untimed = 1 + warmup_of(shape.decode_steps)
    needed = untimed + shape.decode_steps
    steps: list[float] = []
    compiled_before = None
    while len(steps) < needed:
        sync(prefill())  # a new generation: the prompt into the cache, the first token chosen
        for _ in range(min(shape.new_tokens - 1, needed - len(steps))):
            if len(steps) == untimed and compilations is not None:
                compiled_before = compilations()
            start = time.perf_counter()
            sync(decode())
            steps.append(time.perf_counter() - start)
    out: dict[str, Any] = {
        "prefill_first": prefill_first,
        "prefill": prefills,
        "decode_first": steps[0],
        "decode": steps[untimed:],
    }
    if compilations is not None and compiled_before is not None:
        out["steady_compilations"] = compilations() - compiled_before
    return out


# ---------------------------------------------------------------------------------------------
# PyTorch: torchvision's ResNet written out, and gpt-fast's static KV cache on nanoGPT's blocks.


def _torch_setup(device_kind: str) -> tuple[Any, Callable[[Any], Any]]:
    import torch

    # float32 means float32, as the harness sets it for --precision fp32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    on_cuda = device_kind == "gpu"
    if on_cuda and not torch.cuda.is_available():
        raise BenchError("--device gpu: torch.cuda.is_available() is False")
    device = torch.device("cuda" if on_cuda else "cpu")

    def sync(_: Any) -> None:
        if on_cuda:
            torch.cuda.synchronize()

    return device, sync


def reference_resnet18_pytorch(shape: Shape, device_kind: str) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + self.shortcut(x))

    class ResNet18(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1))
            self.register_buffer("std", torch.tensor(STD).view(1, 3, 1, 1))
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            layers, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
                cin = cout
            self.layers = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = (x.float() / 255.0 - self.mean) / self.std  # uint8 in, as the suite's requests are
            x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
            x = self.avgpool(self.layers(x)).flatten(1)
            return self.fc(x)[:, 0]

    device, sync = _torch_setup(device_kind)
    torch.manual_seed(shape.seed)
    model = ResNet18().to(device)
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    x = torch.from_numpy(request_image(shape)).permute(0, 3, 1, 2).contiguous().to(device)

    def call() -> Any:
        with torch.inference_mode():
            return model(x)

    first, times = time_calls(call, sync, shape.requests)
    return {"params": params, "first": first, "latency": times}


def reference_gpt_pytorch(shape: Shape, device_kind: str) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class KVCache(nn.Module):
        def __init__(self, batch: int, n_head: int, max_seq: int, head_dim: int) -> None:
            super().__init__()
            cache_shape = (batch, n_head, max_seq, head_dim)
            self.register_buffer("k_cache", torch.zeros(cache_shape))
            self.register_buffer("v_cache", torch.zeros(cache_shape))

        def update(self, input_pos: torch.Tensor, k_val: torch.Tensor, v_val: torch.Tensor) -> tuple[Any, Any]:
            k_out, v_out = self.k_cache, self.v_cache
            k_out[:, :, input_pos] = k_val
            v_out[:, :, input_pos] = v_val
            return k_out, v_out

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(shape.n_embd, 3 * shape.n_embd)
            self.c_proj = nn.Linear(shape.n_embd, shape.n_embd)
            self.n_head, self.n_embd = shape.n_head, shape.n_embd
            self.kv_cache: KVCache | None = None

        def forward(self, x: torch.Tensor, input_pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
            if self.kv_cache is not None:
                k, v = self.kv_cache.update(input_pos, k, v)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(shape.n_embd, eps=1e-5)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(shape.n_embd, eps=1e-5)
            self.c_fc = nn.Linear(shape.n_embd, 4 * shape.n_embd)
            self.c_proj = nn.Linear(4 * shape.n_embd, shape.n_embd)

        def forward(self, x: torch.Tensor, input_pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln_1(x), input_pos, mask)
            return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(VOCAB, shape.n_embd)
            self.wpe = nn.Embedding(shape.block_size, shape.n_embd)
            self.h = nn.ModuleList([Block() for _ in range(shape.n_layer)])
            self.ln_f = nn.LayerNorm(shape.n_embd, eps=1e-5)
            self.lm_head = nn.Linear(shape.n_embd, VOCAB, bias=False)
            self.wte.weight = self.lm_head.weight  # weight tying
            for module in self.modules():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    torch.nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
                if isinstance(module, nn.Linear) and module.bias is not None:
                    torch.nn.init.zeros_(module.bias)

        def setup_caches(self, max_batch_size: int, max_seq_length: int) -> None:
            for block in self.h:
                block.attn.kv_cache = KVCache(
                    max_batch_size, shape.n_head, max_seq_length, shape.n_embd // shape.n_head
                )
            mask = torch.tril(torch.ones(max_seq_length, max_seq_length, dtype=torch.bool))
            self.register_buffer("causal_mask", mask, persistent=False)

        def forward(self, idx: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
            mask = self.causal_mask[None, None, input_pos]
            x = self.wte(idx) + self.wpe(input_pos)
            for block in self.h:
                x = block(x, input_pos, mask)
            return self.lm_head(self.ln_f(x))

    def prefill(model: GPT, x: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        logits = model(x, input_pos)
        return torch.argmax(logits[:, -1], dim=-1)

    def decode_one_token(model: GPT, x: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        logits = model(x, input_pos)
        return torch.argmax(logits[:, -1], dim=-1)

    device, sync = _torch_setup(device_kind)
    torch.manual_seed(shape.seed)
    model = GPT()
    params = sum(p.numel() for p in model.parameters())  # the tied weight once
    model.setup_caches(shape.gen_batch, shape.prompt_len + shape.new_tokens)
    model = model.to(device)
    model.eval()
    prompt = torch.from_numpy(prompt_tokens(shape)).to(device)
    T = shape.prompt_len
    state: dict[str, Any] = {}

    def first_token() -> torch.Tensor:
        with torch.inference_mode():
            next_token = prefill(model, prompt, torch.arange(0, T, device=device))
        state["token"], state["input_pos"] = next_token, torch.tensor([T], device=device, dtype=torch.long)
        return next_token

    def next_token() -> torch.Tensor:
        with torch.inference_mode():
            token = decode_one_token(model, state["token"].view(-1, 1), state["input_pos"])
            state["input_pos"] += 1
        state["token"] = token
        return token

    out = generation_times(first_token, next_token, sync, shape)
    return {"params": params, **out}


# ---------------------------------------------------------------------------------------------
# Flax NNX: the same ResNet18 in NHWC, and a decoder with nnx.Cache keys and values.


def _jax_setup(device_kind: str) -> Any:
    import jax

    jax.config.update("jax_default_matmul_precision", "highest")  # as the harness sets it (fp32)
    try:
        return jax.devices("gpu" if device_kind == "gpu" else "cpu")[0]
    except RuntimeError as error:
        raise BenchError(f"--device {device_kind}: JAX has no such device ({error})") from None


def _flax_params(model: Any) -> int:
    import jax
    import numpy as np
    from flax import nnx

    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))


def reference_resnet18_flax(shape: Shape, device_kind: str) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    def conv(cin: int, cout: int, k: int, stride: int, pad: int, rngs: nnx.Rngs) -> nnx.Conv:
        # Explicit padding: PyTorch's, where "SAME" would pad a stride-2 7x7 convolution (2, 3).
        return nnx.Conv(cin, cout, (k, k), strides=stride, padding=((pad, pad), (pad, pad)), use_bias=False,
                        rngs=rngs)  # fmt: skip

    def batch_norm(channels: int, rngs: nnx.Rngs) -> nnx.BatchNorm:
        return nnx.BatchNorm(channels, momentum=0.9, epsilon=1e-5, rngs=rngs)

    class BasicBlock(nnx.Module):
        def __init__(self, cin: int, cout: int, stride: int, *, rngs: nnx.Rngs) -> None:
            self.conv1 = conv(cin, cout, 3, stride, 1, rngs)
            self.bn1 = batch_norm(cout, rngs)
            self.conv2 = conv(cout, cout, 3, 1, 1, rngs)
            self.bn2 = batch_norm(cout, rngs)
            down = stride != 1 or cin != cout
            self.shortcut = nnx.List([conv(cin, cout, 1, stride, 0, rngs), batch_norm(cout, rngs)] if down else [])

        def __call__(self, x: jax.Array) -> jax.Array:
            out = nnx.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            identity = x
            for layer in self.shortcut:
                identity = layer(identity)
            return nnx.relu(out + identity)

    class ResNet18(nnx.Module):
        def __init__(self, *, rngs: nnx.Rngs) -> None:
            self.conv1 = conv(3, 64, 7, 2, 3, rngs)
            self.bn1 = batch_norm(64, rngs)
            blocks, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                blocks += [BasicBlock(cin, cout, stride, rngs=rngs), BasicBlock(cout, cout, 1, rngs=rngs)]
                cin = cout
            self.blocks = nnx.List(blocks)
            self.fc = nnx.Linear(512, 1, rngs=rngs)

        def __call__(self, x: jax.Array) -> jax.Array:
            x = (x.astype(jnp.float32) / 255.0 - jnp.asarray(MEAN)) / jnp.asarray(STD)  # uint8 in
            x = nnx.relu(self.bn1(self.conv1(x)))
            x = nnx.max_pool(x, window_shape=(3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
            for block in self.blocks:
                x = block(x)
            return self.fc(jnp.mean(x, axis=(1, 2)))[:, 0]

    device = _jax_setup(device_kind)
    with jax.default_device(device):
        # Initialised under nnx.jit (the Flax guides' way to build a large model): one compilation
        # instead of an eager one per parameter shape.
        model = nnx.jit(lambda: ResNet18(rngs=nnx.Rngs(shape.seed)))()
        model.eval()  # BatchNorm on its running statistics
    params = _flax_params(model)

    @nnx.jit
    def predict(model: ResNet18, x: jax.Array) -> jax.Array:
        return model(x)

    x = jax.device_put(request_image(shape), device)
    first, times = time_calls(lambda: predict(model, x), jax.block_until_ready, shape.requests)
    return {"params": params, "first": first, "latency": times}


def reference_gpt_flax(shape: Shape, device_kind: str) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    normal = nnx.initializers.normal(INIT_STD)
    max_len = shape.prompt_len + shape.new_tokens
    head_dim = shape.n_embd // shape.n_head

    class CausalSelfAttention(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.c_attn = nnx.Linear(shape.n_embd, 3 * shape.n_embd, kernel_init=normal, rngs=rngs)
            self.c_proj = nnx.Linear(shape.n_embd, shape.n_embd, kernel_init=normal, rngs=rngs)
            cache_shape = (shape.gen_batch, max_len, shape.n_head, head_dim)
            self.cached_key = nnx.Cache(jnp.zeros(cache_shape, jnp.float32))
            self.cached_value = nnx.Cache(jnp.zeros(cache_shape, jnp.float32))

        def __call__(self, x: jax.Array, pos: jax.Array) -> jax.Array:
            B, T, C = x.shape
            q, k, v = (z.reshape(B, T, shape.n_head, head_dim) for z in jnp.split(self.c_attn(x), 3, axis=-1))
            self.cached_key[...] = jax.lax.dynamic_update_slice(self.cached_key[...], k, (0, pos, 0, 0))
            self.cached_value[...] = jax.lax.dynamic_update_slice(self.cached_value[...], v, (0, pos, 0, 0))
            mask = jnp.arange(max_len)[None, :] <= (pos + jnp.arange(T))[:, None]  # (T, max_len)
            y = jax.nn.dot_product_attention(q, self.cached_key[...], self.cached_value[...], mask=mask[None, None])
            return self.c_proj(y.reshape(B, T, C))

    class Block(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.ln_1 = nnx.LayerNorm(shape.n_embd, epsilon=1e-5, rngs=rngs)
            self.attn = CausalSelfAttention(rngs)
            self.ln_2 = nnx.LayerNorm(shape.n_embd, epsilon=1e-5, rngs=rngs)
            self.c_fc = nnx.Linear(shape.n_embd, 4 * shape.n_embd, kernel_init=normal, rngs=rngs)
            self.c_proj = nnx.Linear(4 * shape.n_embd, shape.n_embd, kernel_init=normal, rngs=rngs)

        def __call__(self, x: jax.Array, pos: jax.Array) -> jax.Array:
            x = x + self.attn(self.ln_1(x), pos)
            return x + self.c_proj(jax.nn.gelu(self.c_fc(self.ln_2(x)), approximate=False))

    class GPT(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.wte = nnx.Embed(VOCAB, shape.n_embd, embedding_init=normal, rngs=rngs)
            self.wpe = nnx.Embed(shape.block_size, shape.n_embd, embedding_init=normal, rngs=rngs)
            self.h = nnx.List([Block(rngs) for _ in range(shape.n_layer)])
            self.ln_f = nnx.LayerNorm(shape.n_embd, epsilon=1e-5, rngs=rngs)

        def __call__(self, idx: jax.Array, pos: jax.Array) -> jax.Array:
            x = self.wte(idx) + self.wpe(pos + jnp.arange(idx.shape[1]))
            for block in self.h:
                x = block(x, pos)
            return self.wte.attend(self.ln_f(x))  # tied output

    @nnx.jit
    def step(model: GPT, tokens: jax.Array, pos: jax.Array) -> jax.Array:
        """The prompt (prefill) or one token (decode) at `pos`: the next token, the cache written."""
        logits = model(tokens, pos)
        return jnp.argmax(logits[:, -1], axis=-1)

    device = _jax_setup(device_kind)
    with jax.default_device(device):
        model = nnx.jit(lambda: GPT(nnx.Rngs(shape.seed)))()
        model.eval()
    params = _flax_params(model)
    prompt = jax.device_put(prompt_tokens(shape).astype("int32"), device)
    state: dict[str, Any] = {}

    def first_token() -> jax.Array:
        state["token"], state["pos"] = step(model, prompt, 0), shape.prompt_len
        return state["token"]

    def next_token() -> jax.Array:
        state["token"] = step(model, state["token"][:, None], state["pos"])
        state["pos"] += 1
        return state["token"]

    # The position is traced: the prompt's shape and the single token's compile once each, then never.
    out = generation_times(first_token, next_token, jax.block_until_ready, shape, _compile_counter())
    return {"params": params, **out}


def _compile_counter() -> Callable[[], int]:
    """XLA backend compilations from now on (jax.monitoring's duration event)."""
    import jax

    count = [0]

    def listen(event: str, *_: Any, **__: Any) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    return lambda: count[0]


REFERENCES: dict[tuple[str, str], Callable[[Shape, str], dict[str, Any]]] = {
    ("resnet18", "pytorch"): reference_resnet18_pytorch,
    ("resnet18", "flax"): reference_resnet18_flax,
    ("gpt", "pytorch"): reference_gpt_pytorch,
    ("gpt", "flax"): reference_gpt_flax,
}


# ---------------------------------------------------------------------------------------------
# Running both sides.


def _env(device_kind: str) -> dict[str, str]:
    env = dict(os.environ)
    if device_kind == "cpu":
        env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # as the harness sets it
    return env


def _shape_args(shape: Shape) -> list[str]:
    return [f"--{k.replace('_', '-')}={v}" for k, v in asdict(shape).items()]


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _positive_times(value: Any, what: str) -> list[float]:
    """A list of finite positive seconds, or a BenchError naming what was wrong."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        raise BenchError(f"{what}: not a list of numbers")
    if not all(math.isfinite(v) and v > 0 for v in items):
        raise BenchError(f"{what}: holds a time that is not finite and positive")
    return [float(v) for v in items]


def parse_reference(workload: str, framework: str, stdout: str) -> dict[str, Any]:
    """The reference process's last line of output, checked: its keys, times and parameter count."""
    what = f"reference {framework} {workload}"
    try:
        doc = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise BenchError(f"{what}: no JSON line in its output") from None
    if not isinstance(doc, dict):
        raise BenchError(f"{what}: its output is not a JSON object")
    out: dict[str, Any] = {}
    for key in REFERENCE_KEYS[workload]:
        times = _positive_times(doc.get(key), f"{what} {key}")
        out[key] = times if isinstance(doc.get(key), list) else times[0]
    if not isinstance(doc.get("params"), int):
        raise BenchError(f"{what}: no parameter count")
    out["params"] = doc["params"]
    steady = doc.get("steady_compilations")
    if steady is not None:
        if not isinstance(steady, int) or isinstance(steady, bool) or steady < 0:
            raise BenchError(f"{what}: steady_compilations is not a count")
        out["steady_compilations"] = steady
    return out


def run_reference(workload: str, framework: str, shape: Shape, device_kind: str = "cpu") -> dict[str, Any]:
    """One reference process: its times (seconds) and its model's parameter count."""
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--reference", f"{workload}:{framework}", "--device",
         device_kind, *_shape_args(shape)],
        capture_output=True, text=True, cwd=REPO, env=_env(device_kind),
    )  # fmt: skip
    if proc.returncode != 0:
        raise BenchError(f"reference {framework} {workload} failed (exit {proc.returncode}):\n"
                         f"{_tail(proc.stdout + proc.stderr)}")  # fmt: skip
    return parse_reference(workload, framework, proc.stdout)


def suite_params(workload: str, shape: Shape) -> dict[str, Any]:
    if workload == "resnet18":
        # Synthetic images, few of them: the requests repeat the first test image either way.
        return {"mode": "infer", "max_batch": 1, "requests": shape.requests, "image_size": shape.image_size,
                "dataset": "synthetic", "train_samples": 64, "test_samples": 64, "seed": shape.seed}  # fmt: skip
    return {
        "mode": "generate", "requests": shape.decode_steps, "n_layer": shape.n_layer, "n_head": shape.n_head,
        "n_embd": shape.n_embd, "block_size": shape.block_size, "prompt_len": shape.prompt_len,
        "new_tokens": shape.new_tokens, "gen_batch": shape.gen_batch, "seed": shape.seed,
    }  # fmt: skip


def _metric(doc: dict[str, Any], name: Any, what: str) -> dict[str, Any]:
    metrics = doc.get("metrics")
    found = [m for m in metrics if isinstance(m, dict) and m.get("name") == name] if isinstance(metrics, list) else []
    if not isinstance(name, str) or len(found) != 1:
        raise BenchError(f"{what}: no single metric named {name!r}")
    return found[0]


def _median_of(doc: dict[str, Any], name: Any, what: str) -> float:
    stats = _metric(doc, name, what).get("stats")
    median = stats.get("median") if isinstance(stats, dict) else None
    return _positive_times(median, f"{what} {name!r} median")[0]


def read_suite_result(workload: str, doc: Any, what: str = "suite result") -> dict[str, float]:
    """The figures of one suite result: {"latency p50", "latency p99"} for resnet18, {"time to first
    token", "decode step p50", "decode step p99"} for gpt, in seconds, every name read from its
    inference block (the host never parses metric names) and every number checked."""
    if not isinstance(doc, dict) or doc.get("status") != "ok":
        status = doc.get("status") if isinstance(doc, dict) else None
        raise BenchError(f"{what}: status {status!r}, not 'ok'")
    if doc.get("suite") != workload:
        raise BenchError(f"{what}: a result of suite {str(doc.get('suite'))[:40]!r}, not {workload}")
    block = doc.get("inference")
    latency = block.get("latency") if isinstance(block, dict) else None
    if not isinstance(block, dict) or not isinstance(latency, dict) or not isinstance(latency.get("percentiles"), dict):
        raise BenchError(f"{what}: no inference.latency block")
    mode = "infer" if workload == "resnet18" else "generate"
    if block.get("mode") != mode:
        raise BenchError(f"{what}: inference mode {str(block.get('mode'))[:40]!r}, not {mode!r}")
    p50 = _median_of(doc, latency.get("metric"), what)
    tail = _median_of(doc, latency["percentiles"].get("p99"), what)
    if workload == "resnet18":
        return {"latency p50": p50, "latency p99": tail}
    generate = block.get("generate")
    if not isinstance(generate, dict):
        raise BenchError(f"{what}: no inference.generate block")
    ttft = _median_of(doc, generate.get("prefill"), what)
    return {"time to first token": ttft, "decode step p50": p50, "decode step p99": tail}


def reference_figures(workload: str, ref: dict[str, Any]) -> dict[str, float]:
    """The reference's figures under the suite's names."""
    if workload == "resnet18":
        return {"latency p50": statistics.median(ref["latency"]), "latency p99": p99(ref["latency"])}
    return {
        "time to first token": statistics.median(ref["prefill"]),
        "decode step p50": statistics.median(ref["decode"]),
        "decode step p99": p99(ref["decode"]),
    }


def run_suite(workload: str, framework: str, shape: Shape, results: Path, device_kind: str = "cpu") -> dict[str, float]:
    """One `harness run` job in a results folder of its own: its figures (seconds)."""
    results.mkdir(parents=True, exist_ok=False)
    cmd = [sys.executable, "-m", "harness.cli", "run", "--suite", workload, "--frameworks", framework,
           "--backend", "local", "--device", device_kind, "--results-dir", str(results), "-q"]  # fmt: skip
    for k, v in suite_params(workload, shape).items():
        cmd += ["--param", f"{k}={v}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=_env(device_kind))
    what = f"suite {framework} {workload}"
    from harness.judge.assessment import DISTURBED, FAILED

    # FAILED (a check, say) and DISTURBED (contended samples) still write the result: its status decides.
    if proc.returncode not in (0, FAILED, DISTURBED):
        raise BenchError(f"{what} failed (exit {proc.returncode}):\n{_tail(proc.stdout + proc.stderr)}")
    found = sorted(results.glob(f"*/{framework}.json"))
    if len(found) != 1:
        raise BenchError(f"{what}: expected one {framework}.json under {results}, found {len(found)}")
    try:
        doc = json.loads(found[0].read_text())
    except (OSError, ValueError) as error:
        raise BenchError(f"{what}: {found[0]} is unreadable ({error})") from None
    return read_suite_result(workload, doc, what)


def verdict(ratio: float) -> str:
    return "faster" if ratio < 1 - PARITY else f"parity (within {PARITY:.0%})" if ratio <= 1 + PARITY else "SLOWER"


@dataclass
class Row:
    """One figure of one framework and workload over the rounds (seconds)."""

    workload: str
    framework: str
    metric: str
    reference: list[float]
    suite: list[float]

    @property
    def ratios(self) -> list[float]:
        return [s / r for r, s in zip(self.reference, self.suite, strict=True)]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    def summary(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "reference_median": statistics.median(self.reference),
            "suite_median": statistics.median(self.suite),
            "ratios": self.ratios,
            "median_ratio": self.ratio,
            "verdict": verdict(self.ratio),
        }


def compare(args: argparse.Namespace, shape: Shape, log: Callable[[str], None]) -> list[Row]:
    """`rounds` interleaved rounds; each: every workload and framework, the reference then the suite."""
    rows: dict[tuple[str, str, str], Row] = {}
    with tempfile.TemporaryDirectory(prefix="inference-reference-") as tmp:
        for r in range(args.rounds):
            for workload in args.workloads:
                for framework in args.frameworks:
                    ref = run_reference(workload, framework, shape, args.device)
                    expected = suite_param_count(workload, shape)
                    if ref["params"] != expected:
                        raise BenchError(f"reference {framework} {workload}: {ref['params']} parameters, "
                                         f"the suite's model has {expected}")  # fmt: skip
                    mine = reference_figures(workload, ref)
                    ours = run_suite(workload, framework, shape, Path(tmp) / f"{r}-{workload}-{framework}", args.device)
                    for metric, value in mine.items():
                        row = rows.setdefault((workload, framework, metric), Row(workload, framework, metric, [], []))
                        row.reference.append(value)
                        row.suite.append(ours[metric])
                    figures = ", ".join(f"{m} {mine[m] * 1e3:.3f}/{ours[m] * 1e3:.3f}" for m in mine)
                    log(f"round {r + 1}/{args.rounds} {workload} {framework} (reference/suite ms): {figures}")
    return list(rows.values())


def render(rows: Sequence[Row], args: argparse.Namespace, shape: Shape) -> str:
    lines = [f"inference: the suites against plain reference loops, {args.device}, float32; {args.rounds} "
             f"interleaved round{'s' if args.rounds != 1 else ''} (reference then suite, separate processes)"]  # fmt: skip
    if "resnet18" in args.workloads:
        lines.append(f"  resnet18: ResNet18 ({suite_param_count('resnet18', shape):,} parameters), "
                     f"{shape.image_size}x{shape.image_size} images, batch 1, {shape.requests} requests "
                     f"(the first apart, {warmup_of(shape.requests)} warm-up)")  # fmt: skip
    if "gpt" in args.workloads:
        lines.append(f"  gpt: {shape.n_layer} layers x {shape.n_head} heads x {shape.n_embd} wide, context "
                     f"{shape.block_size} ({suite_param_count('gpt', shape):,} parameters); prompt "
                     f"{shape.prompt_len}, {shape.new_tokens} new tokens, batch {shape.gen_batch}; "
                     f"{prefill_repeat()} prefills, {shape.decode_steps} decode steps (the first apart, "
                     f"{warmup_of(shape.decode_steps)} warm-up)")  # fmt: skip
    lines.append(f"{'workload':9} {'framework':9} {'metric':20} {'reference ms':>12} {'suite ms':>9} "
                 f"{'suite/ref':>9}  verdict")  # fmt: skip
    for row in rows:
        s = row.summary()
        lines.append(f"{row.workload:9} {row.framework:9} {row.metric:20} {s['reference_median'] * 1e3:12.3f} "
                     f"{s['suite_median'] * 1e3:9.3f} {row.ratio:9.3f}  {s['verdict']}")  # fmt: skip
        lines.append(f"{'':9} {'':9} {'':20} per round suite/ref: " + ", ".join(f"{x:.3f}" for x in row.ratios))
    lines.append("ms: medians over rounds of each side's figure; suite/ref: the median over rounds of the ratio within "
                 f"a round; target <= 1 ({PARITY:.0%} either side: parity)")  # fmt: skip
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The command line.


class _Parser(argparse.ArgumentParser):
    """Bad input: one line naming the problem, exit 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _names(choices: Sequence[str], what: str) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in choices]
        if not names or unknown or len(set(names)) != len(names):
            raise argparse.ArgumentTypeError(
                f"{text!r}: name one or more of {', '.join(choices)}, comma-separated, each once"
            )
        return names

    parse.__name__ = what
    return parse


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below the smallest allowed, {low}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, Shape]:
    parser = _Parser(prog="inference_reference.py", description=(__doc__ or "").split("\n")[0])
    defaults = Shape()
    minimum = {"image_size": 16, "requests": 5, "decode_steps": 5, "new_tokens": 2, "seed": 0}
    helps = {
        "requests": "resnet18: timed single requests at batch 1 (the suite's `requests`)",
        "decode_steps": "gpt: timed decode steps (the suite's `requests` under mode=generate)",
        "new_tokens": "gpt: tokens generated after each prompt (at least 2: one prefill, one decode step)",
        "gen_batch": "gpt: prompts decoded together",
    }
    for f in fields(Shape):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=_int_at_least(minimum.get(f.name, 1)),
                            default=getattr(defaults, f.name), help=helps.get(f.name))  # fmt: skip
    parser.add_argument("--rounds", type=_int_at_least(1), default=3, help="interleaved rounds")
    parser.add_argument("--workloads", type=_names(WORKLOADS, "workloads"), default=list(WORKLOADS))
    parser.add_argument("--frameworks", type=_names(FRAMEWORKS, "frameworks"), default=list(FRAMEWORKS))
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the rows as JSON here")
    parser.add_argument("--reference", choices=[f"{w}:{f}" for w, f in REFERENCES], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    shape = Shape(**{f.name: getattr(args, f.name) for f in fields(Shape)})
    if shape.n_embd % shape.n_head:
        parser.error(f"--n-embd {shape.n_embd} is not a multiple of --n-head {shape.n_head}: pick a head count "
                     "that divides the width")  # fmt: skip
    if shape.prompt_len + shape.new_tokens > shape.block_size:
        parser.error(f"--prompt-len {shape.prompt_len} + --new-tokens {shape.new_tokens} is more than --block-size "
                     f"{shape.block_size}: shorten them (the model has positions for block_size tokens)")  # fmt: skip
    if args.json is not None and not args.json.parent.is_dir():
        parser.error(f"--json {args.json}: the folder {args.json.parent} does not exist; create it or pick another")
    return args, shape


def main(argv: Sequence[str] | None = None) -> int:
    args, shape = parse_args(argv)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    try:
        if args.reference:
            workload, framework = args.reference.split(":")
            out = REFERENCES[(workload, framework)](shape, args.device)
            print(json.dumps(out))
            return 0
        rows = compare(args, shape, lambda line: print(line, file=sys.stderr, flush=True))
    except BenchError as error:
        print(f"inference_reference.py: {error}", file=sys.stderr)
        return 1
    print(render(rows, args, shape))
    if args.json is not None:
        doc = {"device": args.device, "rounds": args.rounds, "shape": asdict(shape), "target": 1.0,
               "parity": PARITY, "rows": [row.summary() for row in rows]}  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
