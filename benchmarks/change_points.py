"""How often `harness history` finds a change point that is not there, and how often it finds one that is.

Simulated histories (seeded): 400 series of 6-60 runs with 1 % run-to-run noise, three in ten with
one run 30 % off (a contended run); the same series with a 5 % and a 15 % step at a random run.
For each noise estimator and penalty: the share of flat series with any change point, and the
share of stepped series whose change point is found at the run where the step starts. The row
marked "used" is harness/judge/change_points.py's own `find`; the others are the alternatives it was
chosen over (docs/method.md quotes the table). Also checks TRIMMED_RMS by simulation.

    python benchmarks/change_points.py
"""

from __future__ import annotations

import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import ruptures as rpt  # noqa: E402

from harness.judge import change_points  # noqa: E402

SERIES = 400


def mad_noise(logs: Sequence[float]) -> float:
    diffs = [b - a for a, b in zip(logs, logs[1:], strict=False)]
    centre = statistics.median(diffs)
    return max(1.4826 * statistics.median(abs(d - centre) for d in diffs) / math.sqrt(2), change_points.NOISE_FLOOR)


def finder(noise: Callable[[Sequence[float]], float], penalty: float) -> Callable[[list[float]], list[int]]:
    def find(values: list[float]) -> list[int]:
        logs = [math.log(v) for v in values]
        scale, centre = noise(logs), statistics.median(logs)
        signal = np.array([(x - centre) / scale for x in logs]).reshape(-1, 1)
        search = rpt.Pelt(model="l1", min_size=change_points.MIN_SEGMENT, jump=1).fit(signal)
        return [int(e) for e in search.predict(pen=penalty * math.log(len(values)))[:-1]]

    return find


def rates(find: Callable[[list[float]], list[int]]) -> tuple[float, float, float]:
    rng = random.Random(7)
    flat_alarms = found_15 = found_5 = 0
    for _ in range(SERIES):
        n = rng.randint(change_points.MIN_POINTS, 60)
        values = [1 + rng.gauss(0, 0.01) for _ in range(n)]
        if rng.random() < 0.3:
            values[rng.randrange(n)] *= 1.3
        flat_alarms += bool(find(values))
        start = rng.randint(3, n - 3)
        found_15 += start in find([v * (1.15 if i >= start else 1) for i, v in enumerate(values)])
        found_5 += start in find([v * (1.05 if i >= start else 1) for i, v in enumerate(values)])
    return flat_alarms / SERIES, found_15 / SERIES, found_5 / SERIES


def main() -> None:
    d = np.sort(np.abs(np.random.default_rng(1).normal(0, math.sqrt(2), 2_000_000)))
    simulated = math.sqrt(float(np.mean(d[: int(change_points.TRIMMED_SHARE * len(d))] ** 2)))
    print(f"TRIMMED_RMS {change_points.TRIMMED_RMS} (simulated: {simulated:.5f})")
    rows = [
        ("MAD of differences", 2.0, finder(mad_noise, 2.0)),
        ("MAD of differences", 3.0, finder(mad_noise, 3.0)),
        ("trimmed RMS of differences", 2.0, finder(change_points.noise, 2.0)),
        ("trimmed RMS of differences (used)", change_points.PENALTY, change_points.find),
    ]
    print(
        "| estimator of the noise | penalty | flat series with a change point | 15 % step at its run | 5 % step at its run |"
    )
    print("| --- | --- | --- | --- | --- |")
    for name, penalty, find in rows:
        flat, fifteen, five = rates(find)
        print(f"| {name} | {penalty:g} ln n | {flat:.1%} | {fifteen:.1%} | {five:.1%} |", flush=True)


if __name__ == "__main__":
    main()
