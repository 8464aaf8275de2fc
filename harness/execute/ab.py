"""`harness ab`: two versions of the suites' code measured in one session, round by round.

Two separate runs on a shared machine differ by more than their code: a run lands in a faster or
slower state of the machine (frequency, caches, neighbours) and keeps it, so two runs started
minutes apart sit several % apart with nothing changed (`harness noise` measures it). No number of
rounds inside each run removes that, so a compare of separate runs cannot see a change smaller than
the drift. `ab` removes it by construction: the baseline's and the candidate's jobs alternate round
by round (A B, B A, A B ...: a drift linear in time hits both alike), each side pooled into a normal
run folder, the two marked as one session (run_folder.partners), and compared with the same
test as `harness compare` on their round medians, without the run-to-run allowance.

A side is a checkout of this project (a folder holding `suites/`, e.g. from `git worktree add`) or a
git revision of this checkout, exported into the side's run folder (`code/suites`), so the code that
ran stays beside its numbers. The host side (planning, validation, the report) is this checkout's.
"""

from __future__ import annotations

import io
import math
import subprocess
import tarfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.backends.base import BackendOptions, make_backend
from harness.core.errors import HarnessError
from harness.core.safe_files import new_folder, remove_tree
from harness.core.schema import AB_MARGIN, AB_SIDES, GIT_COMMIT, MAX_AB_MARGIN
from harness.core.statistics import observations_needed
from harness.execute.budget import RoundClock
from harness.execute.rounds import MAX_ROUNDS, Side, discarded_unless_started, execute_interleaved, pooled
from harness.judge import sequential
from harness.judge.assessment import assess
from harness.judge.compare import Change, compare_runs
from harness.judge.sequential import Schedule
from harness.store import suites_tree
from harness.store.plan import Plan, new_run_id
from harness.store.run_folder import (
    REPO,
    SUITES,
    Run,
    describe_code,
    interleaved_record,
    new_summary,
    open_run_folder,
    suites_digest,
    within,
)
from harness.text.escape import plain

BACKENDS = ("local", "docker")  # the backends that run a given suites folder (Slurm, Kubernetes: not yet)
DEFAULT_ROUNDS = observations_needed(23)  # 6: a verdict for families of up to 23 rows (see docs/method.md)
CODE_DIR = "code"


@dataclass(frozen=True)
class Tree:
    """The code one side runs: its suites folder, and its `code` record (None: this checkout's)."""

    given: str
    suites: Path
    code: dict[str, Any] | None


def check_rounds(rounds: int) -> int:
    least = observations_needed(1)
    if not least <= rounds <= MAX_ROUNDS:
        raise HarnessError(
            f"--rounds {rounds} must be between {least} (fewer round medians a side can never reach p < 0.05) "
            f"and {MAX_ROUNDS}"
        )
    return rounds


def parse_margin(text: str) -> float:
    """--margin PCT as a fraction ('1%' or '1' -> 0.01); anything else, or out of range, is one line."""
    try:
        value = float(text.strip().rstrip("%")) / 100
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_AB_MARGIN:  # NaN fails too
        raise HarnessError(
            f"--margin {plain(text)[:40]!r} is not a percentage from 0 to {MAX_AB_MARGIN:.0%}, e.g. --margin 1%"
        )
    return value + 0.0  # "-0" is 0, not a margin of -0.0 %


def check_backend(name: str) -> None:
    if name not in BACKENDS:
        raise HarnessError(f"harness ab runs with --backend local or docker, not {plain(name)}")


