"""A GPT decoder trained on byte-level text in Flax and PyTorch: tokens/s, MFU and time to a loss.

The model, data, optimiser and schedule are defined once in common.py; both implementations load
the same NumPy-drawn initial weights and draw the same batches. The timed unit is an interval of
`steps` optimiser steps (one clock each; interval 1 holds the compilation), see README.md.
"""

from suites.contract import inference, ranks
from suites.contract.spec import CheckSpec, Param, ParamValue, SuiteSpec
from suites.contract.training_spec import first_step_specs

DATASETS = ("shakespeare", "tinyshakespeare", "synthetic")
# A preset's model shape; the resolved parameters carry it (SPEC.derive), so a run's header, plan and
# result say 12 layers, not the defaults it overrode.
PRESET_SHAPES: dict[str, dict[str, ParamValue]] = {
    "gpt2-small": {"n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024}
}
PRESETS = ("none", *PRESET_SHAPES)
VARIANTS = ("default", "compiled")
ATTENTION = ("fused", "manual")

PARAMS = (
    Param(
        "dataset",
        "str",
        "shakespeare",
        "shakespeare: tiny Shakespeare (1 115 394 bytes of the plays) shipped with the suite, no download; "
        "tinyshakespeare: the same text from the data folder (`harness data fetch tinyshakespeare`); "
        "synthetic: random bytes from the seed (tests only: there is nothing to learn)",
        choices=DATASETS,
    ),
    Param(
        "preset",
        "str",
        "none",
        "none: the model of n_layer/n_head/n_embd/block_size; gpt2-small: 12 layers, 12 heads, 768 wide, "
        "1024 context (GPU; leave the four shape parameters at their defaults)",
        choices=PRESETS,
    ),
    Param("n_layer", "int", 4, "transformer blocks", min=1, max=96),
    Param("n_head", "int", 4, "attention heads (must divide n_embd)", min=1, max=128),
    Param("n_embd", "int", 128, "model width", min=8, max=16384),
    Param("block_size", "int", 128, "context length in bytes (tokens)", min=4, max=16384),
    Param("batch_size", "int", 16, "sequences per optimiser step", min=1, max=4096),
    Param("dropout", "float", 0.0, "dropout rate (0: the frameworks can agree step by step)", min=0.0, max=0.9),
    Param("intervals", "int", 6, "timed intervals (interval 1, with compilation, is reported apart)", min=2, max=1000),
    Param("steps", "int", 50, "optimiser steps per interval", min=1, max=100_000),
    Param("lr", "float", 1e-3, "peak learning rate of the warm-up + cosine schedule", min=0.0, max=1.0),
    Param("warmup_steps", "int", 30, "linear warm-up steps", min=0, max=1_000_000),
    Param("min_lr_ratio", "float", 0.1, "learning rate at the end of the cosine, as a share of lr", min=0.0, max=1.0),
    Param(
        "weight_decay", "float", 0.1, "AdamW weight decay on the matrices (not biases or LayerNorm)", min=0.0, max=1.0
    ),
    Param("grad_clip", "float", 1.0, "clip the gradients' global norm to this (0: off)", min=0.0, max=1e6),
    Param(
        "eval_windows",
        "int",
        64,
        "validation windows of block_size bytes evaluated per curve point",
        min=1,
        max=100_000,
    ),
    Param(
        "target_loss",
        "float",
        0.0,
        "time to target: evaluate after every interval (outside the clock) and stop at the first validation loss "
        "at or below this (nats per byte); 0: off",
        min=0.0,
        max=100.0,
    ),
    Param("curve", "bool", True, "learning curve: validation loss after every interval, outside the training clock"),
    Param(
        "attention",
        "str",
        "fused",
        "fused: the framework's fused attention (torch scaled_dot_product_attention, jax.nn.dot_product_attention); "
        "manual: written out (einsum, causal mask, softmax, einsum)",
        choices=ATTENTION,
    ),
    Param(
        "variant",
        "str",
        "default",
        "default: flax jax.jit of one train step, pytorch eager; compiled: flax the same jit, pytorch "
        "torch.compile of the model (JAX always compiles: there is no fair eager JAX transformer)",
        choices=VARIANTS,
    ),
    Param("seed", "int", 42, "seed of the initial weights, the batches and synthetic data", min=0, max=2**31 - 1),
    *inference.mode_params(modes=(*inference.MODES, inference.GENERATE), max_batch=64),
    Param("prompt_len", "int", 64, "generate: prompt tokens (bytes of the validation text)", min=1, max=16384),
    Param("new_tokens", "int", 64, "generate: tokens generated greedily after each prompt", min=1, max=16384),
    Param("gen_batch", "int", 1, "generate: prompts decoded together (1: a single user's latency)", min=1, max=4096),
    *ranks.parallel_params(),
)

# Measured flax vs pytorch (CPU, float32, the smoke and default models): the first step's loss
# 1e-7 apart, the weights' step sizes 2e-5; the first 8 losses drift apart by < 1e-5 relative.
# A learning rate 0.1 % off, Adam's beta2 0.999 for 0.99 or clipping off all fail these.
FIRST_STEP_LOSS, FIRST_STEP_WEIGHTS = first_step_specs()

SHAPE = ("n_layer", "n_head", "n_embd", "block_size")


def shape_problem(values: dict[str, ParamValue]) -> str | None:
    """A preset's shape must not be overruled silently, and the heads must divide the width."""
    if values["preset"] != "none":
        preset = PRESET_SHAPES[str(values["preset"])]
        # the preset's own values are accepted: a stored plan or result re-resolves what derive wrote
        changed = [p.name for p in PARAMS if p.name in SHAPE and values[p.name] not in (p.default, preset[p.name])]
        if changed:
            return f"preset={values['preset']} sets {', '.join(changed)}: leave them out, or use --param preset=none"
        return _generation_problem(values, preset) or ranks.batch_problem(values)
    width, heads = values["n_embd"], values["n_head"]
    if isinstance(width, int) and isinstance(heads, int) and width % heads:
        return f"n_embd={width} is not a multiple of n_head={heads}: pick a head count that divides the width"
    return _generation_problem(values, values) or ranks.batch_problem(values)


def _generation_problem(values: dict[str, ParamValue], shape: dict[str, ParamValue]) -> str | None:
    """A generation must fit the context the position embeddings cover; inference runs on one device."""
    problem = inference.mode_problem(values)
    if problem or values.get("mode") != inference.GENERATE:
        return problem
    prompt, new, block = values["prompt_len"], values["new_tokens"], shape["block_size"]
    if isinstance(prompt, int) and isinstance(new, int) and isinstance(block, int) and prompt + new > block:
        return (
            f"prompt_len={prompt} + new_tokens={new} is more than block_size={block} positions: shorten them "
            "(the model has position embeddings for block_size tokens)"
        )
    return None


def preset_shape(values: dict[str, ParamValue]) -> dict[str, ParamValue]:
    return dict(PRESET_SHAPES.get(str(values["preset"]), {}))


SPEC = SuiteSpec(
    name="gpt",
    precision_axis=True,
    description=(
        "GPT decoder on byte-level text: pre-LayerNorm blocks of causal self-attention and a 4x GELU MLP, tied "
        "output; AdamW, warm-up + cosine, gradient clipping; tokens/s, MFU (6N + attention FLOPs per token), "
        "validation loss and bits per byte"
    ),
    frameworks=("flax", "pytorch"),
    params=PARAMS,
    checks=(
        FIRST_STEP_LOSS,
        FIRST_STEP_WEIGHTS,
        CheckSpec(
            "loss_curve",
            "float32 training loss of the first 8 steps from the shared initial weights on the shared batches",
            rtol=1e-4,
            atol=1e-5,
        ),
        CheckSpec("param_count", "trainable parameters (the same model must give the same count)", rtol=0.0),
        CheckSpec(
            "initial_logits",
            "logits of the shared initial weights, first sequence, first 4 positions (float32)",
            rtol=1e-3,
            atol=1e-5,
        ),
        CheckSpec(
            "val_loss",
            "validation loss after the last interval (nats per byte); the runs drift apart over hundreds of steps",
            rtol=0.03,
        ),
        *ranks.parallel_checks(),
        # mode=infer: the forward pass's logits of the shared weights (the initial_logits tolerance).
        *inference.infer_checks(rtol=1e-3, atol=1e-5),
        # mode=generate: greedy tokens equal; the cached logits to the initial logits' tolerance, and within
        # each framework the cache against the uncached forward pass (float32, another summation order).
        *inference.generate_checks(logits_rtol=1e-3, logits_atol=1e-5, cache_limit=1e-4),
    ),
    # The train step's FLOPs are the model's (6N + attention), so its share of peak is the MFU.
    peak_shares={"train step": "MFU"},
    constraint=shape_problem,
    derive=preset_shape,
    unsupported={"numpy": "NumPy has no automatic differentiation to train a transformer with"},
    repeat=1,  # not used: intervals of optimiser steps are timed (see `intervals`)
    warmup=0,
    timeout_s=4 * 3600.0,
    smoke={
        "n_layer": 2,
        "n_head": 2,
        "n_embd": 32,
        "block_size": 32,
        "batch_size": 4,
        "intervals": 2,
        "steps": 3,
        "warmup_steps": 2,
        "eval_windows": 4,
        "prompt_len": 8,
        "new_tokens": 8,
        **ranks.PARALLEL_SMOKE,
        **inference.INFERENCE_SMOKE,
    },
)
