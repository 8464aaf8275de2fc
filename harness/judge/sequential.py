"""Group-sequential verdicts for `harness ab --budget`: look a few times, stop once the evidence is clear.

A fixed number of rounds is either too many (a 30 % change is plain after six) or too few (a 5 %
change on a machine whose processes differ by 11 % needs about a hundred). With a time budget the
session instead looks at the evidence at fixed fractions of the budget and stops at the first look
where a row is past its boundary:

- Looks happen when 1/8, 1/4 and 1/2 of the budget has elapsed, and at the end: the last look is
  taken once another round would not fit in what is left (or when the session is interrupted).
  When to look depends on the clock only, never on the numbers.
- The false-alarm rate is spent over the looks by a Pocock-type spending function (Lan and DeMets
  1983): by the fraction t of the budget used, alpha(t) = ALPHA * ln(1 + (e - 1) t). Look k may
  spend alpha(t_k) - alpha(t_{k-1}); the last look spends whatever is left, so the looks together
  spend exactly ALPHA. Pocock's shape (rather than O'Brien-Fleming's) spends enough early for a
  large change to be called at the first look: with the exact test on few rounds a side, the
  smallest attainable p is coarse (0.008 at 5 a side), and O'Brien-Fleming's first boundaries are
  far below it.
- At each look every row is tested as `harness compare` tests it (Mann-Whitney on the round
  medians, exact up to 50 a side and the normal approximation with tie and continuity correction
  beyond, as a budget's rounds may go; the ratio's interval), and Holm's correction across the
  rows is applied at that look's alpha: a row is past its boundary when its Holm-adjusted p is at
  most the look's alpha and its interval excludes 1.
- An interim look whose rounds cannot reach its alpha (the exact test's smallest p at those rounds,
  times the rows, is above it: 4 rounds a side never go below 0.029) is deferred: it spends nothing
  and its share passes to the next look. Whether a look can reach its alpha depends on the round
  counts alone, never on the numbers, so the looks still spend at most ALPHA together; where rounds
  are dear (2 s a side-round for JAX, 16 rounds a side in a minute) the first two looks of a short
  budget would otherwise throw away 0.018 of the 0.05.

The family-wise false-alarm rate over all looks and all rows is then at most ALPHA: Holm keeps each
look's at its alpha under any dependence between rows, and the union bound over the looks adds
them up to ALPHA whatever the dependence between looks. It is conservative (it ignores that the
looks share rounds), in exchange for needing no model of the noise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.core.errors import HarnessError
from harness.core.schema import MIN_SEQUENTIAL_ALPHA, SEQUENTIAL_STOPS
from harness.core.statistics import ALPHA, smallest_exact_p
from harness.judge.compare import Change, Comparison
from harness.store.run_folder import partners

LOOKS = (1 / 8, 1 / 4, 1 / 2)  # fractions of the budget where an interim look is taken; the last is at the end
MIN_BUDGET_S = 20.0
MAX_BUDGET_S = 4 * 3600.0  # a typo ("30h") must not hold a machine for days
MAX_ROUNDS = 2000  # rounds a side a budget may buy at most: a guard against a job that does nothing
CALLED, SPENT, INTERRUPTED = SEQUENTIAL_STOPS  # why a session stopped, as its summaries record it

_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?\s*$")
_SECONDS = {None: 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_budget(text: str) -> float:
    """Seconds from '180', '90s', '3m' or '1.5h'; anything else, or out of range, is one line."""
    if not (found := _BUDGET.match(text)):
        raise HarnessError(f"--budget {text[:40]!r} is not a duration; give seconds or a unit, e.g. 90s, 3m, 1h")
    seconds = float(found.group(1)) * _SECONDS[found.group(2)]
    if not MIN_BUDGET_S <= seconds <= MAX_BUDGET_S:
        raise HarnessError(
            f"--budget {text.strip()} is outside {MIN_BUDGET_S:g} s to {MAX_BUDGET_S / 3600:g} h; "
            "a session shorter than that cannot reach a verdict, a longer one is a typo"
        )
    return seconds


def spent(t: float, alpha: float = ALPHA) -> float:
    """The false-alarm rate spent by the time a fraction t of the budget has elapsed (Pocock-type)."""
    t = min(max(t, 0.0), 1.0)
    return alpha * math.log(1 + (math.e - 1) * t)


def last_alpha(alpha: float = ALPHA) -> float:
    """What the last look may spend when the interim looks came at their fractions of the budget."""
    return alpha - spent(LOOKS[-1], alpha)


def family_at(family: int, alpha: float) -> int:
    """The family size whose Bonferroni share of ALPHA is a verdict's share at `alpha`: what the
    detectable-change arithmetic (noise_floor, which tests at ALPHA / family) must plan with. An
    alpha below the least a record may hold (schema.MIN_SEQUENTIAL_ALPHA) never reaches it from a
    file; below that the size is capped, never an overflow (5e-324 made ALPHA / alpha infinite)."""
    return math.ceil(family * ALPHA / max(alpha, MIN_SEQUENTIAL_ALPHA))


@dataclass(frozen=True)
class Look:
    number: int
    rounds: int  # complete rounds a side at this look
    elapsed_s: float
    alpha: float  # what this look may spend
    last: bool
    crossed: tuple[str, ...] = ()  # "framework metric" of every row past its boundary
    deferred: float = 0.0  # the alpha this look could not reach with its rounds, passed to the next look

    def line(self) -> str:
        t = f"{self.elapsed_s:.0f} s"
        end = " (last look)" if self.last else ""
        if self.deferred:
            return (
                f"look {self.number} after {self.rounds} round(s), {t}: deferred, these rounds cannot reach alpha "
                f"{self.deferred:.4f}; it passes to the next look"
            )
        what = (
            f"{len(self.crossed)} row(s) past the boundary: {', '.join(self.crossed)}" if self.crossed else "none past"
        )
        return f"look {self.number}{end} after {self.rounds} round(s), {t}: alpha {self.alpha:.4f}, {what}"


class Schedule:
    """When to look, and how much each look may spend, for one budget."""

    def __init__(self, budget_s: float, alpha: float = ALPHA) -> None:
        self.budget_s = budget_s
        self.alpha = alpha
        self.looks: list[Look] = []

    @property
    def used(self) -> float:
        """The false-alarm rate the looks so far have spent."""
        return sum(look.alpha for look in self.looks)

    def due(self, elapsed_s: float, round_s: float) -> bool | None:
        """After a round: None (no look now), False (an interim look), True (the last look: another
        round of `round_s` seconds would not fit in the budget)."""
        if elapsed_s + round_s > self.budget_s:
            return True
        interim = [f for f in LOOKS if f * self.budget_s <= elapsed_s]
        return False if len(interim) > len(self.looks) else None

    def look(self, rounds: int, elapsed_s: float, last: bool, changes: Sequence[Change]) -> Look:
        """Take a look: this look's alpha, and the rows past their boundary at it."""
        alpha = max((self.alpha if last else spent(elapsed_s / self.budget_s, self.alpha)) - self.used, 0.0)
        if not last and not reachable(changes, alpha):
            made = Look(len(self.looks) + 1, rounds, elapsed_s, 0.0, last, deferred=alpha)
        else:
            crossed = tuple(f"{c.framework} {c.metric}" for c in past_boundary(changes, alpha))
            made = Look(len(self.looks) + 1, rounds, elapsed_s, alpha, last, crossed)
        self.looks.append(made)
        return made


