"""The shape of a result's `inference` block: which of an inference job's metrics are the batch-1
latency, its percentiles and the throughput sweep (suites/contract/inference.py, runtime/inference.py).

As parallel_types.py: TypedDicts that mypy sees and pydantic checks strictly, an unknown key refused;
the rules tying the names to the result's metrics are code in schema.py (`inference_problem`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from annotated_types import Ge, Le, MaxLen, MinLen
from pydantic import Strict, with_config
from typing_extensions import TypedDict

from harness.core.parallel_types import FORBID
from harness.core.result_types import Describe
from suites.contract.inference import MAX_SWEEP

MAX_NAME = 120  # a metric name the runtime writes is under 40 characters
MAX_REASON = 500

MetricName = Annotated[str, Strict(), MinLen(1), MaxLen(MAX_NAME), Describe("a metric name")]
Unit = Annotated[str, Strict(), MinLen(1), MaxLen(40), Describe("a unit of at most 40 characters")]
Batch = Annotated[int, Strict(), Ge(1), Le(1 << 30), Describe("a batch size (a whole number >= 1)")]
Reason = Annotated[str, Strict(), MaxLen(MAX_REASON), Describe(f"a string of at most {MAX_REASON} characters")]


@with_config(FORBID)
class Percentiles(TypedDict):
    p50: MetricName  # the latency metric itself: its median
    p90: MetricName
    p99: MetricName
    max: MetricName


@with_config(FORBID)
class Latency(TypedDict):
    metric: MetricName  # the time metric of single requests at batch 1
    percentiles: Percentiles  # value metrics derived from it, one number per process


@with_config(FORBID)
class SweepPoint(TypedDict):
    batch: Batch
    time: MetricName  # the time metric of one call at this batch
    throughput: MetricName  # the value metric of rows per second derived from it


@with_config(FORBID)
class Generate(TypedDict):
    """`mode=generate`: the prefill's time metric, decode tokens/s, and the shape of the generation."""

    prefill: MetricName  # time to first token: a time metric
    decode_rate: MetricName  # tokens/s: a value metric derived from the latency metric (the decode step)
    batch: Batch
    prompt_len: Batch
    new_tokens: Batch


@with_config(FORBID)
class Inference(TypedDict):
    mode: Literal["infer", "generate"]
    unit: Unit  # what a row is: images, sequences, tokens
    latency: Latency  # infer: single requests at batch 1; generate: the decode steps (per token)
    sweep: Annotated[list[SweepPoint], Strict(), MaxLen(MAX_SWEEP)]  # infer: from batch 1 up; generate: empty
    stopped: Reason | None  # where the sweep ended early, and why (memory, time); null: it reached max_batch
    generate: Generate | None  # generate only
