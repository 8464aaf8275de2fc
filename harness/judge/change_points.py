"""Change points in a metric's history: where the level of a series of runs shifts.

A threshold ("alert above 5 %") fires on every noisy run and misses a slow creep; a change-point
method asks instead where a series is best described as segments of different levels, and pays
a penalty for every segment it adds, so noise alone adds none. We use PELT (Killick et al. 2012,
exact optimal segmentation with pruning) with the L1 cost (each segment's median: one disturbed run
is not a segment of its own) on the log of each run's median, scaled by a robust estimate of the
run-to-run noise (from successive differences, which a step barely moves). The penalty, PENALTY x
ln(n), was chosen by simulation (benchmarks/change_points.py, whose figures docs/method.md quotes):
flat series of 6-60 runs with 1 % noise, three in ten with one run 30 % off, and the same series
with a 5 % or 15 % step.

The search is the one `ruptures` (Truong, Oudre and Vayatis 2020) runs as `Pelt(model="l1",
min_size=2, jump=1)`: the same recursion, candidates and pruning, and the same tie-break (the
earliest start), which tests/test_hostile_v4.py checks against ruptures itself. Its cost is kept
here instead: ruptures recomputes each candidate segment's median from scratch (numpy's median,
tens of microseconds a call), and a long history asks for hundreds of thousands of them (2,000 runs
took 333 s of silence). Each candidate segment here keeps its values in two heaps (the lower and
the upper half), so a new run costs one push per candidate, and the L1 cost is the upper half's sum
minus the lower half's, kept exactly as integers (a float sum would drift with every push). It
needs neither numpy nor ruptures.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Sequence

PENALTY = 3.0  # x ln(n), in units of the robust noise
MIN_POINTS = 6  # fewer runs than this: the noise itself cannot be estimated well enough
TRIMMED_SHARE = 0.8
# RMS of the smallest 80 % of |d| for d ~ N(0, 2), the difference of two unit-noise runs
# (numerical integration of the half-normal; benchmarks/change_points.py checks it).
TRIMMED_RMS = 0.9356544
MIN_SEGMENT = 2  # a level needs two runs: one odd run is an outlier, not a change
NOISE_FLOOR = 1e-3  # 0.1 % in log units: identical medians do not make every difference "infinite sigma"
# Every finite float is a whole multiple of 2**-1074: scaled by it, values add exactly as integers.
_EXACT = 1074


def noise(logs: Sequence[float]) -> float:
    """Robust run-to-run standard deviation of a log series, from its successive differences.

    A difference of two runs at one level is noise x sqrt 2; a step makes one large difference.
    The root mean square of the smallest 80 % of |differences|, divided by what that gives for
    unit noise (TRIMMED_RMS), ignores a step and an odd run, and wastes far fewer runs than the
    MAD (simulated: 0 of 400 flat series flagged against 35 with the MAD at the same penalty).
    """
    if not (small := sorted(abs(b - a) for a, b in zip(logs, logs[1:], strict=False))):
        return NOISE_FLOOR
    kept = small[: max(1, math.ceil(TRIMMED_SHARE * len(small)))]
    return max(math.sqrt(sum(d * d for d in kept) / len(kept)) / TRIMMED_RMS, NOISE_FLOOR)


class _Segment:
    """The values of one candidate segment, halved around its median, with each half's exact sum."""

    __slots__ = ("low", "high", "sum_low", "sum_high")

    def __init__(self) -> None:
        self.low: list[int] = []  # the lower half (with the median when the count is odd), negated: a max-heap
        self.high: list[int] = []
        self.sum_low = 0
        self.sum_high = 0

    def add(self, value: int) -> None:
        if not self.low or value <= -self.low[0]:
            heapq.heappush(self.low, -value)
            self.sum_low += value
        else:
            heapq.heappush(self.high, value)
            self.sum_high += value
        if len(self.low) > len(self.high) + 1:
            moved = -heapq.heappop(self.low)
            self.sum_low -= moved
            heapq.heappush(self.high, moved)
            self.sum_high += moved
        elif len(self.high) > len(self.low):
            moved = heapq.heappop(self.high)
            self.sum_high -= moved
            heapq.heappush(self.low, -moved)
            self.sum_low += moved

    def cost(self) -> float:
        """The sum of |value - median|, correctly rounded: upper half minus lower half (an odd count's
        median, the lower half's largest, is counted once with each sign, i.e. not at all)."""
        exact = self.sum_high - self.sum_low
        if len(self.low) > len(self.high):
            exact -= self.low[0]  # low[0] is minus the median
        return exact / (1 << _EXACT)


def _whole(value: float) -> int:
    """`value` x 2**1074, exactly (a finite float's denominator is a power of two no larger)."""
    numerator, denominator = value.as_integer_ratio()
    return numerator * ((1 << _EXACT) // denominator)


def pelt_l1(signal: Sequence[float], pen: float, min_size: int = MIN_SEGMENT) -> list[int]:
    """The ends of the segments (the last is len(signal)) of the segmentation that minimises the
    sum of L1 costs plus `pen` a segment: ruptures' Pelt(model="l1", jump=1) search, step by step."""
    n = len(signal)
    exact = [_whole(v) for v in signal]
    total: dict[int, float] = {0: 0.0}  # the best segmentation of signal[:t]: its cost
    previous: dict[int, int] = {}  # ... and where its last segment starts
    segments: dict[int, _Segment] = {}  # candidate start -> signal[start:t] so far
    admissible: list[int] = []
    for end in [*range(min_size, n), n]:
        admissible.append(end - min_size)
        offers: list[tuple[int, float]] = []
        for start in admissible:
            if start not in total:  # no segmentation of signal[:start] (start 1 with segments of 2)
                continue
            if (segment := segments.get(start)) is None:
                segment = segments[start] = _Segment()
                for value in exact[start : end - 1]:
                    segment.add(value)
            segment.add(exact[end - 1])
            offers.append((start, total[start] + (segment.cost() + pen)))
        best_start, best = min(offers, key=lambda offer: offer[1])  # the earliest start wins a tie, as in ruptures
        total[end], previous[end] = best, best_start
        admissible = [start for start, offer in offers if offer <= best + pen]
        for start in set(segments) - set(admissible):
            del segments[start]
    ends, end = [], n
    while end > 0:
        ends.append(end)
        end = previous[end]
    return sorted(ends)


def find(values: Sequence[float]) -> list[int]:
    """Indices (into `values`) where a new level starts; [] for a flat series or too few points.

    `values` must be positive (times, rates): the series is analysed in log space, so a 10 %
    step is the same size at 1 us and at 1 s.
    """
    if len(values) < MIN_POINTS or any(not (v > 0 and math.isfinite(v)) for v in values):
        return []
    logs = [math.log(v) for v in values]
    scale = noise(logs)
    centre = statistics.median(logs)
    signal = [(x - centre) / scale for x in logs]
    ends = pelt_l1(signal, PENALTY * math.log(len(values)))
    return ends[:-1]  # the last "end" is the series' own end
