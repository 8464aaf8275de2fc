"""The inference loop every model suite's `mode=infer` runs (framework-free; the suite gives the model).

1. Latency at batch 1: `requests` single requests through `Context.measure`, each its own clock ended
   by the framework's synchronisation. The metric's first call is the cold request after load (trace,
   compile, first allocation), apart from the steady ones; a few untimed requests follow it so the
   steady samples start warm. Its p50, p90, p99 and max are recorded as value metrics derived from it,
   one number per process: pooled rounds give one per round, so `compare` and `ab` judge a tail
   between processes exactly as they judge a median.
2. Throughput against batch size: batch 1 (the requests above), then SWEEP_FACTOR times larger up to
   `max_batch`, each timed SWEEP_REPEAT times; samples/s at each is derived from its times. The sweep
   ends early where the device has no memory for a batch (the suite says which errors mean that), or
   where one call takes longer than SWEEP_CALL_CAP_S (a CPU would otherwise spend minutes on batch 512),
   and the result says where and why.

The result's `inference` block names each metric, so the host never parses metric names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from suites.contract import inference as contract
from suites.runtime.context import Context

WARM_REQUESTS = 10  # untimed requests between the cold one and the samples (at most a tenth of them)
SWEEP_REPEAT = 10  # timed calls per batch size of the sweep
SWEEP_CALL_CAP_S = 2.0  # a batch whose one call takes longer ends the sweep (larger ones would take longer)


@dataclass(frozen=True)
class Model:
    """What a suite hands the loop: `request(b)` prepares a batch of `b` rows on the device (outside
    every clock) and returns the call that runs the model on it, in evaluation mode without gradients."""

    request: Callable[[int], Callable[[], Any]]
    unit: str  # what one row is: "images", "sequences"
    flops_per_row: float | None = None
    dtype: str | None = None
    out_of_memory: Callable[[BaseException], bool] = lambda error: isinstance(error, MemoryError)
    description: str = "the model on one prepared input, evaluation mode, no gradients"


def latency_names() -> dict[str, str]:
    """The value metrics derived from the batch-1 latency: percentile name -> metric name."""
    names = {label: f"latency {label} (batch 1)" for label, _ in contract.PERCENTILES}
    return names | {"max": "latency max (batch 1)"}


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
    samples = _samples(ctx, contract.LATENCY)
    names = latency_names()
    for label, q in contract.PERCENTILES:
        ctx.value(names[label], contract.percentile(samples, q), unit="s", better="lower",
                  derived_from=contract.LATENCY, description=f"{label} of the single requests' latency")  # fmt: skip
    ctx.value(names["max"], max(samples), unit="s", better="lower", derived_from=contract.LATENCY,
              description="the slowest single request (the cold one is its first call)")  # fmt: skip
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
    }


def _metric(ctx: Context, name: str) -> dict[str, Any]:
    return next(m for m in ctx.metrics if m["name"] == name)


def _samples(ctx: Context, name: str) -> list[float]:
    return list(_metric(ctx, name)["samples"])


def _median(ctx: Context, name: str) -> float:
    return float(_metric(ctx, name)["stats"]["median"])
