"""How long one exact Mann-Whitney test takes (harness/core/statistics.py `mann_whitney_u`) at the sizes
`--rounds` allows, with and without ties.

Seeded samples: 50 v 50 without ties, 50 v 50 with heavy ties (5 levels, the doubled mid-ranks
sharing a step > 1 or not, depending on the draw), 50 v 50 with 20 levels (ties in every run size:
the doubled mid-ranks share no common step, the largest distribution), and 20 v 20 without and with
ties. Each call is timed with a cold cache (`rank_sum_distribution.cache_clear()` before it): the
median wall time and the median CPU time of the process (steadier on a shared machine) of --repeat
calls, the largest wall time, and the median wall time of warm calls (the same size and tie pattern
again, served from the cache). Also the size of the distribution (how many rank sums it spans).
Asserts nothing: the figures go in the docstrings of harness/core/statistics.py and docs/method.md.

    python benchmarks/exact_ties.py
    python benchmarks/exact_ties.py --repeat 11
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.statistics import mann_whitney_u, rank_sum_distribution  # noqa: E402


def case(rng: random.Random, n: int, levels: int | None) -> tuple[list[float], list[float]]:
    if levels is None:
        return [rng.gauss(0, 1) for _ in range(n)], [rng.gauss(0.3, 1) for _ in range(n)]
    return [float(rng.randrange(levels)) for _ in range(n)], [float(rng.randrange(levels)) for _ in range(n)]


def groups_of(a: list[float], b: list[float]) -> tuple[int, ...]:
    return tuple(len(list(run)) for _, run in itertools.groupby(sorted([*a, *b])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="cold calls per case (default 5)")
    args = parser.parse_args()
    rng = random.Random(2024)
    cases = [
        ("50 v 50, no ties", 50, None),
        ("50 v 50, 5 levels", 50, 5),
        ("50 v 50, 20 levels", 50, 20),
        ("20 v 20, no ties", 20, None),
        ("20 v 20, 5 levels", 20, 5),
    ]
    print(
        f"{'case':20s} {'runs':>5s} {'sums':>5s} {'cold wall':>10s} {'cold CPU':>9s} {'max wall':>9s} {'warm':>8s}  p"
    )
    for name, n, levels in cases:
        a, b = case(rng, n, levels)
        wall, cpu = [], []
        for _ in range(args.repeat):
            rank_sum_distribution.cache_clear()
            start, start_cpu = time.perf_counter(), time.process_time()
            _, p = mann_whitney_u(a, b)
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        warm = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            mann_whitney_u(a, b)
            warm.append(time.perf_counter() - start)
        groups = groups_of(a, b)
        sums = len(rank_sum_distribution(n, groups)[2])
        print(
            f"{name:20s} {len(groups):5d} {sums:5d} {statistics.median(wall) * 1e3:7.1f} ms "
            f"{statistics.median(cpu) * 1e3:6.1f} ms {max(wall) * 1e3:6.1f} ms "
            f"{statistics.median(warm) * 1e3:5.2f} ms  {p:.4g}"
        )


if __name__ == "__main__":
    main()
