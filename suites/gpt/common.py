"""What both GPT implementations share: the model's shape and initial weights, the data and the
batches, the optimiser's schedule, the FLOP count, and the metrics they record.

Everything here is made once with NumPy (imported inside the functions) and handed to both
frameworks, so they start from the same weights, draw the same windows of the same bytes and
follow the same learning-rate at every step.
"""

from __future__ import annotations

import hashlib
import lzma
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suites.contract import datasets
from suites.contract.errors import JobError
from suites.contract.settings import compute_dtype
from suites.gpt.spec import SHAPE
from suites.runtime import training
from suites.runtime.context import Context

VOCAB = 256  # bytes: no tokenizer, the same tokens in every framework
BETAS = (0.9, 0.95)  # nanoGPT's and GPT-3's
EPS = 1e-8
INIT_STD = 0.02  # GPT-2's; the residual projections are scaled by 1/sqrt(2 n_layer)
PROBE_STEPS = 8  # the loss_curve check: the first optimiser steps, in float32
PROBE_POSITIONS, PROBE_LOGITS = 4, 32  # the initial_logits check: a corner of the first sequence's logits

CORPUS = Path(__file__).resolve().parent / "corpus" / "tinyshakespeare.txt.xz"
# tiny Shakespeare (Karpathy's char-rnn extract of the plays, public domain): 1 115 394 bytes.
CORPUS_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
SYNTHETIC_BYTES = (65_536, 8_192)


@dataclass(frozen=True)
class Config:
    """One job's model and training schedule, as both frameworks read it."""

    n_layer: int
    n_head: int
    n_embd: int
    block_size: int
    batch: int
    dropout: float
    intervals: int
    steps: int
    lr: float
    warmup: int
    min_lr_ratio: float
    weight_decay: float
    grad_clip: float
    eval_windows: int
    attention: str
    variant: str
    seed: int

    @property
    def total_steps(self) -> int:
        return self.intervals * self.steps

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.block_size

    @property
    def title(self) -> str:
        return (
            f"GPT {self.n_layer} layers x {self.n_head} heads x {self.n_embd} wide, context {self.block_size}, "
            f"byte vocabulary, {self.attention} attention"
        )


def config(ctx: Context) -> Config:
    """The job's Config; the spec's constraint (spec.shape_problem) has checked the shape parameters."""
    p = ctx.params
    # resolved parameters (SuiteSpec.resolve, in the host and again in the job) carry a preset's shape
    shape = {k: int(p[k]) for k in SHAPE}
    return Config(
        **shape,
        batch=int(p["batch_size"]),
        dropout=float(p["dropout"]),
        intervals=int(p["intervals"]),
        steps=int(p["steps"]),
        lr=float(p["lr"]),
        warmup=int(p["warmup_steps"]),
        min_lr_ratio=float(p["min_lr_ratio"]),
        weight_decay=float(p["weight_decay"]),
        grad_clip=float(p["grad_clip"]),
        eval_windows=int(p["eval_windows"]),
        attention=str(p["attention"]),
        variant=str(p["variant"]),
        seed=int(p["seed"]),
    )


# ---------------------------------------------------------------------------------------------
# The model's parameters, by one name per tensor. Matrices in (in, out) layout (Flax's); PyTorch's
# Linear stores (out, in) and transposes on load.


def shapes(cfg: Config) -> dict[str, tuple[int, ...]]:
    d = cfg.n_embd
    found: dict[str, tuple[int, ...]] = {"wte": (VOCAB, d), "wpe": (cfg.block_size, d)}
    for i in range(cfg.n_layer):
        found.update(
            {
                f"h{i}.ln1.scale": (d,), f"h{i}.ln1.bias": (d,),
                f"h{i}.attn.qkv.kernel": (d, 3 * d), f"h{i}.attn.qkv.bias": (3 * d,),
                f"h{i}.attn.proj.kernel": (d, d), f"h{i}.attn.proj.bias": (d,),
                f"h{i}.ln2.scale": (d,), f"h{i}.ln2.bias": (d,),
                f"h{i}.mlp.fc.kernel": (d, 4 * d), f"h{i}.mlp.fc.bias": (4 * d,),
                f"h{i}.mlp.proj.kernel": (4 * d, d), f"h{i}.mlp.proj.bias": (d,),
            }
        )  # fmt: skip
    found.update({"ln_f.scale": (d,), "ln_f.bias": (d,)})
    return found