def reachable(changes: Sequence[Change], alpha: float) -> bool:
    """Whether any row could be past a boundary at `alpha` with the rounds it has: Holm multiplies
    the smallest p by the rows tested, and no p of the exact test is below smallest_exact_p. It reads
    the round counts only, never the numbers, so deferring a look on it keeps the spending valid."""
    tested = [c for c in changes if c.tested]
    return any(smallest_exact_p(*c.processes) * len(tested) < alpha for c in tested)


def past_boundary(changes: Sequence[Change], alpha: float) -> list[Change]:
    """The rows Holm-significant at `alpha` with their interval excluding 1 (rows `compare` tests)."""
    return [c for c in at_alpha(list(changes), alpha) if c.significant]


def at_alpha(changes: list[Change], alpha: float) -> list[Change]:
    """The rows judged at a look's alpha instead of ALPHA: each tested row's Holm-adjusted p (set by
    `compare.family`, which counts a row without a verdict as p = 1) is scaled by ALPHA / alpha, so
    `Change.significant` (adjusted p < ALPHA) means adjusted p < alpha, and the p printed is the one
    the verdict was made on. A look that may spend nothing calls nothing."""
    return [
        replace(c, p_adjusted=1.0 if alpha <= 0 else min(1.0, c.p_adjusted * ALPHA / alpha))
        if c.tested and not math.isnan(c.p_adjusted)
        else c
        for c in changes
    ]


