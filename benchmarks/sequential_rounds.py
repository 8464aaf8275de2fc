"""Error rates and cost of `harness ab --budget`'s sequential rule, simulated with the harness's own code.

Each simulated session is what `harness ab --budget` does (harness/execute/ab.py Looks): rounds of
both sides, a look when sequential.Schedule says one is due, each look judging every row as
`harness compare` does (exact Mann-Whitney on the round medians, the ratio's interval, the family's
"too few processes" rule, Holm at the look's alpha: compare.family and sequential.Schedule.look),
and a stop at the first look past a boundary. Only the measurements are simulated: each round median
is exp(N(0, sigma)) times (1 + shift) on side B, or a two-mode mixture (`--modes`: a process lands
in a slow state with probability 1/2, as this machine's processes do, 13.5 or 18 ms for one matmul
loop), rows independent. Each look judges with `harness ab`'s margin (`--margin`, its default).

    python benchmarks/sequential_rounds.py                       # the table of docs/method.md
    python benchmarks/sequential_rounds.py --margin 0            # its tables from before the margin
    python benchmarks/sequential_rounds.py --sessions 2000 --sigma 0.11 --round-s 1.2 --budget 180

Prints a Markdown table: for each shift (0 = A/A), the share of sessions that called a change (for
A/A: the family-wise false-alarm rate over all looks), the median and 90th percentile of the time to
the verdict, and the mean rounds a side. The fixed design beside it: the same rows judged once, at
the round count the whole budget buys, at ALPHA (what the budget would give without looks).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.schema import AB_MARGIN  # noqa: E402
from harness.judge.compare import ROUNDS, Change, evidence, family  # noqa: E402
from harness.judge.sequential import Schedule  # noqa: E402


def draw(rng: random.Random, sigma: float, modes: bool) -> float:
    if modes:  # two states a process can land in, 18/13.5 apart, then a little noise within each
        return (1.0 if rng.random() < 0.5 else 18 / 13.5) * math.exp(rng.gauss(0, 0.03))
    return math.exp(rng.gauss(0, sigma))


def rows(a: list[list[float]], b: list[list[float]], margin: float = 0.0) -> list[Change]:
    changes = []
    for i, (xa, xb) in enumerate(zip(a, b, strict=True)):
        ratio, interval, p = evidence(xa, xb, True, margin)
        ma, mb = statistics.median(xa), statistics.median(xb)
        changes.append(Change(framework="fw", metric=f"row{i}", unit="s", better="lower", median_a=ma, median_b=mb,
                              ratio=ratio, ci_low=interval.low, ci_high=interval.high, p_value=p,
                              ci_coverage=interval.coverage, basis=ROUNDS, processes=(len(xa), len(xb)), margin=margin))  # fmt: skip
    return family(changes)


def session(rng: random.Random, args: argparse.Namespace, shift: float) -> tuple[bool, float, int]:
    """(called a change, seconds to the verdict, rounds a side) of one simulated session."""
    schedule = Schedule(args.budget)
    a: list[list[float]] = [[] for _ in range(args.rows)]
    b: list[list[float]] = [[] for _ in range(args.rows)]
    elapsed, rounds = 0.0, 0
    while True:
        rounds += 1
        elapsed += args.round_s
        for i in range(args.rows):
            a[i].append(draw(rng, args.sigma, args.modes))
            # the planted change is in every row (a slower code path shows in every metric of the job)
            b[i].append(draw(rng, args.sigma, args.modes) * (1 + shift))
        due = schedule.due(elapsed, args.round_s)
        if due is None:
            continue
        look = schedule.look(rounds, elapsed, due, rows(a, b, args.margin))
        if look.crossed or due:
            return bool(look.crossed), elapsed, rounds


def fixed(rng: random.Random, args: argparse.Namespace, shift: float) -> bool:
    """The same budget spent on one fixed-size comparison at ALPHA (no looks)."""
    n = int(args.budget // args.round_s)
    a = [[draw(rng, args.sigma, args.modes) for _ in range(n)] for _ in range(args.rows)]
    b = [[draw(rng, args.sigma, args.modes) * (1 + shift) for _ in range(n)] for _ in range(args.rows)]
    return any(c.significant for c in rows(a, b, args.margin))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--sigma", type=float, default=0.11, help="between-process sd of log round medians")
    parser.add_argument("--modes", action="store_true", help="two-mode processes instead of lognormal noise")
    parser.add_argument("--round-s", type=float, default=1.2, help="seconds a round of both sides costs")
    parser.add_argument("--budget", type=float, default=180.0)
    parser.add_argument("--rows", type=int, default=1)
    parser.add_argument("--shifts", default="0,0.05,0.10,0.30")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--margin", type=float, default=AB_MARGIN, help="harness ab --margin, as a fraction")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    noise = "two modes 18/13.5" if args.modes else f"sigma {args.sigma:g}"
    print(f"{args.sessions} sessions each; {noise}; {args.rows} row(s); a round {args.round_s:g} s; "
          f"budget {args.budget:g} s; margin {args.margin:.1%}\n")  # fmt: skip
    print(
        "| planted | called (sequential) | time to verdict, median / p90 | rounds a side, mean | called (fixed, whole budget) |"
    )
    print("| --- | --- | --- | --- | --- |")
    for shift in (float(s) for s in args.shifts.split(",")):
        runs = [session(rng, args, shift) for _ in range(args.sessions)]
        called = sum(r[0] for r in runs) / len(runs)
        times = sorted(r[1] for r in runs)
        p90 = times[int(0.9 * (len(times) - 1))]
        mean_rounds = statistics.fmean(r[2] for r in runs)
        fixed_called = sum(fixed(rng, args, shift) for _ in range(max(args.sessions // 4, 50))) / max(
            args.sessions // 4, 50
        )
        print(f"| {shift:.1%} | {called:.1%} | {statistics.median(times):.0f} / {p90:.0f} s | {mean_rounds:.1f} | "
              f"{fixed_called:.1%} |")  # fmt: skip


if __name__ == "__main__":
    main()