def decayed(name: str) -> bool:
    """AdamW's weight decay applies to the matrices (embeddings and kernels), not to biases or
    LayerNorm: nanoGPT's groups, which are every tensor with 2 or more dimensions (how optax's mask
    in impl_flax.py picks them: the same set)."""
    return name in ("wte", "wpe") or name.endswith(".kernel")


def param_count(cfg: Config) -> int:
    return sum(math.prod(s) for s in shapes(cfg).values())


def initial_weights(cfg: Config) -> dict[str, Any]:
    """GPT-2's initialisation, drawn once with NumPy: normal(0, 0.02) matrices, the residual
    projections' scaled by 1/sqrt(2 n_layer), zero biases, unit LayerNorm scales."""
    import numpy as np

    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0x6A7]))
    weights: dict[str, Any] = {}
    for name, shape in shapes(cfg).items():
        if name.endswith(".scale"):
            w = np.ones(shape)
        elif name.endswith(".bias"):
            w = np.zeros(shape)
        else:
            std = INIT_STD / math.sqrt(2 * cfg.n_layer) if name.endswith("proj.kernel") else INIT_STD
            w = rng.normal(0.0, std, size=shape)
        weights[name] = w.astype(np.float32)
    return weights


def flops_per_token(cfg: Config) -> float:
    """Training FLOPs per token, PaLM's appendix B: 6 N (forward and backward through every weight
    matrix, the tied output projection included; position embeddings are a lookup, not a matmul)
    plus 12 L T d for attention's scores and weighted sum (counted as if unmasked, as PaLM does)."""
    n = param_count(cfg) - cfg.block_size * cfg.n_embd
    return 6.0 * n + 12.0 * cfg.n_layer * cfg.block_size * cfg.n_embd


def lr_at(step: int, cfg: Config) -> float:
    """The learning rate of optimiser step `step` (0-based): linear warm-up to `lr` over `warmup`
    steps, then a cosine down to `lr * min_lr_ratio` at the last step (nanoGPT's schedule)."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / (cfg.warmup + 1)
    span = max(cfg.total_steps - cfg.warmup, 1)
    progress = min((step - cfg.warmup) / span, 1.0)
    low = cfg.lr * cfg.min_lr_ratio
    return low + 0.5 * (1.0 + math.cos(math.pi * progress)) * (cfg.lr - low)


def schedule(cfg: Config) -> list[float]:
    """Every step's learning rate, one list both optimisers read (probe steps past the end repeat the last)."""
    return [lr_at(s, cfg) for s in range(max(cfg.total_steps, PROBE_STEPS))]


# ---------------------------------------------------------------------------------------------
# Data: bytes are the tokens.


def bundled_corpus() -> bytes:
    """The text shipped with the suite, checked against its pinned digest (a corrupted checkout fails here)."""
    try:
        data = lzma.decompress(CORPUS.read_bytes())
    except (OSError, lzma.LZMAError) as error:
        raise JobError(f"{CORPUS} is unreadable ({error}): restore it from the repository") from None
    if hashlib.sha256(data).hexdigest() != CORPUS_SHA256:
        raise JobError(f"{CORPUS} does not hold tiny Shakespeare (sha256 differs): restore it from the repository")
    return data


