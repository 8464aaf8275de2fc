"""What a row of `harness ab --budget` costs, and how close its p is, beyond the exact test's 50 rounds a side.

A budget buys up to 2,000 rounds a side (harness/judge/sequential.py MAX_ROUNDS). Beyond 50 a side
harness/core/statistics.py uses the normal approximation with tie and continuity correction for the
Mann-Whitney p, and the continuity-corrected normal critical value for the Hodges-Lehmann interval,
whose order statistics it selects rather than sorting all n1 * n2 ratios. This prints:

- the wall time of `shift_ratio`, `mann_whitney_u`, `beyond_margin_p` (margin 1 %) and the whole
  `compare.evidence` of one row at 51, 500 and 2,000 rounds a side, for four shapes of rounds
  (one mode; two modes 1.65x apart; a 1 ms timer's ties; five levels);
- the approximate p against the exact permutation p at 55 a side (the exact distribution counted
  as the exact test counts it, given the ties: about 0.2-0.4 s each), ties or not;
- with --exact-cost, how long counting the exact distribution takes at 50, 70 and 100 a side (the
  reason it stops at 50: about n**6).

Asserts nothing: the figures go in the docstrings of harness/core/statistics.py and docs/method.md.

    python benchmarks/budget_rounds.py
    python benchmarks/budget_rounds.py --exact-cost
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.statistics import (  # noqa: E402
    _exact_tied_pvalue,
    beyond_margin_p,
    mann_whitney_u,
    rank_sum_distribution,
    shift_ratio,
)
from harness.judge.compare import evidence  # noqa: E402

Shape = Callable[[random.Random, int, float], list[float]]
SHAPES: dict[str, Shape] = {
    "one mode": lambda rng, n, s: [s * math.exp(rng.gauss(0, 0.1)) for _ in range(n)],
    "two modes": lambda rng, n, s: [
        s * (1.65 if rng.random() < 0.5 else 1.0) * math.exp(rng.gauss(0, 0.02)) for _ in range(n)
    ],
    "1 ms timer ties": lambda rng, n, s: [round(s * math.exp(rng.gauss(0, 0.1)), 3) for _ in range(n)],
    "five levels": lambda rng, n, s: [s * rng.choice([1.0, 1.01, 1.02, 1.03, 1.04]) for _ in range(n)],
}


def ms(call: Callable[..., object], *args: object) -> float:
    start = time.perf_counter()
    call(*args)
    return (time.perf_counter() - start) * 1e3


def costs(rng: random.Random) -> None:
    print(f"{'rounds':16s} {'a side':>6s} {'shift_ratio':>12s} {'mann_whitney':>13s} {'margin p':>9s} {'evidence':>9s}")
    for name, shape in SHAPES.items():
        for n in (51, 500, 2000):
            a, b = shape(rng, n, 1.0), shape(rng, n, 1.03)
            figures = [
                ms(shift_ratio, a, b),
                ms(mann_whitney_u, a, b),
                ms(beyond_margin_p, a, b, 0.01),
                ms(evidence, a, b, True, 0.01),
            ]
            print(f"{name:16s} {n:6d} " + " ".join(f"{f:9.1f} ms" for f in figures))


def draw(rng: random.Random, levels: int) -> float:
    """One observation: normal without ties (levels 0), else one of `levels` integers."""
    return rng.gauss(0, 1) if not levels else float(rng.randrange(levels))


def accuracy(rng: random.Random) -> None:
    print("\n55 a side: the approximate p against the exact permutation p")
    for levels in (0, 5, 12):
        for shift in (0.2, 0.4, 0.6):
            a = [draw(rng, levels) for _ in range(55)]
            b = [draw(rng, levels) + (shift if not levels else rng.random() < shift) for _ in range(55)]
            pooled = sorted([*a, *b])
            groups = tuple(len(list(run)) for _, run in itertools.groupby(pooled))
            doubled = sum(bisect_left(pooled, x) + bisect_right(pooled, x) + 1 for x in a)
            exact = _exact_tied_pvalue(doubled, 55, groups)
            approximate = mann_whitney_u(a, b)[1]
            ties = f"{levels} levels" if levels else "no ties"
            print(
                f"  {ties:9s} exact {exact:.3e}  approximate {approximate:.3e}  difference {approximate - exact:+.4f}"
            )


def exact_cost() -> None:
    print("\ncounting the exact tie-free distribution, one cold call")
    for n in (50, 70, 100):
        rank_sum_distribution.cache_clear()
        seconds = ms(rank_sum_distribution, n, (1,) * (2 * n)) / 1e3
        print(f"  {n} a side: {seconds:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exact-cost", action="store_true", help="also time exact counting at 70 and 100 a side")
    args = parser.parse_args()
    rng = random.Random(56)
    costs(rng)
    accuracy(rng)
    if args.exact_cost:
        exact_cost()


if __name__ == "__main__":
    main()
