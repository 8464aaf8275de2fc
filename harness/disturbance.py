"""Which samples and rounds the machine disturbed: the one rule every verdict filters by.

A sample is disturbed when the job's runtime marked it `contended` (the CPUs it may use were
shared while its clock ran: suites/runtime/contention.py) or `throttled` for a reason outside the
device's normal loaded state: thermal or hardware slowdown, or a power brake. A GPU under a
sustained load runs at its power cap as a matter of course (NVML's "SW power cap" is set for most
of any long matmul on an H100), and sync boost only ties GPUs together, so those two are recorded
but do not disturb a sample: marking them would mark every honest GPU run.

A round (one process) most of whose samples were disturbed measured its neighbours: its median is
left out of every between-process statistic, in `compare` and in `harness noise` alike, so the
allowance a noise floor grants is built from exactly the evidence a verdict is judged on.
"""

from __future__ import annotations

import math
from typing import Any

from harness.result_types import Metric

# NVML clock-event reasons (suites/runtime/contention.py THROTTLING) that disturb a sample:
# hardware slowdown, thermal (software), thermal (hardware), power brake.
DISTURBING_REASONS = 0x8 | 0x20 | 0x40 | 0x80


def _indices(value: Any, n: int) -> set[int]:
    if not isinstance(value, list):
        return set()
    return {i for i in value if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n}


def samples(metric: Metric) -> frozenset[int]:
    """Indices (into `metric["samples"]`) of the samples the machine disturbed."""
    seen = metric.get("contention")
    if not isinstance(seen, dict):
        return frozenset()
    n = len(metric["samples"])
    found = _indices(seen.get("contended"), n)
    reasons = seen.get("clock_event_reasons")
    if isinstance(reasons, list) and len(reasons) == n:
        found |= {
            i
            for i, r in enumerate(reasons)
            if isinstance(r, int) and not isinstance(r, bool) and r & DISTURBING_REASONS
        }
    return frozenset(found)


def mostly(disturbed: int, n: int) -> bool:
    """The rule for a metric, a round or a run: most of its samples disturbed."""
    return n > 0 and disturbed * 2 > n


def _finite_medians(metric: Metric) -> list[float] | None:
    found = metric.get("round_medians")
    if not isinstance(found, list) or len(found) < 2:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in found):
        return None
    return [float(v) for v in found]


def rounds(metric: Metric) -> tuple[list[float], int]:
    """(the medians of the rounds the machine left alone, how many rounds were left out as disturbed);
    ([], 0) for a metric without rounds (a single process)."""
    medians = _finite_medians(metric)
    if medians is None:
        return [], 0
    sizes = metric.get("round_sizes")
    disturbed = samples(metric)
    if not disturbed or not isinstance(sizes, list) or len(sizes) != len(medians):
        return medians, 0
    if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        return medians, 0
    kept, start = [], 0
    for median, size in zip(medians, sizes, strict=True):
        if not mostly(len(disturbed.intersection(range(start, start + size))), size):
            kept.append(median)
        start += size
    return kept, len(medians) - len(kept)
