"""GPT inference in PyTorch: `mode=infer` (the forward pass over whole sequences: latency at batch 1
and throughput against batch) and `mode=generate` (greedy decoding with a static KV cache,
decode_torch.py), eager or `torch.compile` (`variant=compiled`), evaluation mode under
`torch.inference_mode`. Every input is on the device before a clock starts."""

from __future__ import annotations

from typing import Any

from suites.gpt import common, generation
from suites.runtime.context import Context


def run(ctx: Context, cfg: common.Config) -> None:
    import torch

    from suites.gpt.models_torch import GPT, load
    from suites.runtime import training_torch

    text = common.load(ctx, cfg)
    model = GPT(cfg).to(ctx.device)
    load(model, common.initial_weights(cfg))
    model.eval()  # dropout off
    compiled = cfg.variant == "compiled"
    ctx.note("pytorch inference: " + ("torch.compile (inductor, dynamic=False)" if compiled else "eager")
             + ", torch.inference_mode, evaluation mode")  # fmt: skip
    dtype = getattr(torch, training_torch.compute_dtype(ctx))
    if ctx.params["mode"] == "infer":
        _infer(ctx, cfg, model, text, compiled)
    else:
        _generate(ctx, cfg, model, text, compiled, dtype)


def _infer(ctx: Context, cfg: common.Config, model: Any, text: Any, compiled: bool) -> None:
    import torch

    from suites.runtime import training_torch

    forward = torch.compile(model, dynamic=False) if compiled else model
    with torch.inference_mode():  # the check: float32, eager
        logits = model(torch.from_numpy(generation.sequences(cfg, text, 1)).to(ctx.device))
    corner = logits[0, : common.PROBE_POSITIONS, : common.PROBE_LOGITS]
    ctx.check("infer_outputs", [float(v) for v in corner.float().cpu().reshape(-1).tolist()])

    def request(batch: int) -> Any:
        x = torch.from_numpy(generation.sequences(cfg, text, batch)).to(ctx.device)

        def call() -> Any:
            with torch.inference_mode(), training_torch.autocast(ctx):
                return forward(x)

        return call

    generation.infer(ctx, cfg, request, "")


def _generate(ctx: Context, cfg: common.Config, model: Any, text: Any, compiled: bool, dtype: Any) -> None:
    import torch

    from suites.gpt import decode_torch
    from suites.runtime import training_torch

    batch, prompt_len, new = generation.shape(ctx)
    dev = ctx.device
    prompt = torch.from_numpy(generation.prompts(cfg, text, batch, prompt_len)).to(dev)
    with torch.inference_mode():  # the checks: float32, eager, the cache against the uncached forward pass
        tokens, cached = decode_torch.greedy(model, prompt, new, torch.float32)
        seen = torch.cat([prompt, torch.tensor(tokens, device=dev)[:, :-1]], dim=1)
        full = model(seen)[:, prompt_len - 1 :]
    generation.record_checks(ctx, tokens, cached.float().cpu().numpy(), full.float().cpu().numpy())

    step = torch.compile(decode_torch.forward, dynamic=False) if compiled else decode_torch.forward
    cache = decode_torch.Cache(model, batch, prompt_len + new, dev, dtype)
    prompt_positions = torch.arange(prompt_len, device=dev)
    positions = [torch.tensor([prompt_len + j], device=dev) for j in range(new)]  # on the device before any clock
    state: dict[str, Any] = {"token": None, "j": 0}

    def prefill() -> Any:
        with torch.inference_mode(), training_torch.autocast(ctx):
            logits = step(model, cache, prompt, prompt_positions)
            state["token"], state["j"] = logits[:, -1].argmax(dim=-1), 0
            return state["token"]

    def decode() -> Any:
        j = state["j"]
        with torch.inference_mode(), training_torch.autocast(ctx):
            logits = step(model, cache, state["token"][:, None], positions[j])
            state["token"], state["j"] = logits[:, -1].argmax(dim=-1), (j + 1) % new
            return state["token"]

    generation.generate(ctx, cfg, prefill, decode)
