"""`harness show`, `compare` and `report`: everything read back from finished run folders."""

from __future__ import annotations

import contextlib
import math
import stat
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import FailAboveOption, FormatOption, JunitOption, ResultsDir, RunRef, default_results_dir
from harness.core.errors import HarnessError
from harness.core.safe_files import kind, write_bytes_atomic
from harness.execute.results import Comparison, Run, assess, compared, gate, read_run, resolve_run, unfinished
from harness.report.comparison import render_comparison
from harness.report.exports import Format, render_run
from harness.report.folder import write_report
from harness.report.junit import comparison_junit
from harness.report.profile_text import profile_text, render_profile_comparison
from harness.report.sparklines import render_plots
from harness.text.escape import plain, utf8


def show(
    run_ref: RunRef,
    results_dir: ResultsDir = None,
    fmt: FormatOption = Format.table,
    plot: Annotated[
        bool, typer.Option("--plot", help="after the table: every sample in order as a sparkline, and learning curves")
    ] = False,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile",
            help="after the table: where each framework's steady step spends its time (runs with --profile)",
        ),
    ] = False,
) -> None:
    """Re-render a finished run from its files alone."""
    for option, given in (("--plot", plot), ("--profile", profile)):
        if given and fmt != Format.table:
            raise HarnessError(f"{option} draws text for a terminal and goes with --format table, not {fmt.value}")
    run = whole(read_run(resolve_run(run_ref, results_dir or default_results_dir())))
    judged = assess(run)
    typer.echo(render_run(judged, fmt))
    if plot:
        typer.echo("\n" + render_plots(judged))
    if profile:
        typer.echo("\n" + profile_text(judged))
    said_unfinished(run)


def compare(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A", help="the reference run (before)")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B", help="the run compared with it (after)")],
    fail_above: FailAboveOption = None,
    junit: JunitOption = None,
    results_dir: ResultsDir = None,
    fmt: FormatOption = Format.table,
    profile: Annotated[
        bool,
        typer.Option("--profile", help="after the verdicts: the two runs' profiles side by side, category by category"),
    ] = False,
) -> None:
    """Two runs of one suite: per-metric ratio with its interval, significance, geometric mean."""
    check_gate_options(fail_above, junit)
    if profile and fmt != Format.table:
        raise HarnessError(f"--profile draws text for a terminal and goes with --format table, not {fmt.value}")
    base = results_dir or default_results_dir()
    runs = [whole(read_run(resolve_run(run, base))) for run in (run_a, run_b)]
    for run in runs:
        if (found := unfinished(run)) is not None:
            typer.echo(f"warning: {found[0]}", err=True)  # its finished jobs still compare
    both = compared(runs[0], runs[1])
    code = conclude(both.comparison, fmt, fail_above, junit)
    if profile:
        names = (plain(runs[0].path.name), plain(runs[1].path.name))
        typer.echo("\n" + render_profile_comparison(both.before.breakdowns, both.after.breakdowns, names))
        for problem in (*both.before.profile_problems, *both.after.profile_problems):
            typer.echo(f"profile: {plain(problem)}", err=True)
    raise typer.Exit(code)


def whole(run: Run) -> Run:
    """`run`, unless it has no job at all: then one line and its exit status (`unfinished`), nothing
    rendered, since an empty table would read as a run that went fine."""
    found = unfinished(run)
    if found is not None and not run.summary["jobs"]:
        typer.echo(f"error: {found[0]}", err=True)
        raise typer.Exit(found[1])
    return run


def said_unfinished(run: Run) -> None:
    """After a run's table: the line that says it has not finished, and its exit status."""
    found = unfinished(run)
    if found is not None:
        typer.echo(found[0], err=True)
        raise typer.Exit(found[1])


def check_gate_options(fail_above: float | None, junit: Path | None) -> None:
    """--fail-above and --junit, refused before any work."""
    if fail_above is not None and not (fail_above >= 0 and math.isfinite(fail_above)):  # nan would disable the gate
        raise HarnessError(f"--fail-above {fail_above} must be a finite percentage of 0 or more")
    if junit is not None:
        check_output_file(junit, "--junit")


def conclude(comparison: Comparison, fmt: Format, fail_above: float | None, junit: Path | None) -> int:
    """Print a finished comparison (judge/conclusion.py `finish`: the sequential correction, the noise
    floor of the machine that measured both runs) and write its JUnit report; the exit status of its
    gate (`conclusion.gate`: 0 without `--fail-above`)."""
    typer.echo(render_comparison(comparison, fmt))
    if junit is not None:
        write_bytes_atomic(junit, utf8(comparison_junit(comparison, fail_above)))
        typer.echo(f"junit: {plain(junit)}", err=True)
    verdict = gate(comparison, fail_above)
    for reason in verdict.reasons:
        typer.echo(reason, err=True)
    return verdict.code


def check_output_file(path: Path, option: str) -> None:
    """Refuse before any work what cannot take a report: a folder, a link, a FIFO, a device or a socket,
    a missing parent folder."""
    if path.is_symlink():
        raise HarnessError(
            f"{option} {plain(path)} is a symbolic link; give a plain file path (links are not followed)"
        )
    if path.is_dir():
        raise HarnessError(f"{option} {plain(path)} is a folder; give a file path, e.g. {option} compare.xml")
    if not path.parent.is_dir():
        raise HarnessError(f"{option} {plain(path)}: the folder {plain(path.parent)} does not exist; create it first")
    with contextlib.suppress(FileNotFoundError):
        mode = path.lstat().st_mode
        if not stat.S_ISREG(mode):  # a FIFO, a device or a socket is never replaced by a report
            raise HarnessError(f"{option} {plain(path)} is a {kind(mode)}; give the path of a regular file to write")


def report(
    run_ref: RunRef,
    out: Annotated[Optional[Path], typer.Option("--out", help="report folder [default: RUN/report]")] = None,
    figures: Annotated[bool, typer.Option("--figures/--no-figures", help="draw PNG figures (needs matplotlib)")] = True,
    results_dir: ResultsDir = None,
) -> None:
    """Write a self-contained report folder: report.md (tables, checks, environment) and figures."""
    run_dir = resolve_run(run_ref, results_dir or default_results_dir())
    run = whole(read_run(run_dir))
    path = write_report(assess(run), out or run_dir / "report", figures=figures)
    typer.echo(f"report: {path}")
    said_unfinished(run)
