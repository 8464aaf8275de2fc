"""`harness ab`: a baseline and a candidate version of the suites, interleaved in one session, compared."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.backends.base import resolve_backend
from harness.cli.options import (
    BackendName,
    BackendOption,
    BudgetOption,
    DataDir,
    Device,
    DeviceOption,
    FailAboveOption,
    FormatOption,
    JunitOption,
    Precision,
    PrecisionOption,
    Processes,
    ProcessesOption,
    ProfileOption,
    ProfileSide,
    ProfileStepsOption,
    Quiet,
    ResultsDir,
    ThreadsOption,
    backend_options,
    default_data_dir,
    default_results_dir,
    profile_steps,
    require_datasets,
)
from harness.cli.results import check_gate_options, conclude
from harness.core.errors import BAD_INPUT, HarnessError
from harness.core.schema import AB_MARGIN
from harness.core.statistics import observations_needed
from harness.execute import ab
from harness.execute.budget import refuse_short
from harness.judge import conclusion, noise_floor, sequential
from harness.judge.assessment import DISTURBED, FAILED, INTERRUPTED, Assessment, assess, run_exit_code, worst
from harness.report.exports import Format
from harness.store.plan import PlanRequest, make_plan
from harness.store.run_folder import load_run


def ab_command(
    baseline: Annotated[
        str,
        typer.Argument(
            metavar="BASELINE",
            help="the code before: a checkout of this project (a folder holding suites/) or a git revision",
        ),
    ],
    candidate: Annotated[
        Optional[str],
        typer.Argument(metavar="[CANDIDATE]", help="the code after, the same way [default: this checkout]"),
    ] = None,
    suite: Annotated[str, typer.Option("--suite", "-s", help="suite name (see `harness list`)")] = "",
    frameworks: Annotated[
        Optional[str], typer.Option("--frameworks", "-f", help="comma-separated; default: all of the suite's")
    ] = None,
    param: Annotated[list[str], typer.Option("--param", "-p", help="suite parameter key=value; repeatable")] = [],  # noqa: B006
    repeat: Annotated[
        Optional[int], typer.Option(help="timed steady-state calls per metric [default: suite's]")
    ] = None,
    rounds: Annotated[
        Optional[int],
        typer.Option(
            help=f"rounds a side, alternating A B, B A ... [default: {ab.DEFAULT_ROUNDS}, or what --detect picks]"
        ),
    ] = None,
    detect: Annotated[
        Optional[str],
        typer.Option(
            "--detect",
            metavar="PCT",
            help="pick the rounds that detect a change of PCT % (from this machine's noise floor: `harness noise`)",
        ),
    ] = None,
    budget: BudgetOption = None,
    margin: Annotated[
        str,
        typer.Option(
            "--margin",
            metavar="PCT",
            help="the smallest change a verdict calls: two copies of the same code in two folders differ by up to "
            "0.7 % on a quiet machine, which the code did not make; 0 calls any difference the rounds see",
        ),
    ] = f"{AB_MARGIN:.0%}",
    device: DeviceOption = Device("cpu"),
    backend: BackendOption = BackendName("auto"),
    threads: ThreadsOption = None,
    precision: PrecisionOption = Precision("fp32"),
    profile: ProfileOption = False,
    profile_steps_given: ProfileStepsOption = None,
    profile_side: Annotated[
        ProfileSide,
        typer.Option(
            "--profile-side",
            help="with --profile: which side's jobs profile (both, or one: an A/A of the same code with one side "
            "profiled shows that profiling leaves the timed samples alone)",
        ),
    ] = ProfileSide.both,
    timeout: Annotated[Optional[float], typer.Option(help="per-job time limit in seconds [default: suite's]")] = None,
    fail_above: FailAboveOption = None,
    junit: JunitOption = None,
    results_dir: ResultsDir = None,
    data_dir: DataDir = None,
    fmt: FormatOption = Format.table,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="validate and print the plan; start nothing")] = False,
    quiet: Quiet = False,
    processes: ProcessesOption = Processes.fresh,
) -> None:
    """Measure two versions of the suites in one session, round by round (A B, B A, ...), and compare
    them: run-to-run drift hits both sides alike, so a change smaller than it can be seen. With
    --budget the evidence is looked at when 1/8, 1/4 and 1/2 of it has passed and the session stops
    at the first look that calls a change (group-sequential; docs/method.md)."""
    if not suite:
        raise HarnessError("--suite is required (see `harness list`)")
    check_gate_options(fail_above, junit)
    margin_share = ab.parse_margin(margin)
    for given in (baseline, candidate):
        if given is not None:
            ab.check_tree(given)
    backend_name = resolve_backend(backend.value, pythons={}, gpus=None, device=device.value)
    ab.check_backend(backend_name)
    plan = make_plan(
        PlanRequest(
            suite=suite,
            frameworks=frameworks,
            params=tuple(param),
            repeat=repeat,
            device=device.value,
            threads=threads,
            timeout_s=timeout,
            data_dir=str((data_dir or default_data_dir()).resolve()),
            precision=precision.value,
        ),
        backend=backend_name,
    )
    require_datasets(plan)
    steps = profile_steps(profile, profile_steps_given)
    if profile_side != ProfileSide.both and not steps:
        raise HarnessError("--profile-side picks the side that profiles: add --profile")
    budget_s = None if budget is None else sequential.parse_budget(budget)
    if budget_s is not None and rounds is not None:
        raise HarnessError("--budget buys as many rounds as it can and stops when the evidence is clear; "
                           "drop --rounds, or drop --budget")  # fmt: skip
    if detect is not None:
        if rounds is not None:
            raise HarnessError("--detect picks the rounds itself; drop --rounds")
        # With a budget: refused here unless the budget buys the rounds the change needs.
        rounds, line = noise_floor.plan_rounds(plan, detect, interleaved=True, budget_s=budget_s, margin=margin_share)
        typer.echo(line, err=True)
    if budget_s is not None:
        if detect is None:  # (--detect has checked its own rounds against the budget)
            refuse_short(plan, budget_s, observations_needed(1), sides=2)
        chosen = sequential.MAX_ROUNDS  # the budget ends the session, or a look does
    else:
        chosen = ab.check_rounds(rounds if rounds is not None else ab.DEFAULT_ROUNDS)
    if dry_run:
        how = f"{chosen} rounds a side" if budget_s is None else f"rounds until {budget_s:g} s are spent"
        typer.echo(
            f"plan: {plan.suite}, {how}, baseline {baseline}, candidate {candidate or 'this checkout'}, "
            f"margin {margin_share:.1%}"
        )
        return
    request = ab.Request(
        plan=plan,
        baseline=baseline,
        candidate=candidate,
        rounds=chosen,
        results_dir=results_dir or default_results_dir(),
        backend=backend_name,
        options=backend_options(quiet=quiet, processes=processes),
        budget_s=budget_s,
        margin=margin_share,
        profile_steps=(
            steps if profile_side != ProfileSide.candidate else 0,
            steps if profile_side != ProfileSide.baseline else 0,
        ),
    )
    session = ab.run_ab(request, argv=["harness"] + sys.argv[1:])
    raise typer.Exit(session_verdict(session, fmt, fail_above, junit))


def session_verdict(session: ab.Session, fmt: Format, fail_above: float | None, junit: Path | None) -> int:
    """Print a finished session's verdict, the comparison finished as `harness compare` of its two run
    folders finishes it (judge/conclusion.py: at the alpha its looks left, beyond its margin), and
    return the exit status of its sides and its gate."""
    typer.echo("")
    typer.echo(f"baseline run: {session.baseline}\ncandidate run: {session.candidate}", err=fmt is not Format.table)
    runs = [load_run(session.baseline), load_run(session.candidate)]
    judged = [assess(run) for run in runs]
    sides = [run_exit_code(side) for side in judged]
    if session.short and session.budget_line is not None:
        # Rounds too few for any verdict: not a comparison to print, but the budget (or size) that fits.
        typer.echo(f"error: {session.budget_line}", err=True)
        return worst(*(side for side in sides if side == FAILED), BAD_INPUT)
    try:
        comparison = conclusion.finish(judged[0], judged[1])
    except HarnessError as error:  # e.g. a side whose jobs all failed: the runs are kept, the session failed
        if INTERRUPTED in sides:  # e.g. Ctrl-C in the first round: no round of a side finished
            typer.echo("interrupted before both sides finished a round: no verdict; the run folders are kept", err=True)
            return INTERRUPTED
        typer.echo(f"error: {error}; see the two run folders", err=True)
        return worst(*sides, FAILED)
    if session.schedule is not None:
        typer.echo(sequential.summary_line(session.schedule, session.seconds), err=fmt is not Format.table)
    else:
        typer.echo(f"session: {session.seconds:.0f} s", err=fmt is not Format.table)
    code = conclude(comparison, fmt, fail_above, junit)
    for run, side, said in zip(runs, sides, judged, strict=True):
        # A failed job, check or flag on a side is a session that did not pass, as for `harness run`;
        # a side the machine disturbed (and nothing else) is exit 3, as for `harness run`: each said as
        # what it is (every job ok on a busy machine is not "a job failed").
        if side == DISTURBED:
            why = said.crowded or "some samples were contended or throttled"
            typer.echo(f"run {run.summary['run_id']}: every job ok, but {why}", err=True)
        elif side == FAILED:
            typer.echo(
                f"not every job of run {run.summary['run_id']} passed ({side_problem(said)}); `harness show RUN` says why",
                err=True,
            )
    return worst(*sides, code)


def side_problem(judged: Assessment) -> str:
    """What made a side fail, in a few words (its table says which job, check or number)."""
    if not judged.all_ran:
        return "not every job was ok"
    if not judged.gate_passed:
        return "a framework failed the agreement gate or computed in another precision"
    if judged.implausible:
        return "a number was implausible or escaped its clock"
    return "the run did not pass"
