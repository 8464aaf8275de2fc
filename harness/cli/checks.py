"""`harness doctor` and `harness selftest`: is this machine fit to produce numbers we stand behind."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import Device, DeviceOption, PlanOptions, ResultsDir, default_results_dir, plans
from harness.core.errors import HarnessError
from harness.core.exit_codes import DISTURBED, FAILED
from harness.execute.catalog import selftest_suites
from harness.execute.doctor import run_checks


def doctor(device: DeviceOption = Device("cpu")) -> None:
    """Check, in order, everything a trustworthy run needs; one PASS/FAIL line each, with the fix."""
    ok = run_checks(device.value, lambda check: typer.echo(check.line()))
    typer.echo("all checks passed" if ok else "some checks failed: see the fix lines above")
    raise typer.Exit(0 if ok else 1)


# The plan's options a selftest takes: it picks its suites, their frameworks, size and data itself.
@plans(skip=("suite", "frameworks", "param", "baseline", "smoke", "data_dir"), session=False)
def selftest(
    suites: Annotated[
        Optional[str], typer.Option("--suites", help="comma-separated suites [default: every visible suite]")
    ] = None,
    calibrate: Annotated[
        bool, typer.Option("--calibrate/--no-calibrate", help="measure the achievable ceilings first (% of achievable)")
    ] = True,
    results_dir: ResultsDir = None,
    mistakes: Annotated[
        bool,
        typer.Option(
            "--mistakes",
            help="instead: run the corpus of planted benchmarking mistakes and show which guard caught each",
        ),
    ] = False,
    only: Annotated[
        Optional[str], typer.Option("--only", help="with --mistakes: only these mistakes (comma-separated)")
    ] = None,
    *,
    plan: PlanOptions,
) -> None:
    """Every suite at its smoke size on DEVICE with this interpreter's frameworks; one line per check."""
    from harness.execute.selftest import run_selftest

    if only is not None and not mistakes:
        raise HarnessError("--only picks planted mistakes: add --mistakes, or use --suites to pick suites")
    if mistakes:
        if suites is not None:
            raise HarnessError("--mistakes runs its own hidden suite: leave out --suites")
        _mistakes(plan["device"].value, results_dir or default_results_dir(), only)
    names = selftest_suites(suites)  # an unknown or internal name: one line before anything runs
    checks = run_selftest(
        device=plan["device"].value,
        results_dir=results_dir or default_results_dir(),
        suites=names,
        echo=typer.echo,
        calibrate_first=calibrate,
        request=plan.request(suite=""),  # each suite named by the selftest itself
    )
    failed = [c for c in checks if c.passed is False]
    passed = sum(c.passed is True for c in checks)
    busy = sum(c.disturbed for c in checks)
    rest = len(checks) - passed - len(failed) - busy
    typer.echo(f"selftest: {passed} passed, {len(failed)} failed, {busy} disturbed, {rest} not applicable")
    raise typer.Exit(FAILED if failed else DISTURBED if busy else 0)


def _mistakes(device: str, results_dir: Path, only: str | None) -> None:
    from harness.execute.mistakes import exit_status, limitation_rows, run_mistakes, summary, table

    names = [n.strip() for n in only.split(",")] if only is not None else None
    if names is not None and (not all(names) or len(set(names)) != len(names)):
        raise HarnessError(f"--only {only!r} has an empty or repeated name; give e.g. --only memoised,own_data")
    outcomes = run_mistakes(device=device, results_dir=results_dir, only=names, echo=typer.echo)
    typer.echo("")
    for row in table(outcomes):  # markdown: it reads in a terminal and pastes into a report
        typer.echo(row)
    if names is None:  # the whole corpus: what it cannot catch yet is part of the answer
        for row in limitation_rows():
            typer.echo(row)
    typer.echo(summary(outcomes, limitations=names is None))
    raise typer.Exit(exit_status(outcomes))