def final_alpha(schedule: Schedule) -> float:
    """The alpha the verdicts are made at: the stopping look's; a session interrupted before its last
    look spends what is left (the interrupt is its last look, on the rounds that finished)."""
    stopped = schedule.looks[-1] if schedule.looks else None
    if stopped is not None and (stopped.last or stopped.crossed):
        return stopped.alpha
    return max(schedule.alpha - schedule.used, 0.0)


def judged(comparison: Comparison, alpha: float) -> Comparison:
    """The comparison judged at `alpha`, the alpha of the look its session stopped at. A row whose
    rounds cannot reach that alpha gets no verdict (never "not significant"), and the comparison a
    doubt the gate reports: an alpha read from disk must not silence a gate unseen."""
    said = (
        f"sequential session (harness ab --budget): each Holm-adjusted p above is scaled by {ALPHA:g} / {alpha:.4g}, "
        f"the alpha of the look it stopped at, so 'significant' means past that look's boundary; over all its looks "
        f"the chance of any false alarm stays at most {ALPHA:.0%}"
    )
    changes = at_alpha(comparison.changes, alpha)
    tested = sum(1 for c in changes if c.tested)
    out_of_reach = [
        i
        for i, c in enumerate(changes)
        if c.tested and c.no_verdict is None and (alpha <= 0 or smallest_exact_p(*c.processes) * tested >= alpha)
    ]
    doubts = list(comparison.doubts)
    for i in out_of_reach:
        why = f"{min(changes[i].processes)} rounds a side cannot reach the session's recorded alpha {alpha:.3g}"
        changes[i] = replace(changes[i], no_verdict=why)
    if out_of_reach:
        doubts.append(
            f"the session's recorded alpha {alpha:.3g} (summary.json sequential.alpha) leaves "
            f"{len(out_of_reach)} of {tested} row(s) out of reach of their rounds"
        )
    return replace(comparison, changes=changes, floor=[*comparison.floor, said], doubts=doubts)


def record(schedule: Schedule) -> dict[str, Any]:
    """What each side's summary.json keeps of the looks (`sequential`): a later `harness compare` of
    the two runs judges at the same alpha, not at ALPHA as if the session had looked once."""
    looks = schedule.looks
    return {
        "alpha": recordable(final_alpha(schedule)),
        "looks": len(looks),
        "rounds": looks[-1].rounds if looks else 0,
        "stopped": _why(schedule),
    }


def recorded_alpha(a: Mapping[str, Any], b: Mapping[str, Any]) -> float | None:
    """The alpha summaries `a` and `b` of one session were judged at (schema.summary_problem has
    checked each is within 0..ALPHA); the stricter one if they disagree (records.disagreements says
    so to the gate); None unless both are the two sides of one `ab` session and one of them recorded looks."""
    if not partners(a, b):
        return None
    found = [float(s["alpha"]) for s in (a.get("sequential"), b.get("sequential")) if isinstance(s, dict)]
    return min(found) if found else None


def as_recorded(comparison: Comparison) -> Comparison:
    """A comparison of the two sides of a sequential session, judged at the alpha its looks left."""
    alpha = recorded_alpha(comparison.a.summary, comparison.b.summary)
    return comparison if alpha is None else judged(comparison, alpha)


def recordable(alpha: float) -> float:
    """The alpha a summary records for a session that ended at `alpha`: 0 (nothing left to call)
    below the least a record may hold (schema.MIN_SEQUENTIAL_ALPHA), never rounded up."""
    return alpha if alpha >= MIN_SEQUENTIAL_ALPHA else 0.0


def _why(schedule: Schedule) -> str:
    looks = schedule.looks
    return CALLED if looks and looks[-1].crossed else SPENT if looks and looks[-1].last else INTERRUPTED


def summary_line(schedule: Schedule, seconds: float) -> str:
    looks = schedule.looks
    rounds = looks[-1].rounds if looks else 0
    return (
        f"sequential: stopped after {len(looks)} look(s) and {rounds} round(s) a side, {seconds:.0f} s of a "
        f"{schedule.budget_s:.0f} s budget ({_why(schedule)}); verdicts at alpha {final_alpha(schedule):.4f}, "
        f"the false-alarm rate over all looks at most {schedule.alpha:.0%}"
    )
