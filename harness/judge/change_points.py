"""Change points in a metric's history: where the level of a series of runs shifts.

A threshold ("alert above 5 %") fires on every noisy run and misses a slow creep; a change-point
method asks instead where a series is best described as segments of different levels, and pays
a penalty for every segment it adds, so noise alone adds none. We use PELT (Killick et al. 2012,
exact optimal segmentation in linear time) from `ruptures` (Truong, Oudre and Vayatis 2020),
with the L1 cost (each segment's median: one disturbed run is not a segment of its own) on the
log of each run's median, scaled by a robust estimate of the run-to-run noise (from successive
differences, which a step barely moves). The penalty, PENALTY x ln(n), was chosen by simulation
(benchmarks/change_points.py, whose figures docs/method.md quotes): flat series of 6-60 runs with
1 % noise, three in ten with one run 30 % off, and the same series with a 5 % or 15 % step.

Why ruptures: MongoDB's E-Divisive (`signal-processing-algorithms`, also what Apache Otava
builds on) pins numpy < 2 and Python < 3.12 and brings gevent and structlog, which would clash
with the stacks this project measures; ruptures needs only numpy and scipy, is maintained, and
its PELT is the standard exact search. It is imported only here, when a history is analysed (the
`report` extra), so the rest of the host never loads numpy.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from harness.core.errors import HarnessError

PENALTY = 3.0  # x ln(n), in units of the robust noise
MIN_POINTS = 6  # fewer runs than this: the noise itself cannot be estimated well enough
TRIMMED_SHARE = 0.8
# RMS of the smallest 80 % of |d| for d ~ N(0, 2), the difference of two unit-noise runs
# (numerical integration of the half-normal; benchmarks/change_points.py checks it).
TRIMMED_RMS = 0.9356544
MIN_SEGMENT = 2  # a level needs two runs: one odd run is an outlier, not a change
NOISE_FLOOR = 1e-3  # 0.1 % in log units: identical medians do not make every difference "infinite sigma"


def _ruptures() -> Any:
    try:
        import ruptures
    except ImportError:
        raise HarnessError(
            "change points need the ruptures package: pip install 'ruptures>=1.1.9' (it is in the report extra)"
        ) from None
    return ruptures


def noise(logs: Sequence[float]) -> float:
    """Robust run-to-run standard deviation of a log series, from its successive differences.

    A difference of two runs at one level is noise x sqrt 2; a step makes one large difference.
    The root mean square of the smallest 80 % of |differences|, divided by what that gives for
    unit noise (TRIMMED_RMS), ignores a step and an odd run, and wastes far fewer runs than the
    MAD (simulated: 0 of 400 flat series flagged against 35 with the MAD at the same penalty).
    """
    small = sorted(abs(b - a) for a, b in zip(logs, logs[1:], strict=False))
    if not small:
        return NOISE_FLOOR
    kept = small[: max(1, math.ceil(TRIMMED_SHARE * len(small)))]
    return max(math.sqrt(sum(d * d for d in kept) / len(kept)) / TRIMMED_RMS, NOISE_FLOOR)


def find(values: Sequence[float]) -> list[int]:
    """Indices (into `values`) where a new level starts; [] for a flat series or too few points.

    `values` must be positive (times, rates): the series is analysed in log space, so a 10 %
    step is the same size at 1 us and at 1 s.
    """
    if len(values) < MIN_POINTS or any(not (v > 0 and math.isfinite(v)) for v in values):
        return []
    import numpy as np

    rpt = _ruptures()
    logs = [math.log(v) for v in values]
    scale = noise(logs)
    centre = statistics.median(logs)
    signal = np.array([(x - centre) / scale for x in logs]).reshape(-1, 1)
    search = rpt.Pelt(model="l1", min_size=MIN_SEGMENT, jump=1).fit(signal)
    ends = search.predict(pen=PENALTY * math.log(len(values)))
    return [int(end) for end in ends[:-1]]  # the last "end" is the series' own end
