"""`harness ab` as a session (execute/session.py): two versions of the suites planned from one request,
their rounds decided (--rounds, --detect, --budget), run interleaved (execute/ab.py), and the two run
folders judged as one comparison; cli/ab.py prints what `AbOutcome` holds."""

from __future__ import annotations

from dataclasses import dataclass, replace

from harness.core.errors import HarnessError
from harness.core.statistics import observations_needed
from harness.execute import ab
from harness.execute.session import PlanRequest, RoundsRule, Settings, decide_rounds, plan_record, planned
from harness.judge import conclusion, sequential
from harness.judge.assessment import DISTURBED, FAILED, INTERRUPTED, Assessment, assess, run_exit_code
from harness.judge.compare import Comparison
from harness.store.run_folder import load_run

SIDES = ("both", "baseline", "candidate")  # --profile-side


class AbSession:
    """A baseline and a candidate tree (a checkout or a git revision; None: this checkout) of one plan."""

    def __init__(
        self,
        request: PlanRequest,
        settings: Settings,
        *,
        before: str,
        after: str | None,
        margin: str,
        profile_side: str = "both",
    ) -> None:
        if not request.suite:
            raise HarnessError("--suite is required (see `harness list`)")
        self.settings, self.before, self.after = settings, before, after
        self.margin = ab.parse_margin(margin)
        for given in (before, after):
            if given is not None:
                ab.check_tree(given)
        self.backend = settings.backend_for(request.device)
        ab.check_backend(self.backend)
        self.plan = planned(replace(request, profile=0), self.backend)  # each side profiles on its own
        steps = request.profile
        if profile_side != "both" and not steps:
            raise HarnessError("--profile-side picks the side that profiles: add --profile")
        self.profile_steps = (steps if profile_side != "candidate" else 0, steps if profile_side != "baseline" else 0)
        rule = RoundsRule(
            least=observations_needed(1),
            default=ab.DEFAULT_ROUNDS,
            refusal="--rounds {rounds} must be between {least} (fewer round medians a side can never reach p < 0.05) "
            "and {most}",
            sides=2,
            interleaved=True,
            margin=self.margin,
            budget_caps=False,
        )
        # With a budget: the most it may buy (a look, or the budget, ends the session first).
        self.rounds, self.notes = decide_rounds(self.plan, settings, rule)
        if settings.budget_s is None:
            ab.check_rounds(self.rounds)

    def plan_text(self) -> str:
        """--dry-run: the session in one line, then the plan each side runs."""
        budget_s = self.settings.budget_s
        how = f"{self.rounds} rounds a side" if budget_s is None else f"rounds until {budget_s:g} s are spent"
        line = (
            f"plan: {self.plan.suite}, {how}, baseline {self.before}, candidate {self.after or 'this checkout'}, "
            f"margin {self.margin:.1%}"
        )
        return line + "\n" + plan_record(self.plan)

    def run(self, argv: list[str]) -> AbOutcome:
        request = ab.Request(
            plan=self.plan,
            baseline=self.before,
            candidate=self.after,
            rounds=self.rounds,
            results_dir=self.settings.results_dir,
            backend=self.backend,
            options=self.settings.options(),
            budget_s=self.settings.budget_s,
            margin=self.margin,
            profile_steps=self.profile_steps,
        )
        return judge_session(ab.run_ab(request, argv=argv))


@dataclass(frozen=True)
class AbOutcome:
    """A finished session judged: each side's exit status and what is wrong with it, and the comparison
    (None, with `error`, when there is none to print)."""

    session: ab.Session
    sides: tuple[int, int]
    side_lines: tuple[str, ...]  # a side that did not pass, in words
    comparison: Comparison | None
    error: str | None
    schedule_line: str | None  # the looks of a session with a budget

    @property
    def short(self) -> bool:
        """The budget could not buy the rounds a verdict needs: not a comparison, but what would fit."""
        return self.session.short and self.session.budget_line is not None


def judge_session(session: ab.Session) -> AbOutcome:
    """Both sides' runs assessed, and compared as `harness compare` of the two folders finishes it
    (judge/conclusion.py: at the alpha its looks left, beyond its margin)."""
    runs = [load_run(session.baseline), load_run(session.candidate)]
    judged = [assess(run) for run in runs]
    sides = (run_exit_code(judged[0]), run_exit_code(judged[1]))
    lines = []
    for run, side, said in zip(runs, sides, judged, strict=True):
        # A failed job, check or flag on a side is a session that did not pass, as for `harness run`;
        # a side the machine disturbed (and nothing else) is exit 3: each said as what it is.
        if side == DISTURBED:
            why = said.crowded or "some samples were contended or throttled"
            lines.append(f"run {run.summary['run_id']}: every job ok, but {why}")
        elif side == FAILED:
            lines.append(
                f"not every job of run {run.summary['run_id']} passed ({side_problem(said)}); `harness show RUN` "
                "says why"
            )
    schedule = None if session.schedule is None else sequential.summary_line(session.schedule, session.seconds)
    if session.short and session.budget_line is not None:
        return AbOutcome(session, sides, tuple(lines), None, None, schedule)
    try:
        comparison = conclusion.finish(judged[0], judged[1])
    except HarnessError as error:  # e.g. a side whose jobs all failed: the runs are kept, the session failed
        if INTERRUPTED in sides:  # e.g. Ctrl-C in the first round: no round of a side finished
            why = "interrupted before both sides finished a round: no verdict; the run folders are kept"
            return AbOutcome(session, sides, tuple(lines), None, why, schedule)
        return AbOutcome(session, sides, tuple(lines), None, f"error: {error}; see the two run folders", schedule)
    return AbOutcome(session, sides, tuple(lines), comparison, None, schedule)


def side_problem(judged: Assessment) -> str:
    """What made a side fail, in a few words (its table says which job, check or number)."""
    if not judged.all_ran:
        return "not every job was ok"
    if not judged.gate_passed:
        return "a framework failed the agreement gate or computed in another precision"
    if judged.implausible:
        return "a number was implausible or escaped its clock"
    return "the run did not pass"
