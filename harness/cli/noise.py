"""`harness noise`: measure (or read from a rounds run) this machine's between-process noise floor."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from harness.cli.options import PlanOptions, plans
from harness.core.errors import HarnessError
from harness.execute.noise_session import DEFAULT_SESSIONS, NoiseOutcome, NoiseSession, floor_from_runs


@plans(skip=("detect",))
def noise(
    run_refs: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="[RUN]...", help="finished runs of one workload with --rounds 3+ to read the floor from"
        ),
    ] = None,
    sessions: Annotated[
        int, typer.Option(help="separate runs of those rounds: how far whole runs drift apart (2 or more)")
    ] = DEFAULT_SESSIONS,
    *,
    plan: PlanOptions,
) -> None:
    """How much each metric moves between two processes, and between two runs, of the same code on this
    machine (A/A experiments), stored per machine and workload: `compare` and `run --detect` read it."""
    if bool(run_refs) == (plan["suite"] is not None):
        raise HarnessError("give either RUN... (finished runs with --rounds 3 or more) or --suite S to measure")
    if run_refs:
        _print(floor_from_runs(run_refs, plan.settings()))
        return
    session = NoiseSession(plan.request(), plan.settings(), sessions)
    if session.settings.dry_run:
        typer.echo(session.plan_text())
        return
    _print(session.measure(lambda line: typer.echo(line, err=True)))


def _print(outcome: NoiseOutcome) -> None:
    for line in outcome.lines:
        typer.echo(line)
    if outcome.warning is not None:
        typer.echo(outcome.warning, err=True)
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)
