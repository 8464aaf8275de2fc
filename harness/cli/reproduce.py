"""`harness reproduce`: re-run what a result file records, through the same backend table as `run`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import (
    CpusOption,
    DataDir,
    Device,
    FormatOption,
    GpusOption,
    MemoryOption,
    Quiet,
    Transfer,
    TransferOption,
    WheelhouseOption,
    default_data_dir,
    default_results_dir,
    default_wheelhouse,
)
from harness.core.errors import HarnessError
from harness.execute.reproduce import Assessment, ReproduceSession, Run, reproduction_comparison
from harness.execute.session import Settings
from harness.report.comparison import render_comparison
from harness.report.exports import Format, render_run
from harness.text.escape import plain


def reproduce(
    ref: Annotated[str, typer.Argument(metavar="RESULT.json|RUN", help="a result file, or a run folder / id")],
    backend: Annotated[
        Optional[str],
        typer.Option(help="local, docker or slurm [default: where the result ran; kubernetes/compose: docker]"),
    ] = None,
    results_dir: Annotated[Optional[Path], typer.Option("--results-dir", help="where the new run goes")] = None,
    data_dir: DataDir = None,
    device: Annotated[
        Optional[Device],
        typer.Option(help="cpu or gpu instead of the recorded device (e.g. a CPU result on a GPU box)"),
    ] = None,
    wheelhouse: WheelhouseOption = None,
    memory: MemoryOption = None,
    cpus: CpusOption = None,
    gpus: GpusOption = None,
    transfer: TransferOption = Transfer.auto,
    quiet: Quiet = False,
    fmt: FormatOption = Format.table,
) -> None:
    """Re-run exactly what a result describes and compare the old and new numbers."""
    settings = Settings(
        results_dir=results_dir or default_results_dir(), quiet=quiet, memory=memory, cpus=cpus, gpus=gpus,
        transfer=transfer.value, wheelhouse=wheelhouse or default_wheelhouse(),
    )  # fmt: skip
    session = ReproduceSession(
        ref,
        backend=backend,
        device=device.value if device is not None else None,
        data_dir=data_dir or default_data_dir(),
        settings=settings,
    )
    for warning in session.warnings:
        typer.echo(f"warning: {plain(warning)}", err=True)  # names a recorded image tag: text from a file
    reproduced = session.run(["harness"] + sys.argv[1:])
    typer.echo(render_run(reproduced.judged, fmt))
    print_comparison(session.old, reproduced.judged, fmt)
    typer.echo(f"\nrun folder: {reproduced.run_dir}", err=fmt is not Format.table)
    raise typer.Exit(reproduced.exit_code)


def print_comparison(old: Run, judged: Assessment, fmt: Format) -> None:
    """The recorded run against its reproduction, finished as `harness compare OLD NEW` finishes it
    (judge/conclusion.py: the noise floor of the machine included)."""
    try:
        typer.echo("\n" + render_comparison(reproduction_comparison(old, judged), fmt))
    except HarnessError as error:  # e.g. the new jobs all failed: the table above says why
        typer.echo(f"\nno comparison: {error}", err=True)
