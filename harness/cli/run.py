"""`harness run` and `harness calibrate`: the commands that start jobs and print what they measured."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import (
    BackendName,
    BackendOption,
    CpusOption,
    Device,
    DeviceOption,
    FormatOption,
    PlanOptions,
    Quiet,
    ThreadsOption,
    plans,
)
from harness.core import cache_home
from harness.execute.session import RunSession, Settings, calibrate_machine
from harness.report.exports import Format, render_run
from harness.report.profile_text import profile_text


@plans()
def run(
    resume: Annotated[
        Optional[str], typer.Option("--resume", metavar="RUN", help="re-run only the jobs of RUN that are not ok")
    ] = None,
    fmt: FormatOption = Format.table,
    calibrate_mode: Annotated[
        str,
        typer.Option(
            "--calibrate",
            envvar="HARNESS_CALIBRATE",
            help="auto: measure this machine's achievable FLOP/s and bandwidth once per fingerprint "
            "(for '% of achievable'); always: re-measure; never: skip",
        ),
    ] = "auto",
    *,
    plan: PlanOptions,
) -> None:
    """Run one suite on several frameworks, one isolated job each, and print the comparison."""
    session = RunSession(plan.request(), plan.settings(), resume=resume, calibrate_mode=calibrate_mode)
    for line in session.notes:
        typer.echo(line, err=True)
    if session.settings.dry_run:
        typer.echo(session.plan_text())
        return
    finished = session.run(["harness"] + sys.argv[1:])
    if finished.budget_line is not None:
        typer.echo(finished.budget_line, err=True)
    judged = finished.judged
    typer.echo("\n" + render_run(judged, fmt))
    if fmt is Format.table and any(job.profile for job in session.plan.jobs):
        typer.echo("\n" + profile_text(judged))
    typer.echo(f"\nrun folder: {finished.run_dir}", err=fmt is not Format.table)
    if judged.crowded:
        typer.echo(f"run flagged: {judged.crowded}", err=True)
    raise typer.Exit(finished.exit_code)


def calibrate_command(
    frameworks: Annotated[
        Optional[str], typer.Option("--frameworks", "-f", help="comma-separated; default: numpy,jax,pytorch")
    ] = None,
    device: DeviceOption = Device("cpu"),
    backend: BackendOption = BackendName("auto"),
    threads: ThreadsOption = None,
    cpus: CpusOption = None,
    results_dir: Annotated[
        Optional[Path], typer.Option("--results-dir", hidden=True, help="not used: the ceilings live in the cache home")
    ] = None,
    quiet: Quiet = False,
    smoke: Annotated[
        bool,
        typer.Option(
            "--smoke",
            help="the calibrate suite's smoke size (N = 128 matmuls, an 8 MiB stream, 3 samples): a quick check "
            "that every stack calibrates; its ceilings are lower than a full calibration's and replace the cached ones",
        ),
    ] = False,
) -> None:
    """Measure this machine's achievable matmul FLOP/s and bandwidth with each stack (cached per machine)."""
    if results_dir is not None:  # accepted as before the cache home, so scripts that pass it keep working
        typer.echo(f"--results-dir is not used by calibrate: the ceilings live in {cache_home.home()}", err=True)
    settings = Settings(results_dir=Path(), backend=backend.value, quiet=quiet, cpus=cpus)
    for line in calibrate_machine(frameworks, device=device.value, threads=threads, settings=settings, smoke=smoke):
        typer.echo(line)
