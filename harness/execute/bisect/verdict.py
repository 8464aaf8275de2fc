"""The project's significance rule (harness/judge/compare.py) applied to consecutive versions.

Each round's median is one independent observation of a version (samples of one process share its
caches and neighbours), so the Mann-Whitney test and the ratio's interval use the round medians, as
`harness compare` does for interleaved runs. That is why a bisect needs MIN_ROUNDS rounds: with three
observations per side the smallest two-sided exact p is 0.1, and no change could ever be significant.
The consecutive pairs of one bisect are one family, Holm-corrected like the rows of a compare
(`harness.judge.compare.family`): with more versions, more rounds are needed for any verdict, and a pair
that cannot reach one says how many.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from harness.core.statistics import observations_needed
from harness.judge.assessment import DISTURBED, FAILED, worst
from harness.judge.compare import ROUNDS, Change, evidence, family

MIN_ROUNDS = observations_needed(1)  # 4: one pair alone can reach p < 0.05


@dataclass(frozen=True)
class VersionRun:
    """What one version measured: every round's median, and all samples pooled (None: no usable result)."""

    version: str
    round_medians: list[float]
    samples: list[float]
    problem: str | None = None  # why it has no usable measurement
    disturbed: bool = False  # the problem: the machine disturbed too many of its rounds (nothing failed)
    left_out: int = 0  # rounds the machine disturbed, left out of round_medians
    rounds: int = 0  # rounds run

    @property
    def disturbance(self) -> str | None:
        """What the machine cost this version, in words (None: nothing left out)."""
        if not self.left_out:
            return None
        return f"the machine disturbed {self.left_out} of {self.rounds} rounds of {self.version} (left out)"

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples and self.problem is None else None


@dataclass(frozen=True)
class Pair:
    before: str
    after: str
    change: Change | None  # None: one side has no measurement
    excluded: str | None = None
    disturbance: str | None = None  # rounds of either side the machine disturbed and left out

    @property
    def judged(self) -> bool:
        """A verdict either way: both sides measured, and enough rounds for the test to decide."""
        return self.change is not None and self.change.no_verdict is None

    @property
    def disturbed(self) -> bool:
        """No verdict, and the rounds the machine disturbed are why: a quiet rerun can give one."""
        return self.change is not None and self.change.no_verdict is not None and self.disturbance is not None

    @property
    def significant(self) -> bool:
        return self.change is not None and self.change.significant

    @property
    def verdict(self) -> str:
        return f"excluded: {self.excluded}" if self.change is None else self.change.verdict


def compare_pair(a: VersionRun, b: VersionRun, metric: str, unit: str, better: str) -> Pair:
    for side in (a, b):
        if side.problem is not None or len(side.round_medians) < 2:
            why = side.problem or "fewer than two rounds measured"
            return Pair(a.version, b.version, None, f"{side.version}: {why}")
    median_a, median_b = statistics.median(a.samples), statistics.median(b.samples)
    if median_a == 0:
        return Pair(a.version, b.version, None, f"{a.version}: median is 0")
    disturbance = "; ".join(d for d in (a.disturbance, b.disturbance) if d) or None
    ratio, interval, p = evidence(a.round_medians, b.round_medians, rounds=True)  # as `compare` judges rounds
    change = Change(
        framework="",
        metric=metric,
        unit=unit,
        better=better,
        median_a=median_a,
        median_b=median_b,
        ratio=ratio,
        ci_low=interval.low,
        ci_high=interval.high,
        p_value=p,
        ci_coverage=interval.coverage,
        basis=ROUNDS,
        processes=(len(a.round_medians), len(b.round_medians)),
    )
    return Pair(a.version, b.version, change, disturbance=disturbance)


def judge(pairs: list[Pair]) -> list[Pair]:
    """The consecutive pairs as one family: Holm across them, no verdict where the rounds cannot give one."""
    measured = [i for i, p in enumerate(pairs) if p.change is not None]
    judged = family([c for i in measured if (c := pairs[i].change) is not None], "a version", "--rounds")
    out = list(pairs)
    for i, change in zip(measured, judged, strict=True):
        if change.no_verdict and pairs[i].disturbance:
            # The rounds asked for were enough; the machine took some away. Say so, not "ask for more".
            fewest = min(change.processes)
            why = f"{pairs[i].disturbance}; the {fewest} left cannot give one: rerun on a quiet machine"
            change = replace(change, no_verdict=why)
        out[i] = replace(pairs[i], change=change)
    return out


def first_change(pairs: list[Pair]) -> Pair | None:
    return next((p for p in pairs if p.significant), None)


def answer(pairs: list[Pair]) -> str:
    found = first_change(pairs)
    # A pair with no verdict (a side failed, the machine disturbed it, or too few rounds were left to
    # decide) before the first significant change, or anywhere when there is none: the first change may
    # hide in any of them, so "no significant change" is never said of a pair the test could not judge.
    blind = [p for p in (pairs[: pairs.index(found)] if found else pairs) if not p.judged]
    gap = f"{blind[0].before} -> {blind[0].after} could not be judged ({_why(blind[0])})" if blind else ""
    if found is None:
        return f"no verdict: {gap}" if blind else "no significant change between consecutive versions"
    text = f"first significant change: {found.after} ({found.verdict} than {found.before})"
    return f"{text}; but earlier, {gap}" if blind else text


def _why(pair: Pair) -> str:
    return str(pair.excluded if pair.change is None else pair.change.no_verdict)


def exit_code(runs: list[VersionRun], pairs: list[Pair]) -> int:
    """`harness bisect`'s status: 0 when every version measured; FAILED (1) when a version's job failed
    or measured nothing usable; DISTURBED (3) when the machine's disturbance is all that kept a version
    out, or took away the rounds a pair needed for a verdict (rerun on a quiet machine), as for
    `harness run`."""
    failed = (DISTURBED if run.disturbed else FAILED for run in runs if run.problem is not None)
    return worst(*failed, *(DISTURBED for pair in pairs if pair.disturbed))