def load(ctx: Context, cfg: Config) -> datasets.TextData:
    """The train and validation bytes (90 % / 10 %, in text order), recorded in the result."""
    import numpy as np

    name = str(ctx.params["dataset"])
    if name == "shakespeare":
        train, val = (np.frombuffer(part, np.uint8) for part in datasets.text_split(bundled_corpus()))
        record = {"name": name, "origin": "bundled", "repo": None, "revision": f"sha256 {CORPUS_SHA256}",
                  "what": "tiny Shakespeare, shipped with the suite (suites/gpt/corpus)"}  # fmt: skip
        text = datasets.TextData(train, val, "tiny Shakespeare (bundled)", record)
    elif name == datasets.SYNTHETIC:
        rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0x7E7]))
        n, m = SYNTHETIC_BYTES
        drawn = rng.integers(0, VOCAB, size=n + m, dtype=np.uint8)
        what = datasets.synthetic_record("uniform random bytes", cfg.seed)
        text = datasets.TextData(drawn[:n], drawn[n:], "synthetic bytes", what)
    else:
        text = datasets.fetched_text(ctx.data_dir, name)
    if min(len(text.train), len(text.test)) <= cfg.block_size + 1:
        raise JobError(
            f"block_size={cfg.block_size} needs more than {cfg.block_size + 1} bytes in each split "
            f"({len(text.train)} train, {len(text.test)} validation): use a smaller block_size"
        )
    ctx.dataset = datasets.describe_text(text)
    fingerprint = ctx.dataset["used_fingerprint"]
    ctx.note(f"data: {text.source}; {len(text.train)} train, {len(text.test)} validation bytes; "
             f"fingerprint {fingerprint[:16]}")  # fmt: skip
    return text


def offsets(cfg: Config, n_train: int) -> Any:
    """(intervals, steps, batch) int32 start offsets of every training window, drawn once: both
    frameworks train on the same windows in the same order. A window is block_size + 1 bytes
    (inputs and the next-byte targets)."""
    import numpy as np

    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0x0FF5]))
    high = n_train - cfg.block_size - 1
    return rng.integers(0, high + 1, size=(cfg.intervals, cfg.steps, cfg.batch), dtype=np.int64).astype(np.int32)


def parallel_rows(cfg: Config, train: Any, step: int, n: int) -> tuple[Any, Any]:
    """The data-parallel loop's batch of `step` (suites/runtime/data_parallel.py): its first n windows,
    inputs and next-byte targets, drawn from (seed, step) so every N and the 1-way step see one batch."""
    import numpy as np

    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0xD9, step]))
    starts = rng.integers(0, len(train) - cfg.block_size - 1 + 1, size=n)
    rows = train[starts[:, None] + np.arange(cfg.block_size + 1)].astype(np.int64)
    return np.ascontiguousarray(rows[:, :-1]), np.ascontiguousarray(rows[:, 1:])


def parallel_lrs(cfg: Config, steps: int) -> list[float]:
    """Every step's learning rate in the data-parallel loop, one list both optimisers read."""
    return [lr_at(s, cfg) for s in range(steps)]


def val_offsets(cfg: Config, n_val: int) -> Any:
    """Start offsets of the validation windows: consecutive, non-overlapping, from the split's start."""
    import numpy as np

    fit = (n_val - 1) // cfg.block_size
    return np.arange(min(cfg.eval_windows, fit), dtype=np.int32) * cfg.block_size


# ---------------------------------------------------------------------------------------------
# What both loops record.


def train(
    ctx: Context,
    cfg: Config,
    *,
    run_interval: Any,
    read: Any,
    compilations: Any,
    evaluate: Any,
) -> training.History:
    """`intervals` clocks of `steps` optimiser steps each (runtime/training.py's loop, evaluating
    the validation loss outside the clock); `read(out)` is the interval's mean training loss."""
    target = float(ctx.params.get("target_loss", 0.0) or 0.0)
    return training.train(
        ctx, epochs=cfg.intervals, run_epoch=run_interval, read=lambda out: (read(out), 0.0),
        samples_per_epoch=cfg.steps * cfg.tokens_per_step, compilations=compilations, evaluate=evaluate,
        target=target if target > 0 else None, curve=bool(ctx.params.get("curve", True)), loss=True,
    )  # fmt: skip


