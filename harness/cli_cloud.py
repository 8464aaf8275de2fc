"""`harness doctor` and `harness reproduce`: from "my box" to "a rented GPU" with the same numbers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.compare import compare_runs
from harness.compare_render import render_comparison
from harness.doctor import Check, run_checks
from harness.errors import HarnessError
from harness.escape import plain
from harness.exports import Format, render_run
from harness.runner import execute
from harness.runs import load_run


def doctor(
    device: Annotated[str, typer.Option(help="cpu, or gpu to check the NVIDIA path too")] = "cpu",
) -> None:
    """Check, in order, everything a trustworthy run needs; one PASS/FAIL line each, with the fix."""
    if device not in ("cpu", "gpu"):
        raise HarnessError(f"--device {device!r} is not cpu or gpu")

    def emit(check: Check) -> None:
        typer.echo(check.line())

    ok = run_checks(device, emit)
    typer.echo("all checks passed" if ok else "some checks failed: see the fix lines above")
    raise typer.Exit(0 if ok else 1)


def clean(
    run_id: Annotated[
        Optional[str], typer.Option("--run", help="only this run id [default: every harness run]")
    ] = None,
) -> None:
    """Remove job containers and volumes a killed harness left behind (found by their labels)."""
    from harness.clean import clean as remove_leftovers

    cleaned = remove_leftovers(run_id)
    for name in cleaned.containers:
        typer.echo(f"removed container {name}")
    for name in cleaned.volumes:
        typer.echo(f"removed volume {name}")
    if not cleaned.containers and not cleaned.volumes:
        typer.echo("nothing to clean")


def reproduce(
    ref: Annotated[str, typer.Argument(metavar="RESULT.json|RUN", help="a result file, or a run folder / id")],
    backend: Annotated[Optional[str], typer.Option(help="docker or local [default: what the result recorded]")] = None,
    results_dir: Annotated[Optional[Path], typer.Option("--results-dir", help="where the new run goes")] = None,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="dataset folder")] = None,
    device: Annotated[
        Optional[str], typer.Option(help="cpu or gpu instead of the recorded device (e.g. a CPU result on a GPU box)")
    ] = None,
    wheelhouse: Annotated[Optional[Path], typer.Option(help="build missing images from these wheels")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="do not echo job output")] = False,
    fmt: Annotated[Format, typer.Option("--format", help="output format")] = Format.table,
) -> None:
    """Re-run exactly what a result describes and compare the old and new numbers."""
    from harness.cli import default_data_dir, default_results_dir, run_exit_code
    from harness.reproduce import plan_reproduction

    if backend not in (None, "docker", "local"):
        raise HarnessError(f"--backend {backend!r} is not docker or local")
    target = results_dir or default_results_dir()
    data = str((data_dir or default_data_dir()).resolve())
    if device not in (None, "cpu", "gpu"):
        raise HarnessError(f"--device {device!r} is not cpu or gpu")
    repro = plan_reproduction(ref, target, backend, data, device)
    for warning in repro.warnings:
        typer.echo(f"warning: {plain(warning)}", err=True)  # names a recorded image tag: text from a file
    if repro.backend == "docker":
        from harness.backends.docker_backend import DockerBackend
        from harness.images import connect

        chosen: object = DockerBackend(connect(), echo=not quiet, wheelhouse=wheelhouse, pinned=repro.pinned)
    else:
        from harness.backends.local import LocalBackend

        chosen = LocalBackend(echo=not quiet)
    run_dir = execute(repro.plan, chosen, target, argv=["harness"] + sys.argv[1:])  # type: ignore[arg-type]
    new = load_run(run_dir)
    typer.echo(render_run(new, fmt))
    try:
        typer.echo("\n" + render_comparison(compare_runs(repro.old, new), fmt))
    except HarnessError as error:  # e.g. the new jobs all failed: the table above says why
        typer.echo(f"\nno comparison: {error}", err=True)
    typer.echo(f"\nrun folder: {run_dir}", err=fmt is not Format.table)
    raise typer.Exit(run_exit_code(new))
