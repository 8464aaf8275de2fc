"""The inference loop every model suite's `mode=infer` runs (framework-free; the suite gives the model).

1. Latency at batch 1: `requests` single requests through `Context.measure`, each its own clock ended
   by the framework's synchronisation. The metric's first call is the cold request after load (trace,
   compile, first allocation), apart from the steady ones; a few untimed requests follow it so the
   steady samples start warm. Its p90, p99 and max are recorded as value metrics derived from it (p50 is
   its median),
   one number per process: pooled rounds give one per round, so `compare` and `ab` judge a tail
   between processes exactly as they judge a median.
2. Throughput against batch size: batch 1 (the requests above), then SWEEP_FACTOR times larger up to
   `max_batch`, each timed SWEEP_REPEAT times; samples/s at each is derived from its times. The sweep
   ends early where the device has no memory for a batch (the suite says which errors mean that), or
   where one call takes longer than SWEEP_CALL_CAP_S (a CPU would otherwise spend minutes on batch 512),
   and the result says where and why.
3. Generation (`mode=generate`, language models; `generate`): time to first token (the prompt batch's
   prefill into a fresh KV cache, and the first token chosen), then `requests` single decode steps,
   each its own clock: per-token latency percentiles as above, and decode tokens/s. A decode step
   declares the bytes of the weights it reads, so the bandwidth lint holds it to the memory system's
   ceiling (at batch 1 reading the weights once per token is what bounds decoding).

The result's `inference` block names each metric, so the host never parses metric names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from suites.contract import inference as contract
from suites.runtime.context import Context

TTFT = "time to first token"
DECODE = "decode step"
DECODE_RATE = "decode tokens/s"
PREFILL_REPEAT = 20  # timed prefills: a decode step's tail needs hundreds, time to first token a median
WARM_REQUESTS = 10  # untimed requests between the cold one and the samples (at most a tenth of them)
SWEEP_REPEAT = 10  # timed calls per batch size of the sweep
SWEEP_CALL_CAP_S = 2.0  # a batch whose one call takes longer ends the sweep (larger ones would take longer)


def out_of_memory(error: BaseException) -> bool:
    """Whether an error says the device had no memory for a batch: Python's MemoryError, PyTorch's
    OutOfMemoryError (by name: the loop imports no framework), XLA's RESOURCE_EXHAUSTED."""
    return (
        isinstance(error, MemoryError)
        or type(error).__name__ == "OutOfMemoryError"
        or "RESOURCE_EXHAUSTED" in str(error)
    )


@dataclass(frozen=True)
class Model:
    """What a suite hands the loop: `request(b)` prepares a batch of `b` rows on the device (outside
    every clock) and returns the call that runs the model on it, in evaluation mode without gradients."""

    request: Callable[[int], Callable[[], Any]]
    unit: str  # what one row is: "images", "sequences"
    flops_per_row: float | None = None
    dtype: str | None = None
    out_of_memory: Callable[[BaseException], bool] = lambda error: out_of_memory(error)
    description: str = "the model on one prepared input, evaluation mode, no gradients"


@dataclass(frozen=True)
class Decoder:
    """What a language-model suite hands `generate`: `prefill()` runs the prompt batch through the model
    into a fresh KV cache and returns the first new token; `decode()` runs one step from the last token
    at the next position (wrapping round to the first new position after `new_tokens`, so any number of
    steps stays inside the cache and every one costs what a step of a real generation costs)."""

    prefill: Callable[[], Any]
    decode: Callable[[], Any]
    batch: int
    prompt_len: int
    new_tokens: int
    flops_per_token: float | None = None
    weight_bytes: float | None = None  # read once per decode step: what bounds it at batch 1
    dtype: str | None = None


def latency_names(metric: str = contract.LATENCY) -> dict[str, str]:
    """Percentile name -> the metric that holds it, per process: p50 is the latency metric itself (its
    median, by the same interpolation), the others value metrics derived from it."""
    if metric == contract.LATENCY:
        names = {label: f"latency {label} (batch 1)" for label, _ in contract.PERCENTILES}
        names["max"] = "latency max (batch 1)"
    else:
        names = {label: f"{metric} {label}" for label, _ in contract.PERCENTILES} | {"max": f"{metric} max"}
    return names | {"p50": metric}


def _percentiles(ctx: Context, metric: str, what: str) -> dict[str, str]:
    """`metric`'s p90, p99 and max as value metrics derived from it, one number per process (its p50 is its
    median: a metric of its own would be the same row twice in every comparison, and one more test in its
    family)."""
    samples = _samples(ctx, metric)
    names = latency_names(metric)
    for label, q in contract.PERCENTILES:
        if names[label] != metric:
            ctx.value(names[label], contract.percentile(samples, q), unit="s", better="lower", derived_from=metric,
                      description=f"{label} of {what}")  # fmt: skip
    ctx.value(names["max"], max(samples), unit="s", better="lower", derived_from=metric,
              description=f"the slowest of {what} (the cold one is its first call)")  # fmt: skip
    return names


