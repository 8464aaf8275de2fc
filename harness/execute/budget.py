"""A time budget for rounds (`--budget` on `ab`, `run`, `noise`, `bisect`): run rounds until another
would not fit in what is left.

A round count is a guess at how long the evidence takes; a budget is what the user actually has.
After each round the clock plans the next at the slowest of the last three (one slow round, e.g. the
first with its cold caches, must not carry the session past its budget), and says stop once that
round would end past the budget. Rounds below `least` are run whatever the clock says: fewer cannot
give a verdict (a noise floor from two processes, a bisect pair of three rounds), and the command
says it ran over instead of handing back nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol


class Stop(Protocol):
    """What `rounds.execute_interleaved` asks after each complete round (True: stop), and what it
    records in each run folder's plan.json (the budget) and summary.json (`record()`)."""

    budget_s: float

    def __call__(self, number: int) -> bool: ...

    def record(self) -> dict[str, Any]: ...


class RoundClock:
    """The `stop` of a budgeted execution: asked after each complete round, True to stop."""

    def __init__(self, budget_s: float, least: int = 1, now: Callable[[], float] = time.monotonic) -> None:
        self.budget_s = budget_s
        self.least = least
        self.now = now
        self.started = self.previous = now()
        self.rounds_s: list[float] = []
        self.over = False  # the budget ran out before `least` rounds: the rounds went on to `least`

    @property
    def elapsed(self) -> float:
        return self.now() - self.started

    def tick(self) -> tuple[float, bool]:
        """After a round: the time elapsed, and whether another round (planned at the slowest of the
        last three) would end past the budget."""
        now = self.now()
        self.rounds_s.append(now - self.previous)
        self.previous = now
        elapsed = now - self.started
        return elapsed, elapsed + max(self.rounds_s[-3:]) > self.budget_s

    def restart_round(self) -> None:
        """What happened since the last tick (a sequential look) is not part of the next round's time."""
        self.previous = self.now()

    def __call__(self, number: int) -> bool:
        _, full = self.tick()
        if full and number < self.least:
            self.over = True
            return False
        return full

    def record(self) -> dict[str, Any]:
        return {"budget": {"budget_s": self.budget_s, "spent_s": round(self.elapsed, 3), "over": self.over}}

    def line(self) -> str:
        """What the budget bought (complete rounds), for the end of the command."""
        rounds = len(self.rounds_s)
        spent = f"{self.elapsed:.0f} s of a {self.budget_s:.0f} s budget"
        if self.over:
            return f"budget: {rounds} round(s) in {spent}; it bought fewer than {self.least}, the fewest that give a verdict, so it ran over"
        return f"budget: {rounds} round(s) in {spent}"
