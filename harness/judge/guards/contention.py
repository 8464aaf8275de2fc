"""CONTENDED: most of a number's samples were taken while the machine disturbed them.

Which samples and rounds the machine disturbed is the one rule every verdict filters by (compare, the
noise floor, bisect, the exit status); it lives here, with the guard that applies it first.

A sample is disturbed when the job's runtime marked it `contended` (the CPUs it may use were shared
while its clock ran: suites/runtime/contention.py) or `throttled` for a reason outside the device's
normal loaded state: thermal or hardware slowdown, or a power brake. A GPU under a sustained load runs
at its power cap as a matter of course (NVML's "SW power cap" is set for most of any long matmul on an
H100), and sync boost only ties GPUs together, so those two are recorded but do not disturb a sample:
marking them would mark every honest GPU run.

A round (one process) most of whose samples were disturbed measured its neighbours: its median is left
out of every between-process statistic, in `compare` and in `harness noise` alike, so the allowance a
noise floor grants is built from exactly the evidence a verdict is judged on.

A tail percentile (an inference job's p90, p99 and max, named by its `inference` block) rests on a
handful of samples, not on most: p99 of 100 requests is the two slowest, and a pre-empted request is
exactly a slow one. So a round's tail value is disturbed when a disturbed sample ranks at or above it,
and the value is CONTENDED when most rounds' tails were: the median's rule would print one pre-emption
as the code's p99 (on a busy CI machine, a planted 5 ms p99 slowdown was judged no change).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Sequence

from harness.core.result_types import Metric, Result
from harness.judge.guards.base import Evidence, Guard, Hit, Key, indices, time_metrics
from harness.store.run_folder import Run
from suites.contract.inference import PERCENTILES

REASON = "contended"  # the start of the exclusion reason of a metric whose samples were mostly contended
# NVML clock-event reasons (suites/runtime/contention.py THROTTLING) that disturb a sample:
# hardware slowdown, thermal (software), thermal (hardware), power brake.
DISTURBING_REASONS = 0x8 | 0x20 | 0x40 | 0x80


def disturbed_samples(metric: Metric) -> frozenset[int]:
    """Indices (into `metric["samples"]`) of the samples the machine disturbed."""
    seen = metric.get("contention")
    if not isinstance(seen, dict):
        return frozenset()
    n = len(metric["samples"])
    found = indices(seen.get("contended"), n)
    reasons = seen.get("clock_event_reasons")
    if isinstance(reasons, list) and len(reasons) == n:
        found |= {
            i
            for i, r in enumerate(reasons)
            if isinstance(r, int) and not isinstance(r, bool) and r & DISTURBING_REASONS
        }
    return frozenset(found)


def mostly_disturbed(disturbed: int, n: int) -> bool:
    """The rule for a metric, a round or a run: most of its samples disturbed."""
    return n > 0 and disturbed * 2 > n


def tail_disturbed(samples: Sequence[float], disturbed: Collection[int], q: float) -> bool:
    """Whether a disturbed sample (an index into `samples`) ranks at or above the q-quantile's lower
    order statistic (numpy's linear rule): the samples that value is read from or pushed down by."""
    if not samples:
        return False
    ranked = sorted(range(len(samples)), key=samples.__getitem__)
    return any(i in disturbed for i in ranked[math.floor(q * (len(samples) - 1)) :])


def round_spans(metric: Metric) -> list[range] | None:
    """Each round's (process's) indices into `samples`: one span for a metric of one process; None when
    its `round_sizes` do not add up to its samples (a result file is hostile)."""
    n, sizes = len(metric["samples"]), metric.get("round_sizes")
    if sizes is None:
        return [range(n)]
    if not isinstance(sizes, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        return None
    if sum(sizes) != n:
        return None
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [range(start, start + size) for start, size in zip(starts, sizes, strict=True)]


def tail_quantile(result: Result, name: str) -> tuple[str, float] | None:
    """(the time metric, q) when `name` is a tail percentile of that metric in the result's `inference`
    block (p90, p99, max; validated by core/schema.py); None for any other metric, the median included."""
    block = result.get("inference")
    if not isinstance(block, dict):
        return None
    latency = block["latency"]
    quantiles = dict(PERCENTILES) | {"max": 1.0}
    for label, metric in latency["percentiles"].items():
        if metric == name and metric != latency["metric"] and label in quantiles:
            return latency["metric"], quantiles[label]
    return None


def disturbed_tails(metric: Metric, q: float) -> tuple[set[int], int] | None:
    """(the rounds whose q-tail the machine disturbed, how many rounds) of a time metric; None where its
    rounds cannot be read. The one rule for a tail: the guard below and every verdict's rounds use it."""
    if (spans := round_spans(metric)) is None:
        return None
    samples, disturbed = metric["samples"], disturbed_samples(metric)
    hit = {
        k
        for k, span in enumerate(spans)
        if tail_disturbed([samples[i] for i in span], {i - span.start for i in disturbed if i in span}, q)
    }
    return hit, len(spans)


def _tails(run: Run) -> Iterator[tuple[tuple[str, str], int, int]]:
    """((framework, tail value), disturbed rounds, rounds) for every tail percentile of an ok job."""
    for fw, result in run.results.items():
        if result["status"] != "ok":
            continue
        sources = {m["name"]: m for m in result["metrics"] if m["kind"] == "time"}
        for m in result["metrics"]:
            found = tail_quantile(result, m["name"]) if m["kind"] == "value" else None
            counts = disturbed_tails(sources[found[0]], found[1]) if found and found[0] in sources else None
            if counts is not None:
                yield (fw, m["name"]), len(counts[0]), counts[1]


def readings(run: Run) -> dict[Key, tuple[int, int]]:
    """Every ok job's time metric that recorded contention -> (disturbed samples, samples)."""
    return {
        (fw, m["name"]): (len(disturbed_samples(m)), len(m["samples"]))
        for fw, _, m in time_metrics(run)
        if isinstance(m.get("contention"), dict)
    }


class Contended(Guard):
    name = "contended"
    word = "CONTENDED"
    reads = ("metrics[].contention.contended", "metrics[].contention.clock_event_reasons")
    heading = "CONTENDED - most samples were taken while the CPUs were shared or the GPU was slowed"
    catches = "contended (most samples taken while the CPUs the job may use were shared)"
    order = 50
    disturbance = True

    def hits(self, evidence: Evidence) -> Iterator[Hit]:
        for key, (k, n) in readings(evidence.run).items():
            # Most samples disturbed: the median itself is the neighbours' doing.
            if mostly_disturbed(k, n):
                yield Hit(
                    key,
                    f"{REASON} ({k}/{n} samples)",
                    f"{k} of {n} samples were taken while the CPUs were shared or the GPU slowed; rerun on a "
                    "quiet machine",
                    f"{k} of {n} samples disturbed; the median measures the neighbours as much as the code; "
                    "excluded from ratios and verdicts",
                    (k, n),
                )
        for key, k, n in _tails(evidence.run):
            # Most processes' tails disturbed: the percentile is the pre-emptions' doing.
            if mostly_disturbed(k, n):
                yield Hit(
                    key,
                    f"{REASON} (its tail in {k}/{n} processes)",
                    f"a disturbed sample ranks at or above this percentile in {k} of {n} processes; rerun on "
                    "a quiet machine",
                    f"a disturbed sample ranks at or above it in {k} of {n} processes; the tail measures the "
                    "neighbours as much as the code; excluded from ratios and verdicts",
                    (k, n),
                )


GUARD = Contended()
