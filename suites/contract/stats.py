"""Summary statistics of timing samples (standard library only, used by job and host)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def quartiles(samples: Sequence[float]) -> tuple[float, float, float]:
    """Q1, median, Q3 with linear interpolation between order statistics (numpy's default)."""
    data = sorted(samples)
    if not data:
        raise ValueError("no samples")

    def at(q: float) -> float:
        pos = q * (len(data) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(data) - 1)
        return data[lo] + (data[hi] - data[lo]) * (pos - lo)

    return at(0.25), at(0.5), at(0.75)


def summarize(samples: Sequence[float]) -> dict[str, float | int]:
    """median, IQR, min, max, mean, stdev (sample, 0 for n=1) and n of a non-empty sample list."""
    q1, median, q3 = quartiles(samples)
    return {
        "n": len(samples),
        "median": median,
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "min": min(samples),
        "max": max(samples),
        "mean": statistics.fmean(samples),
        "stdev": statistics.stdev(samples) if len(samples) > 1 else 0.0,
    }
