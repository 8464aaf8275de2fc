"""Is the `gpt` suite at least as fast as the plain loop people write? (issue: training suites)

For flax and pytorch, the steady tokens/s of the same GPT decoder (suites/gpt: token and learned
position embeddings, pre-LayerNorm blocks of causal fused attention and a 4x exact-GELU MLP, final
LayerNorm, output tied to the token embedding) trained on the suite's bundled tiny Shakespeare,
measured two ways:
  suite:     `harness run --suite gpt --param curve=false` (the bytes resident on the device,
             windows gathered there, one jitted step / eager step, nothing read inside an interval);
  reference: a plain loop written the way each framework's own examples write theirs, with a
             model of its own defined in this file, in its own process:
             pytorch -- nanoGPT (karpathy/nanoGPT train.py + model.py): `get_batch()` draws
                      `torch.randint` windows from the train bytes and stacks int64 slices,
                      `.to(device)` (pinned, non-blocking on CUDA); `logits, loss = model(x, y)`;
                      AdamW in two groups (decay on dim >= 2; fused on CUDA), `get_lr(it)` warm-up
                      + cosine set into `param_groups` every step, `clip_grad_norm_(1.0)`,
                      `loss.item()` every 10 steps for the log line;
             flax  -- the Flax NNX tutorials: an `nnx.Module` GPT, `nnx.Optimizer(model,
                      optax.chain(clip_by_global_norm, adamw(warmup_cosine_decay_schedule)),
                      wrt=nnx.Param)`, `@nnx.jit train_step(model, optimizer, x, y)`, windows drawn
                      on the host with NumPy and passed per step, `float(loss)` every 10 steps.
Both sides use the same sizes, the same bytes (the suite's corpus split 90/10), AdamW betas
(0.9, 0.95), eps 1e-8, weight decay 0.1, peak lr 1e-3 with 30 warm-up steps and a cosine to 10 %,
float32 throughout (nanoGPT turns TF32 and bfloat16 autocast on where the GPU has them; the
suite's default precision is fp32, so the reference keeps float32 too: the same arithmetic).
Only speed is compared: the reference initialises its own weights (nanoGPT's normal(0.02)) and
draws its own windows. Each side times `--intervals` intervals of `--steps` optimiser steps (a
clock per interval, ending with a device sync) and reports the median of the intervals after the
first (which compiles). The reference checks its model has the suite's parameter count.
`--rounds` interleaved rounds (reference, then suite): the verdict is the median over rounds of
the suite/reference time ratio within a round, which cancels most drift from other load on the
machine; the best round of each side is printed too. Target: suite / reference <= 1.

    python benchmarks/gpt_reference.py [--n-layer 4] [--n-head 4] [--n-embd 128] [--block-size 128]
        [--batch-size 16] [--steps 50] [--intervals 4] [--rounds 2] [--frameworks flax,pytorch]
        [--device cpu|gpu]

The defaults are the suite's model and batch (its intervals default is 6; 4 here keeps the whole
benchmark to a few minutes on a 2-core CPU).
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# The suite's defaults (suites/gpt/spec.py), passed to it explicitly so both sides agree.
LR, WARMUP, MIN_LR_RATIO, WEIGHT_DECAY, GRAD_CLIP = 1e-3, 30, 0.1, 0.1, 1.0
BETAS, EPS, INIT_STD = (0.9, 0.95), 1e-8, 0.02
VOCAB = 256  # bytes
LOG_INTERVAL = 10  # nanoGPT's: the loss is read on the host every 10 steps


@dataclass(frozen=True)
class Shape:
    """What both sides share: the model, the batch and the timed intervals."""

    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    block_size: int = 128
    batch_size: int = 16
    steps: int = 50
    intervals: int = 4
    seed: int = 42

    @property
    def total_steps(self) -> int:
        return self.steps * self.intervals

    @property
    def tokens_per_interval(self) -> int:
        return self.steps * self.batch_size * self.block_size


def suite_config(shape: Shape) -> Any:
    """The suite's Config of the same model, for its own parameter count."""
    from suites.gpt.common import Config

    return Config(
        n_layer=shape.n_layer, n_head=shape.n_head, n_embd=shape.n_embd, block_size=shape.block_size,
        batch=shape.batch_size, dropout=0.0, intervals=shape.intervals, steps=shape.steps, lr=LR, warmup=WARMUP,
        min_lr_ratio=MIN_LR_RATIO, weight_decay=WEIGHT_DECAY, grad_clip=GRAD_CLIP, eval_windows=64,
        attention="fused", variant="default", seed=shape.seed,
    )  # fmt: skip


