"""`harness noise` as a session (execute/session.py): A/A rounds of one request in several separate runs,
the machine's noise floor measured from them (or read from finished rounds runs) and stored per machine
and workload; cli/noise.py prints what `NoiseOutcome` holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from harness.backends.base import make_backend
from harness.core.errors import HarnessError
from harness.core.exit_codes import DISTURBED, INTERRUPTED
from harness.execute.budget import RoundClock
from harness.execute.rounds import execute_rounds
from harness.execute.session import PlanRequest, RoundsRule, Settings, decide_rounds, plan_record, planned
from harness.judge import noise_floor
from harness.judge.noise_floor import MIN_ROUNDS, detectable, left_out, store
from harness.store.plan import new_run_id
from harness.store.run_folder import Run, load_run, resolve_run
from harness.text.escape import plain
from harness.text.numbers import fmt_share

DEFAULT_ROUNDS = 6
DEFAULT_SESSIONS = 3
SHOWN_ROUNDS = (4, 5, 6, 8)


@dataclass(frozen=True)
class NoiseOutcome:
    lines: list[str]  # the floor, for stdout
    warning: str | None  # for stderr: rounds the machine disturbed, left out
    exit_code: int


class NoiseSession:
    """`sessions` separate runs of `rounds` A/A rounds each (a budget shared between them)."""

    def __init__(self, request: PlanRequest, settings: Settings, sessions: int) -> None:
        if not 1 <= sessions <= 20:
            raise HarnessError(
                f"--sessions {sessions} must be 1 to 20 (default {DEFAULT_SESSIONS}; 1 measures no drift)"
            )
        self.settings, self.sessions = settings, sessions
        self.backend = settings.backend_for(request.device)
        self.plan = planned(request, self.backend)
        # Where the floor is stored, checked before minutes of sessions (a bad $HARNESS_CACHE_HOME is one
        # line now, not after every session has run), and a budget that cannot buy a floor's rounds.
        noise_floor.folder()
        refusal = "--rounds {rounds}: a noise floor needs {least} to {most} rounds (default {default})"
        rule = RoundsRule(least=MIN_ROUNDS, default=DEFAULT_ROUNDS, refusal=refusal, share=sessions)
        self.rounds, self.notes = decide_rounds(self.plan, settings, rule)

    def plan_text(self) -> str:
        """--dry-run: the plan every session runs, and how many."""
        return f"plan: {self.sessions} session(s) of {self.rounds} A/A rounds\n" + plan_record(self.plan)

    def measure(self, say: Callable[[str], None]) -> NoiseOutcome:
        """Run the sessions (`say`: a line between them) and store the floor."""
        budget_s = self.settings.budget_s
        chosen = make_backend(self.backend, self.settings.options())
        began = time.perf_counter()
        runs: list[Run] = []
        for done in range(self.sessions):
            plan = replace(self.plan, run_id=new_run_id(self.plan.suite))
            # Each session gets an equal share of what is left of the budget (a session that ran over
            # its share, to reach MIN_ROUNDS, leaves less to the others).
            left = None if budget_s is None else budget_s - (time.perf_counter() - began)
            clock = None if left is None else RoundClock(max(left / (self.sessions - done), 1.0), least=MIN_ROUNDS)
            target = self.settings.results_dir
            runs.append(
                load_run(execute_rounds(plan, chosen, target, self.rounds, argv=["harness", "noise"], stop=clock))
            )
            if clock is not None:
                say(f"session {done + 1}: {clock.line()}")
            if clock is not None and clock.short and not runs[-1].summary.get("interrupted"):
                # Its rounds are too few for a floor, and the next sessions' shares are no larger.
                raise HarnessError(
                    f"no noise floor stored: --budget {budget_s:g}s over {self.sessions} session(s) cannot buy the "
                    f"{MIN_ROUNDS} rounds each session needs (a round takes about {max(clock.rounds_s):.0f} s here); "
                    f"give --budget {clock.fitting_budget_s() * self.sessions}s, fewer --sessions, or a smaller "
                    f"workload; the run is kept: {plain(runs[-1].path)}"
                )
            if runs[-1].summary.get("interrupted"):
                # Ctrl-C (or SIGTERM) stops the whole measurement: a floor from cut-short sessions would be
                # stored as if it were whole, and the remaining sessions were not asked for any more.
                say(
                    f"interrupted: no noise floor stored ({len(runs) - 1} of {self.sessions} session(s) finished; "
                    f"their runs are kept: {', '.join(plain(r.path) for r in runs)})"
                )
                return NoiseOutcome([], None, INTERRUPTED)
        # With a budget the sessions may have bought different numbers of rounds: the floor is stored at
        # the fewest (its degrees of freedom are counted from them, never more than there were).
        rounds = self.rounds if budget_s is None else min(_rounds_of(r) for r in runs)
        return report(runs, time.perf_counter() - began, rounds)


def floor_from_runs(refs: list[str], settings: Settings) -> NoiseOutcome:
    """The floor read from finished runs of one workload with --rounds 3 or more."""
    loaded = [load_run(resolve_run(ref, settings.results_dir)) for ref in refs]
    seconds = sum(r["duration_s"] or 0.0 for run in loaded for r in run.results.values())
    return report(loaded, seconds, min(_rounds_of(run) for run in loaded))


def _rounds_of(loaded: Run) -> int:
    found = {r["settings"].get("rounds") or 1 for r in loaded.results.values() if r["status"] == "ok"}
    if not found or min(found) < MIN_ROUNDS:
        raise HarnessError(
            f"run {plain(loaded.summary.get('run_id'))} has {min(found, default=0)} round(s); a noise floor needs "
            f"{MIN_ROUNDS} or more: `harness run ... --rounds {DEFAULT_ROUNDS}`, or `harness noise --suite S`"
        )
    return min(found)


def report(runs: list[Run], seconds: float, rounds: int) -> NoiseOutcome:
    """Store the floor of `runs` and say what it is, and what a compare at a few round counts detects."""
    machine, entry = store(runs, rounds, seconds)
    lines = [
        f"noise floor of machine {machine} at {plain(entry['label'])} ({len(runs)} run(s) of {rounds} rounds: "
        f"{entry['run_id']}):"
    ]
    metrics = sum(len(per) for per in entry["noise"].values())
    for fw, per in entry["noise"].items():
        for metric, sigma in per.items():
            found = {k: detectable(sigma, k, metrics) for k in SHOWN_ROUNDS}
            reach = [f"{k}: {fmt_share(share) if share is not None else 'none'}" for k, share in found.items()]
            session = (entry["sessions"].get(fw) or {}).get(metric)
            drift = f"; run to run {fmt_share(session)} more" if session is not None else ""
            lines.append(
                f"  {plain(fw)} {plain(metric)}: {fmt_share(sigma)} between processes{drift}; smallest change a "
                f"compare of {metrics} rows detects at rounds " + ", ".join(reach)
            )
    if len(runs) < 2:
        lines.append("  one run only: how far whole runs drift apart is not measured (`--sessions 3`)")
    disturbed = left_out(runs)
    if not disturbed:
        return NoiseOutcome(lines, None, 0)
    # Stored from the rounds the machine left alone, as compare judges; but a script asked for a floor
    # measured on a quiet machine and must be able to tell it was not (exit DISTURBED).
    warning = (
        f"{disturbed} round(s) were contended or throttled and left out of the floor (as compare leaves them "
        "out); measure again on a quiet machine for a floor from every round"
    )
    return NoiseOutcome(lines, warning, DISTURBED)
