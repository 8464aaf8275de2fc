"""An inference run's figures (`mode=infer`, suites/contract/inference.py): per framework the cold
first request, the batch-1 latency's p50, p90, p99 and max with their order-statistic intervals, and
the throughput sweep with the batch where it saturates.

The result's `inference` block names the metrics (validated in core/schema.py), so nothing here parses
a metric name. The intervals come from the latency metric's samples (all of them, pooled over rounds:
the interval is then over every process's requests together); `compare` and `ab` judge the same
percentiles between processes from the per-process values the job recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.result_types import Result
from harness.store.run_folder import Run
from suites.contract.inference import LEVEL, PERCENTILES, percentile, quantile_interval, saturation


@dataclass(frozen=True)
class Tail:
    label: str  # p50, p90, p99, max
    seconds: float
    low: float | None  # the order-statistic interval (None for the max: it has none)
    high: float | None
    coverage: float | None  # what [low, high] really covers


@dataclass(frozen=True)
class Point:
    batch: int
    rate: float  # median rows per second at this batch
    low: float  # the throughput samples' interquartile range
    high: float
    excluded: str | None  # why a guard keeps it out of ratios (contended, recompiled, ...)


@dataclass(frozen=True)
class Generation:
    """`mode=generate`: the prefill (time to first token) and the decode rate, at this shape."""

    batch: int
    prompt_len: int
    new_tokens: int
    ttft_s: float  # the prefill's median
    ttft_cold_s: float | None  # its first call: compilation and the first run
    tokens_per_s: float  # the decode rate's median
    excluded: str | None  # why a guard keeps the prefill out of ratios


@dataclass(frozen=True)
class Figures:
    framework: str
    mode: str  # infer or generate
    unit: str
    requests: int
    processes: int
    cold_s: float | None  # the first request after load (the latency metric's first call; median over rounds)
    tails: tuple[Tail, ...]
    latency_excluded: str | None
    sweep: tuple[Point, ...]
    saturation: int | None
    stopped: str | None
    generation: Generation | None = None


@dataclass(frozen=True)
class InferenceJudgement:
    figures: tuple[Figures, ...]
    level: float = LEVEL


def figures_of(framework: str, result: Result, excluded: Callable[[str, str], str | None]) -> Figures | None:
    """One framework's figures from its ok result's `inference` block; None without one."""
    block: Mapping[str, Any] | None = result.get("inference")  # type: ignore[assignment]
    if result["status"] != "ok" or not block:
        return None
    metrics = {m["name"]: m for m in result["metrics"]}
    latency = metrics[block["latency"]["metric"]]
    samples = latency["samples"]
    tails = [Tail(label, percentile(samples, q), *quantile_interval(samples, q)) for label, q in PERCENTILES]
    tails.append(Tail("max", max(samples), None, None, None))
    points = []
    for point in block["sweep"]:
        stats = metrics[point["throughput"]]["stats"]
        reason = excluded(framework, point["throughput"])
        points.append(Point(point["batch"], stats["median"], stats["q1"], stats["q3"], reason))
    kept = [(p.batch, p.rate) for p in points if p.excluded is None]
    generation = None
    if shape := block.get("generate"):
        prefill = metrics[shape["prefill"]]
        generation = Generation(
            batch=shape["batch"],
            prompt_len=shape["prompt_len"],
            new_tokens=shape["new_tokens"],
            ttft_s=prefill["stats"]["median"],
            ttft_cold_s=prefill.get("first_call"),
            tokens_per_s=metrics[shape["decode_rate"]]["stats"]["median"],
            excluded=excluded(framework, prefill["name"]),
        )
    return Figures(
        framework=framework,
        mode=str(block["mode"]),
        unit=str(block["unit"]),
        requests=len(samples),
        processes=len(latency.get("round_sizes") or [len(samples)]),
        cold_s=latency.get("first_call"),
        tails=tuple(tails),
        latency_excluded=excluded(framework, latency["name"]),
        sweep=tuple(points),
        saturation=saturation(kept),
        stopped=block.get("stopped"),
        generation=generation,
    )


def judge(run: Run, excluded: Callable[[str, str], str | None]) -> InferenceJudgement | None:
    """The run's inference figures, in the run's framework order; None when no job has an inference block."""
    found = [f for fw, r in run.results.items() if (f := figures_of(fw, r, excluded)) is not None]
    return InferenceJudgement(tuple(found)) if found else None


def pooled_block(blocks: Sequence[Mapping[str, Any] | None], kept: set[str]) -> dict[str, Any] | None:
    """The `inference` block of pooled rounds: round 1's, with the sweep's points every round timed
    (a sweep a time cap ended earlier in one round loses its larger batches), and every round's reason."""
    if (first := blocks[0]) is None:
        return None
    sweep = [p for p in first["sweep"] if p["time"] in kept and p["throughput"] in kept]
    stopped = sorted({str(b["stopped"]) for b in blocks if b is not None and b.get("stopped")})
    return dict(first, sweep=sweep, stopped="; ".join(stopped)[:500] or None)