def record(ctx: Context, cfg: Config, history: training.History, *, first_step: float, variant: str) -> None:
    """Every metric of a GPT job, the same names in both frameworks."""
    if history.steady:
        _record_speed(ctx, cfg, history, first_step=first_step, variant=variant)
    else:  # the target was reached in interval 1: there is no steady interval to report
        ctx.note("one interval only (target reached in interval 1): step time and tokens/s not reported")
    ctx.value("first interval", history.first.seconds, unit="s", better="lower",
              description=f"interval 1: {cfg.steps} steps with the compilation")  # fmt: skip
    ctx.value("train loss (last interval)", history.epochs[-1].loss, unit="nats/byte", better="lower",
              description="mean training loss over the last interval's steps")  # fmt: skip
    training.record_compilations(ctx, history)
    ctx.note("train loss per interval: " + " ".join(f"{e.loss:.4f}" for e in history.epochs))
    ctx.note(f"model FLOPs per token {flops_per_token(cfg):.4g} (6N + 12 L T d), {param_count(cfg):,} parameters")
    evals = history.evaluations
    curve = {
        "epoch_seconds": [e.seconds for e in history.epochs],
        "train_loss": [e.loss for e in history.epochs],
        "val_loss": [v.accuracy for v in evals],
        "evaluation_seconds": [v.seconds for v in evals],
        "seed": cfg.seed,
    }
    ctx.training["curves"] = [curve]
    if history.target is not None:
        training.record_target(ctx, history, training.LOSS)


def _record_speed(ctx: Context, cfg: Config, history: training.History, *, first_step: float, variant: str) -> None:
    """Step time (with the model FLOPs the host turns into MFU) and tokens/s of the steady intervals."""
    steady = history.steady
    ctx.record_time(
        "train step",
        first_call=first_step,
        samples=[e.seconds / cfg.steps for e in steady],
        flops=flops_per_token(cfg) * cfg.tokens_per_step,
        dtype=compute_dtype(ctx.precision),
        description=(
            f"one optimiser step of {cfg.tokens_per_step} tokens, the mean of each interval of {cfg.steps} after "
            "the first; first call = the first step alone (trace, compile); FLOPs are the model's (6N + attention, "
            "PaLM), so the share of peak is the model FLOPs utilisation (MFU)"
        ),
        probes=[e.probe for e in steady],
        first_probe=history.first.probe,
        variant=variant,
        **history.guarded(),  # interval i's readings and compilations belong to sample i
    )
    ctx.value(
        "tokens/s",
        [cfg.steps * cfg.tokens_per_step / e.seconds for e in steady],
        unit="tokens/s",
        description="training tokens per second in the intervals after the first",
        derived_from="train step",
    )


def record_val_loss(ctx: Context, loss: float) -> None:
    ctx.value("validation loss", loss, unit="nats/byte", better="lower",
              description="mean next-byte cross-entropy on the validation windows after the last interval")  # fmt: skip
    ctx.value("bits per byte", loss / math.log(2), unit="bits/byte", better="lower",
              description="the validation loss in bits: loss / ln 2")  # fmt: skip
    ctx.check("val_loss", loss)
    ctx.progress(f"validation loss {loss:.4f} ({loss / math.log(2):.3f} bits per byte)")


def probe_checks(ctx: Context, *, logits: Any, losses: list[float], loss_after: float, before: Any, after: Any,
                 cfg: Config, n_params: int) -> None:  # fmt: skip
    """The agreement checks from the float32 probe run (both loops run the same probe): the initial
    logits, the first step's loss and weights, the first PROBE_STEPS losses."""
    ctx.check("initial_logits", [float(v) for row in logits for v in row])
    training.first_step_checks(ctx, loss_before=losses[0], loss_after=loss_after, before=before, after=after,
                               order=list(shapes(cfg)), lr=lr_at(0, cfg))  # fmt: skip
    ctx.check("loss_curve", losses)
    ctx.check("param_count", n_params)
    ctx.progress("float32 probe, first steps' loss: " + " ".join(f"{v:.5f}" for v in losses))