def suite_param_count(shape: Shape) -> int:
    from suites.gpt.common import param_count

    return param_count(suite_config(shape))


def train_bytes() -> bytes:
    """The suite's bundled corpus, split as the suite splits it: the first 90 % trains."""
    from suites.contract.datasets import text_split
    from suites.gpt.common import bundled_corpus

    return text_split(bundled_corpus())[0]


def get_lr(it: int, shape: Shape) -> float:
    """nanoGPT's schedule: linear warm-up, then a cosine down to min_lr at the last step."""
    min_lr, lr_decay_iters = LR * MIN_LR_RATIO, shape.total_steps
    if it < WARMUP:
        return LR * (it + 1) / (WARMUP + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - WARMUP) / max(lr_decay_iters - WARMUP, 1)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (LR - min_lr)


# ---------------------------------------------------------------------------------------------
# PyTorch: nanoGPT.


def reference_pytorch(shape: Shape, device_kind: str) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(shape.n_embd, 3 * shape.n_embd)
            self.c_proj = nn.Linear(shape.n_embd, shape.n_embd)
            self.n_head, self.n_embd = shape.n_head, shape.n_embd

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = nn.Linear(shape.n_embd, 4 * shape.n_embd)
            self.gelu = nn.GELU()  # exact (erf)
            self.c_proj = nn.Linear(4 * shape.n_embd, shape.n_embd)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(shape.n_embd, eps=1e-5)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(shape.n_embd, eps=1e-5)
            self.mlp = MLP()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(VOCAB, shape.n_embd),
                    wpe=nn.Embedding(shape.block_size, shape.n_embd),
                    h=nn.ModuleList([Block() for _ in range(shape.n_layer)]),
                    ln_f=nn.LayerNorm(shape.n_embd, eps=1e-5),
                )
            )
            self.lm_head = nn.Linear(shape.n_embd, VOCAB, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying
            self.apply(self._init_weights)
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=INIT_STD / math.sqrt(2 * shape.n_layer))

        def _init_weights(self, module: nn.Module) -> None:
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)

        def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            t = idx.size(1)
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

    torch.manual_seed(shape.seed)
    on_cuda = device_kind == "gpu"
    device = torch.device("cuda" if on_cuda else "cpu")
    # float32 as the suite's default fp32 (nanoGPT itself allows TF32): the same arithmetic.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    data = torch.frombuffer(bytearray(train_bytes()), dtype=torch.uint8)
    block_size, batch_size = shape.block_size, shape.batch_size

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(data) - block_size, (batch_size,))
        x = torch.stack([data[i : i + block_size].to(torch.int64) for i in ix])
        y = torch.stack([data[i + 1 : i + 1 + block_size].to(torch.int64) for i in ix])
        if on_cuda:
            return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
        return x.to(device), y.to(device)

    model = GPT().to(device)
    params = sum(p.numel() for p in model.parameters())  # the tied weight once
    param_dict = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
    optim_groups = [
        {"params": [p for p in param_dict.values() if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
        {"params": [p for p in param_dict.values() if p.dim() < 2], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optim_groups, lr=LR, betas=BETAS, eps=EPS, fused=True if on_cuda else None)

    times = []
    X, Y = get_batch()  # fetch the very first batch
    it = 0
    for _ in range(shape.intervals):
        start = time.perf_counter()
        for _ in range(shape.steps):
            lr = get_lr(it, shape)
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr
            logits, loss = model(X, Y)
            X, Y = get_batch()  # prefetch the next batch while the device works (async on CUDA)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if it % LOG_INTERVAL == 0:
                loss.item()  # the log line
            it += 1
        if on_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return {"times": times, "params": params}


# ---------------------------------------------------------------------------------------------
# Flax NNX: the tutorials' shape.


def reference_flax(shape: Shape, device_kind: str) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax import nnx

    jax.config.update("jax_default_matmul_precision", "highest")  # as the harness sets it (fp32)
    normal = nnx.initializers.normal(INIT_STD)
    proj_normal = nnx.initializers.normal(INIT_STD / math.sqrt(2 * shape.n_layer))

    class CausalSelfAttention(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.c_attn = nnx.Linear(shape.n_embd, 3 * shape.n_embd, kernel_init=normal, rngs=rngs)
            self.c_proj = nnx.Linear(shape.n_embd, shape.n_embd, kernel_init=proj_normal, rngs=rngs)
            self.n_head = shape.n_head

        def __call__(self, x: jax.Array) -> jax.Array:
            B, T, C = x.shape
            q, k, v = jnp.split(self.c_attn(x), 3, axis=-1)
            q, k, v = (z.reshape(B, T, self.n_head, C // self.n_head) for z in (q, k, v))
            y = jax.nn.dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.reshape(B, T, C))

    class Block(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.ln_1 = nnx.LayerNorm(shape.n_embd, epsilon=1e-5, rngs=rngs)
            self.attn = CausalSelfAttention(rngs)
            self.ln_2 = nnx.LayerNorm(shape.n_embd, epsilon=1e-5, rngs=rngs)
            self.c_fc = nnx.Linear(shape.n_embd, 4 * shape.n_embd, kernel_init=normal, rngs=rngs)
            self.c_proj = nnx.Linear(4 * shape.n_embd, shape.n_embd, kernel_init=proj_normal, rngs=rngs)

        def __call__(self, x: jax.Array) -> jax.Array:
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(jax.nn.gelu(self.c_fc(self.ln_2(x)), approximate=False))

    class GPT(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.wte = nnx.Embed(VOCAB, shape.n_embd, embedding_init=normal, rngs=rngs)
            self.wpe = nnx.Embed(shape.block_size, shape.n_embd, embedding_init=normal, rngs=rngs)
            self.h = nnx.List([Block(rngs) for _ in range(shape.n_layer)])
            self.ln_f = nnx.LayerNorm(shape.n_embd, epsilon=1e-5, rngs=rngs)

        def __call__(self, idx: jax.Array) -> jax.Array:
            x = self.wte(idx) + self.wpe(jnp.arange(idx.shape[1]))
            for block in self.h:
                x = block(x)
            return self.wte.attend(self.ln_f(x))  # tied output

    device = jax.devices("gpu" if device_kind == "gpu" else "cpu")[0]
    with jax.default_device(device):
        model = GPT(nnx.Rngs(shape.seed))
        params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
        schedule = optax.warmup_cosine_decay_schedule(
            init_value=0.0,
            peak_value=LR,
            warmup_steps=WARMUP,
            decay_steps=max(shape.total_steps, WARMUP + 1),
            end_value=LR * MIN_LR_RATIO,
        )
        tx = optax.chain(
            optax.clip_by_global_norm(GRAD_CLIP),
            optax.adamw(schedule, b1=BETAS[0], b2=BETAS[1], eps=EPS, weight_decay=WEIGHT_DECAY,
                        mask=lambda p: jax.tree.map(lambda x: x.ndim >= 2, p)),
        )  # fmt: skip
        optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)

    @nnx.jit
    def train_step(model: GPT, optimizer: nnx.Optimizer, x: jax.Array, y: jax.Array) -> jax.Array:
        def loss_fn(model: GPT) -> jax.Array:
            logits = model(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    data = np.frombuffer(train_bytes(), dtype=np.uint8)
    np.random.seed(shape.seed)
    block_size, batch_size = shape.block_size, shape.batch_size

    def get_batch() -> tuple[Any, Any]:
        ix = np.random.randint(0, len(data) - block_size, size=batch_size)
        x = np.stack([data[i : i + block_size] for i in ix]).astype(np.int32)
        y = np.stack([data[i + 1 : i + 1 + block_size] for i in ix]).astype(np.int32)
        return x, y

    times = []
    it = 0
    with jax.default_device(device):
        for _ in range(shape.intervals):
            start = time.perf_counter()
            for _ in range(shape.steps):
                x, y = get_batch()
                loss = train_step(model, optimizer, x, y)
                if it % LOG_INTERVAL == 0:
                    float(loss)  # the log line
                it += 1
            jax.block_until_ready((loss, nnx.state((model, optimizer))))
            times.append(time.perf_counter() - start)
    return {"times": times, "params": params}


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


def run_reference(framework: str, shape: Shape, device_kind: str = "cpu") -> dict[str, Any]:
    """One reference process: {"times": seconds per interval, "params": the model's parameters}."""
    proc = subprocess.run(
        [sys.executable, __file__, "--reference", framework, "--device", device_kind, *_shape_args(shape)],
        capture_output=True, text=True, cwd=REPO, env=_env(device_kind),
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"reference {framework} failed:\n{proc.stdout}{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_suite(framework: str, shape: Shape, results: Path, device_kind: str = "cpu") -> list[float]:
    """One `harness run` job: seconds per interval, the first (with compilation) then the steady
    ones from its tokens/s samples, so `steady` reads both sides alike."""
    params = {
        "n_layer": shape.n_layer, "n_head": shape.n_head, "n_embd": shape.n_embd, "block_size": shape.block_size,
        "batch_size": shape.batch_size, "steps": shape.steps, "intervals": shape.intervals, "seed": shape.seed,
        "lr": LR, "warmup_steps": WARMUP, "min_lr_ratio": MIN_LR_RATIO, "weight_decay": WEIGHT_DECAY,
        "grad_clip": GRAD_CLIP, "dataset": "shakespeare", "curve": "false",
    }  # fmt: skip
    cmd = [sys.executable, "-m", "harness.cli", "run", "--suite", "gpt", "--frameworks", framework,
           "--backend", "local", "--device", device_kind, "--results-dir", str(results), "-q"]  # fmt: skip
    for k, v in params.items():
        cmd += ["--param", f"{k}={v}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=_env(device_kind))
    if proc.returncode not in (0, 1):
        raise RuntimeError(proc.stdout + proc.stderr)
    run_dir = Path(proc.stdout.split("run folder: ")[-1].strip())
    doc = json.loads((run_dir / f"{framework}.json").read_text())
    metrics = {m["name"]: m for m in doc["metrics"]}
    first = float(metrics["first interval"]["samples"][0])  # the suite reports interval 1 apart
    return [first] + [shape.tokens_per_interval / float(s) for s in metrics["tokens/s"]["samples"]]


def steady(times: list[float]) -> float:
    """The median interval after the first (which compiles)."""
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    defaults = Shape()
    parser.add_argument("--n-layer", type=int, default=defaults.n_layer)
    parser.add_argument("--n-head", type=int, default=defaults.n_head)
    parser.add_argument("--n-embd", type=int, default=defaults.n_embd)
    parser.add_argument("--block-size", type=int, default=defaults.block_size)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--steps", type=int, default=defaults.steps, help="optimiser steps per timed interval")
    parser.add_argument(
        "--intervals", type=int, default=defaults.intervals, help="timed intervals (the first compiles)"
    )
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--frameworks", default="flax,pytorch")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--reference", choices=("flax", "pytorch"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.n_embd % args.n_head:
        parser.error(f"--n-embd {args.n_embd} is not a multiple of --n-head {args.n_head}")
    if args.intervals < 2:
        parser.error("--intervals must be at least 2: the first interval holds the compilation")
    shape = Shape(args.n_layer, args.n_head, args.n_embd, args.block_size, args.batch_size, args.steps,
                  args.intervals, args.seed)  # fmt: skip
    sys.path.insert(0, str(REPO))
    expected = suite_param_count(shape)
    if args.reference:
        loop = reference_flax if args.reference == "flax" else reference_pytorch
        out = loop(shape, args.device)
        if out["params"] != expected:
            sys.exit(f"reference {args.reference}: {out['params']} parameters, the suite's model has {expected}")
        print(json.dumps(out))
        return

    tokens = shape.tokens_per_interval
    print(f"gpt {shape.n_layer} layers x {shape.n_head} heads x {shape.n_embd} wide, context {shape.block_size}, "
          f"batch {shape.batch_size} ({expected:,} parameters), {args.device}; {args.intervals} intervals of "
          f"{shape.steps} steps: median of intervals 2..{args.intervals}; {args.rounds} interleaved rounds")  # fmt: skip
    print(f"{'framework':10} {'reference s/intvl':>18} {'suite s/intvl':>14} {'reference tok/s':>16} "
          f"{'suite tok/s':>12} {'suite/ref time':>15}")  # fmt: skip
    print("(times and rates: best round of each side; suite/ref: median over rounds of the paired ratio)")
    with tempfile.TemporaryDirectory() as tmp:
        for framework in args.frameworks.split(","):
            ref: list[float] = []
            ours: list[float] = []
            for _ in range(args.rounds):  # interleaved so drift hits both alike
                ref.append(steady(run_reference(framework, shape, args.device)["times"]))
                ours.append(steady(run_suite(framework, shape, Path(tmp), args.device)))
            r, o = min(ref), min(ours)
            # Each round runs reference then suite back to back, so the ratio within a round
            # cancels most of the drift from other load; the median of those ratios is the verdict.
            paired = statistics.median(b / a for a, b in zip(ref, ours, strict=True))
            # Within 2 %: the rounds' spread on a shared 2-core machine; not a win, not a loss.
            verdict = "faster" if paired < 0.98 else "parity (within 2 %)" if paired <= 1.02 else "SLOWER"
            print(f"{framework:10} {r:18.3f} {o:14.3f} {tokens / r:16.1f} {tokens / o:12.1f} {paired:15.3f}  {verdict}")
            rounds = ", ".join(f"{a:.3f}/{b:.3f}" for a, b in zip(ref, ours, strict=True))
            print(f"{'':10} per round, reference/suite s/interval: {rounds}")


if __name__ == "__main__":
    main()
