"""`harness reproduce`: re-run what a result file records, through the same backend table as `run`."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.backends.base import make_backend
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
    backend_options,
    default_data_dir,
    default_results_dir,
)
from harness.core.errors import HarnessError
from harness.execute.runner import execute
from harness.judge import conclusion
from harness.judge.assessment import Assessment, assess, run_exit_code
from harness.report.comparison import render_comparison
from harness.report.exports import Format, render_run
from harness.store.run_folder import Run, load_run
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
    from harness.backends.base import FACTORIES
    from harness.execute.reproduce import plan_reproduction

    if backend is not None and backend not in FACTORIES:
        raise HarnessError(f"--backend {plain(backend)!r} is not one of {', '.join(FACTORIES)}")
    options = backend_options(
        quiet=quiet, memory=memory, cpus=cpus, gpus=gpus, transfer=transfer, wheelhouse=wheelhouse
    )
    target = results_dir or default_results_dir()
    data = str((data_dir or default_data_dir()).resolve())
    repro = plan_reproduction(ref, target, backend, data, device.value if device is not None else None)
    if gpus is not None and (repro.backend != "docker" or any(j.device != "gpu" for j in repro.plan.jobs)):
        raise HarnessError(f"--gpus {gpus} selects GPUs for docker jobs on --device gpu; drop --gpus")
    for warning in repro.warnings:
        typer.echo(f"warning: {plain(warning)}", err=True)  # names a recorded image tag: text from a file
    chosen = make_backend(repro.backend, replace(options, pinned=repro.pinned))
    run_dir = execute(repro.plan, chosen, target, argv=["harness"] + sys.argv[1:])
    judged = assess(load_run(run_dir))
    typer.echo(render_run(judged, fmt))
    print_comparison(repro.old, judged, fmt)
    typer.echo(f"\nrun folder: {run_dir}", err=fmt is not Format.table)
    raise typer.Exit(run_exit_code(judged))


def print_comparison(old: Run, judged: Assessment, fmt: Format) -> None:
    """The recorded run against its reproduction, finished as `harness compare OLD NEW` finishes it
    (judge/conclusion.py: the noise floor of the machine included)."""
    try:
        typer.echo("\n" + render_comparison(conclusion.finish(assess(old), judged), fmt))
    except HarnessError as error:  # e.g. the new jobs all failed: the table above says why
        typer.echo(f"\nno comparison: {error}", err=True)
