"""`harness ab`: a baseline and a candidate version of the suites, interleaved in one session, compared."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import FailAboveOption, FormatOption, JunitOption, PlanOptions, ProfileSide, plans
from harness.cli.results import check_gate_options, conclude
from harness.core.errors import BAD_INPUT
from harness.core.exit_codes import FAILED, INTERRUPTED, worst
from harness.core.schema import AB_MARGIN
from harness.execute.ab_session import AbOutcome, AbSession
from harness.report.exports import Format


@plans()
def ab_command(
    before: Annotated[
        str,
        typer.Argument(
            metavar="BASELINE",
            help="the code before: a checkout of this project (a folder holding suites/) or a git revision",
        ),
    ],
    after: Annotated[
        Optional[str],
        typer.Argument(metavar="[CANDIDATE]", help="the code after, the same way [default: this checkout]"),
    ] = None,
    margin: Annotated[
        str,
        typer.Option(
            "--margin",
            metavar="PCT",
            help="the smallest change a verdict calls: two copies of the same code in two folders differ by up to "
            "0.7 % on a quiet machine, which the code did not make; 0 calls any difference the rounds see",
        ),
    ] = f"{AB_MARGIN:.0%}",
    profile_side: Annotated[
        ProfileSide,
        typer.Option(
            "--profile-side",
            help="with --profile: which side's jobs profile (both, or one: an A/A of the same code with one side "
            "profiled shows that profiling leaves the timed samples alone)",
        ),
    ] = ProfileSide.both,
    fail_above: FailAboveOption = None,
    junit: JunitOption = None,
    fmt: FormatOption = Format.table,
    *,
    plan: PlanOptions,
) -> None:
    """Measure two versions of the suites in one session, round by round (A B, B A, ...), and compare
    them: run-to-run drift hits both sides alike, so a change smaller than it can be seen. With
    --budget the evidence is looked at when 1/8, 1/4 and 1/2 of it has passed and the session stops
    at the first look that calls a change (group-sequential; docs/method.md)."""
    check_gate_options(fail_above, junit)
    session = AbSession(
        plan.request(), plan.settings(), before=before, after=after, margin=margin, profile_side=profile_side.value
    )
    for line in session.notes:
        typer.echo(line, err=True)
    if session.settings.dry_run:
        typer.echo(session.plan_text())
        return
    raise typer.Exit(session_verdict(session.run(["harness"] + sys.argv[1:]), fmt, fail_above, junit))


def session_verdict(outcome: AbOutcome, fmt: Format, fail_above: float | None, junit: Path | None) -> int:
    """Print a finished session's verdict and return the exit status of its sides and its gate."""
    session, sides = outcome.session, outcome.sides
    typer.echo("")
    typer.echo(f"baseline run: {session.baseline}\ncandidate run: {session.candidate}", err=fmt is not Format.table)
    if outcome.short:
        # Rounds too few for any verdict: not a comparison to print, but the budget (or size) that fits.
        typer.echo(f"error: {session.budget_line}", err=True)
        return worst(*(side for side in sides if side == FAILED), BAD_INPUT)
    if outcome.comparison is None:
        typer.echo(outcome.error, err=True)
        return INTERRUPTED if INTERRUPTED in sides else worst(*sides, FAILED)
    typer.echo(outcome.schedule_line or f"session: {session.seconds:.0f} s", err=fmt is not Format.table)
    code = conclude(outcome.comparison, fmt, fail_above, junit)
    for line in outcome.side_lines:
        typer.echo(line, err=True)
    return worst(*sides, code)
