"""A time budget for rounds (`--budget` on `ab`, `run`, `noise`, `bisect`): run rounds until another
would not fit in what is left.

A round count is a guess at how long the evidence takes; a budget is what the user actually has.
After each round the clock plans the next at the slowest of the last three (one slow round, e.g. the
first with its cold caches, must not carry the session past its budget), and says stop once that
round would end past the budget. So a budget is overrun only by the last round it started, one that took
longer than planned (a first round longer than the whole budget, say): never by more than that round.

`least` is the fewest rounds that give the command its verdict (a noise floor from three processes,
an `ab` verdict from four a side, a bisect pair). The clock never runs past the budget to reach them:
once the rounds so far show that the budget cannot buy `least` at their pace it says stop at once
(`short`), and the command says what budget, or what smaller workload, would fit instead of handing
back a verdict its rounds cannot carry. Where the round's cost is known before anything runs (this
workload's noise run), `refuse_short` says so up front and nothing starts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

from harness.core.errors import HarnessError
from harness.judge import noise_floor
from harness.store.plan import Plan
from harness.text.escape import plain


class Stop(Protocol):
    """What `rounds.execute_interleaved` asks after each complete round (True: stop), and what it
    records in each run folder's plan.json (the budget) and summary.json (`record()`)."""

    budget_s: float

    def __call__(self, number: int) -> bool: ...

    def after_side(self, number: int, done: int, of: int) -> bool: ...

    def record(self) -> dict[str, Any]: ...


class RoundClock:
    """The `stop` of a budgeted execution: asked after each complete round, True to stop."""

    def __init__(self, budget_s: float, least: int = 1, now: Callable[[], float] = time.monotonic) -> None:
        self.budget_s = budget_s
        self.least = least
        self.now = now
        self.started = self.previous = now()
        self.rounds_s: list[float] = []
        self.short = False  # the budget cannot buy `least` rounds at the pace of those run: stopped early
        # A first round stopped after some of its sides: what the whole round would take at their pace.
        self.estimate_s: float | None = None

    @property
    def elapsed(self) -> float:
        return self.now() - self.started

    @property
    def over(self) -> bool:
        """The budget was overrun: by the last round, which took longer than it was planned at."""
        return self.elapsed > self.budget_s

    def planned_s(self) -> float:
        """What the next round is planned to take: the slowest of the last three."""
        return max(self.rounds_s[-3:])

    def tick(self) -> tuple[float, bool]:
        """After a round: the time elapsed, and whether another round (planned at the slowest of the
        last three) would end past the budget."""
        now = self.now()
        self.rounds_s.append(now - self.previous)
        self.previous = now
        elapsed = now - self.started
        return elapsed, elapsed + self.planned_s() > self.budget_s

    def cannot_reach(self, number: int) -> bool:
        """After round `number`: whether the rounds still needed to reach `least` would end past the
        budget at the pace so far (then `short` is set and the command should stop now)."""
        if number < self.least and self.elapsed + (self.least - number) * self.planned_s() > self.budget_s:
            self.short = True
        return self.short

    def after_side(self, number: int, done: int, of: int) -> bool:
        """Inside the first round, after `done` of its `of` sides (run folders): whether `least` rounds
        at the pace of those sides would end past the budget. Then `short` is set and the session stops
        at once: the rest of a round no verdict can come of is time the user does not have (a 120 s
        budget once ran 664 s, two sides of one round at N=5000)."""
        if number != 1 or not 0 < done < of:
            return False
        round_s = self.elapsed / done * of
        if round_s * max(self.least, 1) > self.budget_s:
            self.short, self.estimate_s = True, round_s
        return self.short

    def _round_s(self) -> float:
        """The slowest round measured, or the first round's estimate when none finished."""
        return max(self.rounds_s) if self.rounds_s else (self.estimate_s or 0.0)

    def restart_round(self) -> None:
        """What happened since the last tick (a sequential look) is not part of the next round's time."""
        self.previous = self.now()

    def __call__(self, number: int) -> bool:
        _, full = self.tick()
        return self.cannot_reach(number) or full

    def record(self) -> dict[str, Any]:
        return {"budget": {"budget_s": self.budget_s, "spent_s": round(self.elapsed, 3), "over": self.over}}

    def fitting_budget_s(self) -> int:
        """A budget that buys `least` rounds at the pace measured, with a tenth to spare."""
        return math.ceil(max(self.least, 1) * self._round_s() * 1.1)

    def line(self) -> str:
        """What the budget bought (complete rounds), for the end of the command."""
        rounds = len(self.rounds_s)
        spent = f"{self.elapsed:.0f} s of a {self.budget_s:.0f} s budget"
        if self.short:
            ran = f"{rounds} round(s)" if rounds else "part of the first round"
            return (
                f"budget: {ran} in {spent}; at about {self._round_s():.0f} s a round it cannot buy the "
                f"{self.least} a verdict needs, so it stopped: give --budget {self.fitting_budget_s()}s, or a smaller "
                "workload (e.g. --param matrix_size=...)"
            )
        if self.over:
            return f"budget: {rounds} round(s) in {spent}; the last round took longer than planned and ran over"
        return f"budget: {rounds} round(s) in {spent}"


def refuse_short(plan: Plan, budget_s: float, least: int, sides: int = 1) -> None:
    """Up front: refuse a budget that, at this workload's known cost of a round here (what a round of
    its noise run, `harness noise`, took), cannot buy the `least` rounds (of `sides` run folders each)
    the command needs for a verdict. Nothing has started."""
    job = plan.jobs[0]
    try:
        entries = noise_floor.load(noise_floor.host_fingerprint(job.device, job.threads))
    except HarnessError:
        return  # an unreadable floor is reported by the commands that need it; this is only a forecast
    entry = entries.get(noise_floor.key(plan.suite, job.params, job.precision, job.device))
    if entry is None:
        return  # no noise run of this workload stored here: no cost known
    each_s, where = float(entry["seconds_per_round"]), f"the noise run {plain(entry['run_id'])}"
    need = least * sides * each_s
    if need > budget_s:
        raise HarnessError(
            f"--budget {budget_s:.0f} s cannot buy the {least} rounds{' a side' if sides > 1 else ''} a verdict "
            f"needs: a round takes about {each_s * sides:.0f} s here ({where}); give --budget "
            f"{math.ceil(need * 1.1)}s, or a smaller workload (e.g. --param matrix_size=...)"
        )