def git_revision(text: str) -> str | None:
    """The full commit `text` names in this checkout's repository, or None."""
    if text.startswith("-") or not (REPO / ".git").exists():  # never an option to git
        return None
    try:
        proc = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{text}^{{commit}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    sha = proc.stdout.strip()
    return sha if proc.returncode == 0 and GIT_COMMIT.fullmatch(sha) else None


def check_tree(text: str) -> None:
    """Refuse, before anything runs, a side that is neither a checkout nor a revision."""
    folder = Path(text).expanduser()
    if folder.is_dir():
        suites_tree.check_folder(folder / "suites", text)
        return
    sha = git_revision(text)
    if sha is None:
        raise HarnessError(
            f"{plain(text)!r} is neither a folder holding suites/ nor a git revision of {plain(REPO)}; "
            "give a checkout (`git worktree add DIR REV`) or a commit, branch or tag"
        )
    problem = suites_tree.revision_problem(REPO, sha)
    if problem:
        raise HarnessError(f"revision {plain(text)} ({sha[:12]}): suites/ {problem}; give another revision")


def resolve_tree(text: str | None, run_dir: Path) -> Tree:
    """The side's code: this checkout (None), another checkout, or a revision exported into run_dir."""
    if text is None:
        return Tree("this checkout", SUITES, None)
    folder = Path(text).expanduser()
    if folder.is_dir():
        suites = (folder / "suites").resolve()
        return Tree(text, suites, None if suites == SUITES.resolve() else describe_code(suites))
    sha = git_revision(text)
    if sha is None:  # it was a revision or a folder when the CLI checked it: gone since
        check_tree(text)
        raise HarnessError(f"{plain(text)!r} changed while the run was starting; run again")
    target = run_dir / CODE_DIR
    export_suites(sha, target, within(run_dir))
    suites = target / "suites"
    return Tree(text, suites, {"suites_sha256": suites_digest(suites), "git_commit": sha, "git_dirty": False})


def export_suites(sha: str, target: Path, anchor: Path) -> None:
    """`suites/` as committed at `sha`, written under `target` (regular files and folders only)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", sha, "suites"], capture_output=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HarnessError(f"git archive {sha[:12]} failed ({error}); give a checkout folder instead") from None
    if proc.returncode != 0:
        detail = plain(proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""])
        raise HarnessError(f"commit {sha[:12]} has no suites/ folder to run ({detail})")
    new_folder(target, anchor)  # fresh, in a run folder made a moment ago: nothing planted below it
    try:
        with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as archive:
            odd = [m.name for m in archive.getmembers() if not (m.isfile() or m.isdir())]
            if odd:  # check_tree refused these before anything ran; a second guard, never a partial tree
                raise HarnessError(f"commit {sha[:12]}: suites/ holds {plain(odd[0])}, not a file or folder")
            archive.extractall(target, filter="data")  # no links out, no absolute paths, no devices
    except tarfile.TarError as error:
        raise HarnessError(f"commit {sha[:12]}: its suites/ cannot be exported ({plain(error)})") from None


@dataclass(frozen=True)
class Request:
    plan: Plan
    baseline: str | None  # None: this checkout
    candidate: str | None
    rounds: int  # with a budget: the most it may buy
    results_dir: Path
    backend: str
    options: BackendOptions
    budget_s: float | None = None  # rounds until this is spent, looking at the evidence on the way
    margin: float = AB_MARGIN  # the smallest change a verdict calls (compare.Change.margin)
    profile_steps: tuple[int, int] = (0, 0)  # `--profile`: each side's steps per time metric (0: none)


@dataclass(frozen=True)
class Session:
    baseline: Path
    candidate: Path
    schedule: Schedule | None  # the looks of a session with a budget
    seconds: float
    budget_line: str | None = None  # what the budget bought
    short: bool = False  # the budget could not buy the rounds a verdict needs: the session stopped early


class Looks:
    """The `stop` of a session with a budget: after each round, a look when one is due (sequential.py)."""

    def __init__(self, sides: list[Side], schedule: Schedule) -> None:
        self.sides = sides
        self.schedule = schedule
        self.budget_s = schedule.budget_s
        self.clock = RoundClock(schedule.budget_s, least=observations_needed(1))
        self.codes = [side.code or describe_code() for side in sides]  # once: it asks git

    def __call__(self, number: int) -> bool:
        elapsed, _ = self.clock.tick()
        # The next round is planned at the slowest of the last few (a look included): one slow round
        # must not carry the session past its budget. A budget that cannot buy the rounds any verdict
        # needs at this pace is spent: the last look now, not rounds past the budget.
        due = self.clock.cannot_reach(number) or self.schedule.due(elapsed, self.clock.planned_s())
        stop = False
        if due is not None:
            look = self.schedule.look(number, elapsed, due, self.changes())
            print(look.line(), flush=True)
            stop = due or bool(look.crossed)
        self.clock.restart_round()
        return stop

    def after_side(self, number: int, done: int, of: int) -> bool:
        return self.clock.after_side(number, done, of)

    def record(self) -> dict[str, Any]:
        return {**self.clock.record(), "sequential": sequential.record(self.schedule)}

    def changes(self) -> list[Change]:
        """Every row as `harness compare` would judge the rounds finished so far."""
        runs = []
        for side, code in zip(self.sides, self.codes, strict=True):
            summary = {**new_summary(side.plan, side.backend.name, None, code), **side.extra}
            results = {job.framework: doc for job, doc in pooled(side)}
            runs.append(Run(path=side.run_dir, summary=summary, results=results))
        try:
            return compare_runs(assess(runs[0]), assess(runs[1])).changes
        except HarnessError:  # e.g. every job of a side failed so far: nothing to judge at this look
            return []


def profiled(plan: Plan, steps: int) -> Plan:
    """`plan` with every job profiling `steps` steps per time metric (0: none)."""
    return replace(plan, jobs=tuple(replace(job, profile=steps) for job in plan.jobs))


def run_ab(request: Request, argv: list[str] | None = None) -> Session:
    """Both sides' run folders, measured round by round, baseline first."""
    check_backend(request.backend)
    if request.budget_s is None:
        check_rounds(request.rounds)  # the sides were checked by the CLI, before anything (check_tree)
    began = time.monotonic()
    plans = [request.plan, replace(request.plan, run_id=new_run_id(request.plan.suite))]
    while plans[1].run_id == plans[0].run_id:
        plans[1] = replace(request.plan, run_id=new_run_id(request.plan.suite))
    plans = [profiled(plan, steps) for plan, steps in zip(plans, request.profile_steps, strict=True)]
    sides: list[Side] = []
    made: list[Path] = []
    try:
        for side, plan, given, partner in zip(
            AB_SIDES, plans, (request.baseline, request.candidate), plans[::-1], strict=True
        ):
            run_dir = open_run_folder(request.results_dir, plan.run_id, "run")
            made.append(run_dir)
            tree = resolve_tree(given, run_dir)
            backend = make_backend(request.backend, replace(request.options, suites_dir=tree.suites))
            label = f"{side}: {plain(tree.given)}, suites {(tree.code or describe_code())['suites_sha256'][:12]}"
            record = interleaved_record(side, partner.run_id, request.margin)
            sides.append(Side(plan, backend, run_dir, tree.code, record, label))
            print(label, flush=True)
    except BaseException:
        for run_dir in made:  # no job of the session began (an engine that does not answer, a bad side)
            remove_tree(run_dir)
        raise
    schedule = None if request.budget_s is None else Schedule(request.budget_s)
    stop = None if schedule is None else Looks(sides, schedule)
    with discarded_unless_started(sides):
        execute_interleaved(sides, request.rounds, argv, stop)
    seconds = time.monotonic() - began
    if stop is None:
        return Session(sides[0].run_dir, sides[1].run_dir, schedule, seconds)
    return Session(sides[0].run_dir, sides[1].run_dir, schedule, seconds, stop.clock.line(), stop.clock.short)
