"""`harness bisect`: which version of a package in a stack first changed a suite's metric, significantly."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import PlanOptions, WheelhouseOption, default_wheelhouse, plans
from harness.execute.bisect_session import BisectSession


class BisectBackend(str, Enum):
    local = "local"
    docker = "docker"


# bisect's --framework (one) and --backend (local or docker) are its own; --detect, the limits and
# --python do not apply to a venv per version.
BISECT_OWN = ("frameworks", "backend", "detect", "memory", "cpus", "gpus", "transfer", "python")


@plans(skip=BISECT_OWN)
def bisect(
    metric: Annotated[str, typer.Option("--metric", "-m", help="the timed metric to compare, e.g. matmul")],
    stack: Annotated[str, typer.Option("--stack", help="the stack whose lock the versions are put into")],
    package: Annotated[str, typer.Option("--package", help="the package whose versions are bisected")],
    versions: Annotated[str, typer.Option("--versions", help="comma-separated, in order, e.g. 1.26.4,2.0.0,2.1.0")],
    framework: Annotated[
        Optional[str], typer.Option("--framework", "-f", help="[default: the suite's first framework on the stack]")
    ] = None,
    find_links: Annotated[
        list[Path], typer.Option("--find-links", help="a folder of wheels pip also looks in; repeatable")
    ] = [],  # noqa: B006
    no_index: Annotated[bool, typer.Option("--no-index", help="take wheels from --find-links only")] = False,
    backend: Annotated[
        BisectBackend,
        typer.Option(help="local: one venv per version; docker: one stack image per version (tagged by its lock)"),
    ] = BisectBackend.local,
    wheelhouse: WheelhouseOption = None,
    *,
    plan: PlanOptions,
) -> None:
    """Run a suite against several versions of one package (one venv or stack image each, from
    generated locks), interleaved, and report the first version whose change is significant."""
    session = BisectSession(
        plan.request(),
        # --backend docker builds an image per version: $HARNESS_WHEELHOUSE applies there, as for `build`.
        plan.settings(
            backend=backend.value,
            wheelhouse=default_wheelhouse() if backend is BisectBackend.docker and wheelhouse is None else wheelhouse,
        ),
        metric=metric,
        stack=stack,
        package=package,
        versions=versions,
        framework=framework,
        find_links=find_links,
        no_index=no_index,
    )
    if session.settings.dry_run:
        typer.echo(session.plan_text())
        return
    outcome = session.run(["harness"] + sys.argv[1:])
    typer.echo("\n" + outcome.text)
    typer.echo(f"\nbisect folder: {outcome.folder}")
    raise typer.Exit(outcome.exit_code)
