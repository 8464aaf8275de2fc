"""Sync-escape detection: work a timed sample left running is found after the clock stopped.

After every timed sample (and every first call and training epoch) the runtime asks the
framework, outside the clock, two things:

1. `pending()`: is any computation still running? A non-blocking query (JAX: `is_ready()` of
   every live array; CUDA: the current stream's `query()`), so it cannot be fooled by noise.
   The previous probe waited for everything, so whatever is pending now was started by the
   sample and outlived its clock.
2. How long a device-wide barrier then takes, timed twice: the first wait is the escaped work
   (plus the barrier's own cost), the second, with nothing left, is the barrier's own cost.

This holds whether or not the suite declared a FLOP count, so a forgotten `block_until_ready`
cannot hide behind a metric the plausibility lint cannot see.

A metric is `escaped` when at least half of its probes found pending work *and* the median
excess wait (first minus second barrier) is material: above `RELATIVE` of the median sample and
`ABSOLUTE_FLOOR_S`. From `benchmarks/sync_escape.py` on a 2-core Xeon (JAX 0.10, CPU):

- honest samples never leave pending work; their excess wait alone is 10-100 us (the first
  barrier after a sample runs on cold caches), which is why the timing alone is not the test;
- an unsynchronised 1024 x 1024 matmul is still pending at every probe, with ~30 ms of excess
  behind a 0.2 ms sample; an unsynchronised loop of small jitted calls leaves its tail pending.

`RELATIVE` = 5 %: escaped work below that changes the number less than the run-to-run noise
of a shared machine, and is recorded (`pending_share`) without flagging.

Standard library only: the barrier itself comes from the framework adapter.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from suites.contract.frameworks import Barrier

RELATIVE = 0.05
ABSOLUTE_FLOOR_S = 20e-6
MAJORITY = 0.5

OK, ESCAPED, UNCHECKED = "ok", "escaped", "unchecked"
SYNC_STATES = (OK, ESCAPED, UNCHECKED)

NO_ARRAY_WARNING = (
    "the timed callback returned nothing the framework can wait on (no array); "
    "return the computed result so the clock stops after the work, not after its dispatch"
)


@dataclass(frozen=True)
class Probe:
    """After one sample: whether work was pending, the first barrier's time, the second's."""

    pending: bool
    pending_s: float
    idle_s: float

    @property
    def excess_s(self) -> float:
        return max(0.0, self.pending_s - self.idle_s)


def probe(barrier: Barrier, clock: Callable[[], float] = time.perf_counter) -> Probe:
    """Query, then run the device-wide barrier twice, timing each (after the sample's clock stopped)."""
    pending = barrier.pending()
    start = clock()
    barrier.wait()
    middle = clock()
    barrier.wait()
    end = clock()
    return Probe(pending, middle - start, end - middle)


def material_s(samples: Sequence[float]) -> float:
    """The excess wait above which escaped work matters for a metric with these raw samples."""
    return max(ABSOLUTE_FLOOR_S, RELATIVE * statistics.median(samples))


def escaped_samples(samples: Sequence[float], probes: Sequence[Probe]) -> list[int]:
    """0-based indices of the samples whose own probe found material escaped work.

    `probes[i]` followed `samples[i]`. Per sample, by the rule `verdict` applies to the medians
    (pending work and an excess wait above `material_s`), so a metric that is `ok` as a whole can
    still name the few samples a late kernel spilled into, and an escaped one shows which.
    """
    if not samples or not probes:
        return []
    threshold = material_s(samples)
    return [i for i, p in enumerate(probes[: len(samples)]) if p.pending and p.excess_s > threshold]


def verdict(samples: Sequence[float], probes: Sequence[Probe]) -> dict[str, Any]:
    """The metric's `sync` state and the evidence for it (recorded in the result).

    `samples` are the raw sample durations the probes followed (before any per-call scaling).
    """
    if not probes or not samples:
        return {"state": UNCHECKED, "why": "no barrier was run after the samples"}
    sample = statistics.median(samples)
    excess = statistics.median(p.excess_s for p in probes)
    idle = statistics.median(p.idle_s for p in probes)
    share = sum(p.pending for p in probes) / len(probes)
    threshold = material_s(samples)
    state = ESCAPED if share >= MAJORITY and excess > threshold else OK
    return {
        "state": state,
        "pending_share": share,
        "excess_median_s": excess,
        "excess_max_s": max(p.excess_s for p in probes),
        "idle_barrier_median_s": idle,
        "sample_median_s": sample,
        "threshold_s": threshold,
        "n": len(probes),
    }


def synchronous_verdict(why: str) -> dict[str, Any]:
    """A framework with nothing asynchronous to escape (NumPy, PyTorch on the CPU)."""
    return {"state": OK, "why": why}
