"""What both GPT inference jobs share (`mode=infer` and `mode=generate`): the prompts, the FLOPs and
weight bytes of a step, and the checks, made once with NumPy and handed to both frameworks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from suites.contract import inference
from suites.contract.settings import compute_dtype
from suites.gpt import common
from suites.runtime.context import Context


def shape(ctx: Context) -> tuple[int, int, int]:
    """(prompts decoded together, prompt tokens, new tokens)."""
    p = ctx.params
    return int(p["gen_batch"]), int(p["prompt_len"]), int(p["new_tokens"])


def prompts(cfg: common.Config, text: Any, batch: int, length: int) -> Any:
    """(batch, length) int64 prompts: consecutive windows of the validation text, from its start."""
    import numpy as np

    starts = np.arange(batch, dtype=np.int64) * length % max(1, len(text.test) - length)
    return text.test[starts[:, None] + np.arange(length)].astype(np.int64)


def sequences(cfg: common.Config, text: Any, batch: int) -> Any:
    """(batch, block_size) int64 inputs of `mode=infer`: validation windows, the test set repeated past its end."""
    import numpy as np

    windows = common.val_offsets(cfg, len(text.test))
    starts = windows[np.arange(batch) % len(windows)].astype(np.int64)
    return text.test[starts[:, None] + np.arange(cfg.block_size)].astype(np.int64)


def forward_flops(cfg: common.Config, attended: int) -> float:
    """Forward FLOPs per token attending to `attended` positions: 2 N (every weight matrix, the tied output
    projection included) + 4 L T d (scores and weighted sum), a third of common.flops_per_token's terms."""
    n = common.param_count(cfg) - cfg.block_size * cfg.n_embd
    return 2.0 * n + 4.0 * cfg.n_layer * attended * cfg.n_embd


def weight_bytes(cfg: common.Config, precision: str) -> float:
    """What one decode step reads at least: every weight once (bfloat16 operands read cast copies)."""
    return float(common.param_count(cfg) * (2 if compute_dtype(precision) == "bfloat16" else 4))


def record_checks(ctx: Context, tokens: Any, cached: Any, full: Any) -> None:
    """The generation checks from float32 greedy decoding: `tokens` (batch, new), `cached` the logits each
    step chose from (batch, new, vocab), `full` the uncached forward pass's logits at the same positions."""
    import numpy as np

    tokens, cached, full = (np.asarray(a) for a in (tokens, cached, full))
    ctx.check("generated_tokens", [int(t) for t in tokens.reshape(-1)])
    corner = cached[0, : inference.GENERATE_STEPS, : inference.GENERATE_LOGITS]
    ctx.check("generate_logits", [float(v) for v in corner.reshape(-1)])
    scale = float(np.max(np.abs(full))) or 1.0
    ctx.check("kv_cache_error", float(np.max(np.abs(cached.astype(np.float64) - full))) / scale)
    order = np.sort(cached, axis=-1)
    margin = float(np.min(order[..., -1] - order[..., -2]))
    ctx.note(f"greedy choices: the smallest gap between the top two logits was {margin:.3g} (ties would be ambiguous)")


def generate(ctx: Context, cfg: common.Config, prefill: Callable[[], Any], decode: Callable[[], Any]) -> None:
    """The timed generation (runtime/inference.py `generate`) of a framework's prefill and decode step, with
    the figures both frameworks declare alike: forward FLOPs per token over the whole cache, and the weights'
    bytes a decode step reads."""
    from suites.runtime import inference as loop

    batch, prompt_len, new = shape(ctx)
    loop.generate(
        ctx,
        loop.Decoder(
            prefill=prefill,
            decode=decode,
            batch=batch,
            prompt_len=prompt_len,
            new_tokens=new,
            flops_per_token=forward_flops(cfg, prompt_len + new),
            weight_bytes=weight_bytes(cfg, ctx.precision),
            dtype=compute_dtype(ctx.precision),
        ),
    )


def infer(ctx: Context, cfg: common.Config, request: Callable[[int], Any], how: str) -> None:
    """The inference loop (runtime/inference.py `run`) over a framework's `request(batch)`: whole sequences,
    one forward pass's FLOPs each, in the job's compute dtype."""
    from suites.runtime import inference as loop

    model = loop.Model(
        request=request,
        unit="sequences",
        flops_per_row=forward_flops(cfg, cfg.block_size) * cfg.block_size,
        dtype=compute_dtype(ctx.precision),
        description=f"the model's logits over {cfg.block_size} tokens per sequence{how}",
    )
    loop.run(ctx, model)
