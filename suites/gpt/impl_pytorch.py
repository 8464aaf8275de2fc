from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

from suites.contract.inference import inferring
from suites.contract.ranks import data_parallel
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import numpy as np
    import torch
    import torch.nn.functional as F

    from suites.gpt import common
    from suites.gpt.models_torch import GPT, export, load
    from suites.runtime import profiling, training, training_torch

    cfg = common.config(ctx)
    if inferring(ctx.params):
        from suites.gpt import serve_torch

        serve_torch.run(ctx, cfg)
        return
    if data_parallel(ctx.params):
        _parallel(ctx, cfg)
        return
    mode = "compiled" if cfg.variant == "compiled" else "eager"
    ctx.note(f"pytorch variant {mode}: " + ("torch.compile of the model (inductor), loss and AdamW eager"
             if mode == "compiled" else "eager autograd; batches gathered on the device"))  # fmt: skip
    text = common.load(ctx, cfg)
    dev = ctx.device
    train_tokens = torch.from_numpy(text.train.astype(np.int64)).to(dev)
    val_tokens = torch.from_numpy(text.test.astype(np.int64)).to(dev)
    offsets = torch.from_numpy(common.offsets(cfg, len(text.train)).astype(np.int64)).to(dev)
    flat_offsets = offsets.reshape(-1, cfg.batch)
    val_offsets = torch.from_numpy(common.val_offsets(cfg, len(text.test)).astype(np.int64)).to(dev)
    window = torch.arange(cfg.block_size + 1, device=dev)
    lrs = common.schedule(cfg)
    weights = common.initial_weights(cfg)
    training_torch.seed_everything(cfg.seed)  # dropout masks (dropout=0 by default)
    model = GPT(cfg).to(dev)
    load(model, weights)
    n_params = training_torch.param_count(model)
    training.record_fairness(ctx, host_copy=None)
    attention = _attention_kernel(ctx, cfg)
    ctx.training["attention"] = attention
    ctx.training["data"] = "device"  # every window is gathered on the device from the resident bytes
    ctx.note(f"attention: {attention}")
    counter = training_torch.CompileCounter(compiles=mode == "compiled")  # its canary compiles before any clock

    def optimizer_of(m: GPT) -> Any:
        return adamw(ctx, cfg, m, lrs[0])

    def batch(tokens: Any, starts: Any) -> tuple[Any, Any]:
        rows = tokens[starts[:, None] + window]  # (batch, block_size + 1): inputs and next-byte targets
        return rows[:, :-1], rows[:, 1:]

    def loss_of(forward: Any, xb: Any, yb: Any) -> Any:
        return F.cross_entropy(forward(xb).float().view(-1, common.VOCAB), yb.reshape(-1))

    def step(m: GPT, forward: Any, opt: Any, s: int, xb: Any, yb: Any, bf16: bool) -> Any:
        for group in opt.param_groups:
            group["lr"] = lrs[s]
        with training_torch.autocast(ctx) if bf16 else nullcontext():
            loss = loss_of(forward, xb, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(m.parameters(), cfg.grad_clip)
        opt.step()
        return loss.detach()

    optimizer = optimizer_of(model)
    forward = torch.compile(model) if mode == "compiled" else model
    first_step: list[float] = []

    def run_interval(e: int) -> Any:
        total = torch.zeros((), device=dev)
        began = time.perf_counter()
        for j in range(cfg.steps):
            loss = step(model, forward, optimizer, e * cfg.steps + j, *batch(train_tokens, offsets[e, j]), True)
            if e == 0 and j == 0:  # the first step alone: trace and compile (inside interval 1's clock)
                ctx.sync(loss)
                first_step.append(time.perf_counter() - began)
            total += loss
        return total

    def evaluate() -> float:
        """Mean validation loss over the fixed windows, dropout off; the eager model (no recompile)."""
        model.eval()
        total = torch.zeros((), device=dev)
        with torch.inference_mode(), training_torch.autocast(ctx):
            for lo in range(0, len(val_offsets), cfg.batch):
                chunk = val_offsets[lo : lo + cfg.batch]
                total += loss_of(model, *batch(val_tokens, chunk)) * len(chunk)
        model.train()
        return float(total) / len(val_offsets)

    baseline = training_torch.memory_baseline(ctx)
    history = common.train(ctx, cfg, run_interval=run_interval, read=lambda out: float(out) / cfg.steps,
                           compilations=counter, evaluate=evaluate)  # fmt: skip
    common.record(ctx, cfg, history, first_step=first_step[0], variant=mode)
    on_gpu = ctx.device_kind == "gpu"
    training.record_peak_memory(
        ctx,
        baseline=baseline,
        device_peak=int(torch.cuda.max_memory_allocated()) if on_gpu else None,
        how="torch.cuda.max_memory_allocated() minus memory_allocated() before training",
    )
    common.record_val_loss(ctx, history.evaluations[-1].accuracy if history.evaluations else evaluate())

    # The checks, in float32 from the initial weights on a model of their own, once the peak is read.
    began = time.perf_counter()
    probe = GPT(cfg).to(dev)
    load(probe, weights)
    probe.eval()  # dropout off: the probe is a deterministic function of the weights and batches
    opt = optimizer_of(probe)
    x0, y0 = batch(train_tokens, flat_offsets[0])
    with torch.no_grad():
        logits = probe(x0[:1])[0, : common.PROBE_POSITIONS, : common.PROBE_LOGITS].tolist()
    before = export(probe)
    losses: list[float] = []
    after: dict[str, Any] = {}
    loss_after = 0.0
    for s in range(common.PROBE_STEPS):
        xb, yb = batch(train_tokens, flat_offsets[s % len(flat_offsets)])
        losses.append(float(step(probe, probe, opt, s, xb, yb, False)))
        if s == 0:
            ctx.progress(f"float32 probe: first step done {time.perf_counter() - began:.1f} s after the probe began")
            after = export(probe)
            with torch.no_grad():
                loss_after = float(loss_of(probe, x0, y0))
    common.probe_checks(ctx, logits=logits, losses=losses, loss_after=loss_after, before=before, after=after,
                        cfg=cfg, n_params=n_params)  # fmt: skip

    # Last: the profiled steps train the model further, after every number and check is recorded.
    def at(j: int) -> Any:
        return lambda: step(model, forward, optimizer, j, *batch(train_tokens, offsets[0, j]), True)

    ctx.profile("train step", profiling.cycle([at(j) for j in range(cfg.steps)]), steps_per_sample=1.0)


def adamw(ctx: Context, cfg: Any, model: Any, lr: float) -> Any:
    """nanoGPT's AdamW: decay on the matrices only; the fused CUDA kernel where there is one."""
    import torch

    from suites.gpt import common
    from suites.gpt.models_torch import tensors

    named = tensors(model)
    groups = [
        {"params": [t for n, t in named.items() if common.decayed(n)], "weight_decay": cfg.weight_decay},
        {"params": [t for n, t in named.items() if not common.decayed(n)], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=common.BETAS, eps=common.EPS,
                             fused=True if ctx.device_kind == "gpu" else None)  # fmt: skip


def _parallel(ctx: Context, cfg: Any) -> None:
    """DistributedDataParallel over `devices` processes (suites/runtime/data_parallel.py)."""
    import torch.nn.functional as F

    from suites.gpt import common
    from suites.gpt.models_torch import GPT, load
    from suites.runtime import data_parallel as dp
    from suites.runtime import dp_torch

    text = common.load(ctx, cfg)
    weights = common.initial_weights(cfg)
    shape = dp.shape_of(ctx)
    lrs = common.parallel_lrs(cfg, shape.total_steps)

    def build() -> Any:
        model = GPT(cfg).to(ctx.device)
        load(model, weights)
        return model.eval()  # dropout off

    def loss(forward: Any, xb: Any, yb: Any) -> Any:
        return F.cross_entropy(forward(xb).float().view(-1, common.VOCAB), yb.reshape(-1))

    recipe = dp.Recipe(
        build=build,
        loss=loss,
        optimizer=lambda m: adamw(ctx, cfg, m, lrs[0]),
        lr=lambda s: lrs[min(s, len(lrs) - 1)],
        rows=lambda s, n: common.parallel_rows(cfg, text.train, s, n),
        unit="tokens",
        items_per_row=cfg.block_size,
        clip=cfg.grad_clip,
        flops_per_row=common.flops_per_token(cfg) * cfg.block_size,
    )
    dp.run(ctx, recipe, lambda ranks, r, s: dp_torch.TorchLoop(ranks, r, s, ctx.device))


def _attention_kernel(ctx: Context, cfg: Any) -> str:
    """Which attention code runs: written out, or which of scaled_dot_product_attention's kernels
    PyTorch can pick for these shapes (on a GPU: flash, memory-efficient, cuDNN, in its order)."""
    if cfg.attention == "manual":
        return "manual: matmul, causal mask, softmax, matmul"
    if ctx.device_kind != "gpu":
        return "fused: torch scaled_dot_product_attention, CPU kernel (flash-attention for CPU)"
    import torch

    head = cfg.n_embd // cfg.n_head
    dtype = torch.bfloat16 if ctx.precision == "bf16" else torch.float32
    q = torch.empty(cfg.batch, cfg.n_head, cfg.block_size, head, device=ctx.device, dtype=dtype)
    try:
        from torch.backends.cuda import SDPAParams, can_use_efficient_attention, can_use_flash_attention

        params = SDPAParams(q, q, q, None, 0.0, True, False)
        usable = [name for name, ok in (("flash", can_use_flash_attention(params)),
                                        ("memory-efficient", can_use_efficient_attention(params))) if ok]  # fmt: skip
    except (ImportError, TypeError, RuntimeError) as error:
        return f"fused: torch scaled_dot_product_attention (kernel not determinable here: {type(error).__name__})"
    return "fused: torch scaled_dot_product_attention, " + (f"{usable[0]} kernel" if usable else "math fallback")