def generate(ctx: Context, decoder: Decoder) -> None:
    """Time to first token (the prefill, `PREFILL_REPEAT` times), then `requests` decode steps one by one:
    per-token latency percentiles and decode tokens/s; records the metrics and `ctx.inference`."""
    steps = int(ctx.params["requests"])
    ctx.progress(f"generation: prefill of {decoder.batch} x {decoder.prompt_len} tokens, then {steps} decode steps")
    ctx.measure(
        TTFT,
        decoder.prefill,
        repeat=PREFILL_REPEAT,
        warmup=1,
        flops=None if decoder.flops_per_token is None else decoder.flops_per_token * decoder.batch * decoder.prompt_len,
        dtype=decoder.dtype,
        description=f"time to first token: the prompt batch ({decoder.batch} x {decoder.prompt_len} tokens) through "
        "the model into a fresh KV cache, and the first token chosen",
    )
    decoder.prefill()  # the cache holds the prompt before the first timed step
    ctx.measure(
        DECODE,
        decoder.decode,
        repeat=steps,
        warmup=min(WARM_REQUESTS, max(1, steps // 10)),
        flops=None if decoder.flops_per_token is None else decoder.flops_per_token * decoder.batch,
        bytes_moved=decoder.weight_bytes,
        dtype=decoder.dtype,
        description=f"one decode step: {decoder.batch} token(s) from the KV cache, greedy; first call = its compilation",
    )
    names = _percentiles(ctx, DECODE, "the decode steps' latency (per token)")
    ctx.value(DECODE_RATE, [decoder.batch / s for s in _samples(ctx, DECODE)], unit="tokens/s", derived_from=DECODE,
              description=f"tokens generated per second at batch {decoder.batch}")  # fmt: skip
    ctx.inference = {
        "mode": contract.GENERATE,
        "unit": "tokens",
        "latency": {"metric": DECODE, "percentiles": names},
        "sweep": [],
        "stopped": None,
        "generate": {
            "prefill": TTFT,
            "decode_rate": DECODE_RATE,
            "batch": decoder.batch,
            "prompt_len": decoder.prompt_len,
            "new_tokens": decoder.new_tokens,
        },
    }


def throughput_name(batch: int) -> str:
    return f"throughput (batch {batch})"


def time_name(batch: int) -> str:
    return contract.LATENCY if batch == 1 else f"inference (batch {batch})"


def run(ctx: Context, model: Model) -> None:
    """Latency at batch 1, then the throughput sweep; records the metrics and `ctx.inference`."""
    requests = int(ctx.params["requests"])
    ctx.progress(
        f"inference: {requests} single requests at batch 1, then a sweep up to batch {ctx.params['max_batch']}"
    )
    ctx.measure(
        contract.LATENCY,
        model.request(1),
        repeat=requests,
        warmup=min(WARM_REQUESTS, max(1, requests // 10)),
        flops=model.flops_per_row,
        dtype=model.dtype,
        description=f"one request at batch 1: {model.description}; first call = the cold request after load",
    )
    names = _percentiles(ctx, contract.LATENCY, "the single requests' latency")
    sweep: list[dict[str, Any]] = []
    stopped: str | None = None
    for batch in contract.sweep(int(ctx.params["max_batch"])):
        timed = time_name(batch)
        if batch > 1:
            try:
                ctx.measure(
                    timed,
                    model.request(batch),
                    repeat=SWEEP_REPEAT,
                    warmup=1,
                    flops=None if model.flops_per_row is None else model.flops_per_row * batch,
                    dtype=model.dtype,
                    description=f"one call at batch {batch}: {model.description}",
                )
            except Exception as error:
                if not model.out_of_memory(error):
                    raise
                stopped = f"batch {batch}: out of device memory ({type(error).__name__})"
                ctx.progress(f"inference sweep stopped at {stopped}")
                break
        ctx.value(throughput_name(batch), [batch / s for s in _samples(ctx, timed)], unit=f"{model.unit}/s",
                  derived_from=timed, description=f"{model.unit} per second at batch {batch}")  # fmt: skip
        sweep.append({"batch": batch, "time": timed, "throughput": throughput_name(batch)})
        median = _median(ctx, timed)
        if median > SWEEP_CALL_CAP_S and batch < int(ctx.params["max_batch"]):
            stopped = (
                f"batch {batch}: one call took {median:.3g} s (over {SWEEP_CALL_CAP_S:g} s, larger batches not timed)"
            )
            ctx.progress(f"inference sweep stopped at {stopped}")
            break
    ctx.inference = {
        "mode": "infer",
        "unit": model.unit,
        "latency": {"metric": contract.LATENCY, "percentiles": names},
        "sweep": sweep,
        "stopped": stopped,
        "generate": None,
    }


def _metric(ctx: Context, name: str) -> dict[str, Any]:
    return next(m for m in ctx.metrics if m["name"] == name)


def _samples(ctx: Context, name: str) -> list[float]:
    return list(_metric(ctx, name)["samples"])


def _median(ctx: Context, name: str) -> float:
    return float(_metric(ctx, name)["stats"]["median"])
