"""`harness bisect`: which version of a package in a stack first changed a suite's metric, significantly."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import (
    BudgetOption,
    Precision,
    PrecisionOption,
    Processes,
    ProcessesOption,
    Quiet,
    ResultsDir,
    WheelhouseOption,
    default_results_dir,
    default_wheelhouse,
)
from harness.core.errors import HarnessError
from harness.execute.bisect.locks import parse_versions
from harness.execute.bisect.render import render
from harness.execute.bisect.run import Request, run_bisect
from harness.execute.bisect.verdict import MIN_ROUNDS, exit_code
from harness.judge.sequential import parse_budget
from harness.text.escape import plain
from suites.contract.frameworks import STACKS


class BisectBackend(str, Enum):
    local = "local"
    docker = "docker"


def bisect(
    suite: Annotated[str, typer.Option("--suite", "-s", help="suite name (see `harness list --all`)")],
    metric: Annotated[str, typer.Option("--metric", "-m", help="the timed metric to compare, e.g. matmul")],
    stack: Annotated[str, typer.Option("--stack", help="the stack whose lock the versions are put into")],
    package: Annotated[str, typer.Option("--package", help="the package whose versions are bisected")],
    versions: Annotated[str, typer.Option("--versions", help="comma-separated, in order, e.g. 1.26.4,2.0.0,2.1.0")],
    framework: Annotated[
        Optional[str], typer.Option("--framework", "-f", help="[default: the suite's first framework on the stack]")
    ] = None,
    rounds: Annotated[
        Optional[int],
        typer.Option(
            help=f"interleaved rounds V1 V2 ... Vn, K times [default: the fewest with which the pairs can give a "
            f"verdict: {MIN_ROUNDS} for two versions, more for more]"
        ),
    ] = None,
    budget: BudgetOption = None,
    param: Annotated[list[str], typer.Option("--param", "-p", help="suite parameter key=value; repeatable")] = [],  # noqa: B006
    repeat: Annotated[
        Optional[int], typer.Option(help="timed steady-state calls per metric [default: suite's]")
    ] = None,
    precision: PrecisionOption = Precision("fp32"),
    find_links: Annotated[
        list[Path], typer.Option("--find-links", help="a folder of wheels pip also looks in; repeatable")
    ] = [],  # noqa: B006
    no_index: Annotated[bool, typer.Option("--no-index", help="take wheels from --find-links only")] = False,
    backend: Annotated[
        BisectBackend,
        typer.Option(help="local: one venv per version; docker: one stack image per version (tagged by its lock)"),
    ] = BisectBackend.local,
    wheelhouse: WheelhouseOption = None,
    results_dir: ResultsDir = None,
    quiet: Quiet = False,
    processes: ProcessesOption = Processes.fresh,
) -> None:
    """Run a suite against several versions of one package (one venv or stack image each, from
    generated locks), interleaved, and report the first version whose change is significant."""
    if stack not in STACKS:
        raise HarnessError(f"--stack {plain(stack)!r} is not one of {', '.join(STACKS)}")
    if no_index and not find_links:
        raise HarnessError("--no-index needs --find-links DIR: without an index pip has nowhere to look")
    request = Request(
        suite=suite,
        metric=metric,
        stack=stack,
        package=package,
        versions=parse_versions(versions),
        results_dir=results_dir or default_results_dir(),
        framework=framework,
        rounds=rounds,
        params=param,
        repeat=repeat,
        precision=precision.value,
        find_links=[p.resolve() for p in find_links],
        no_index=no_index,
        echo=not quiet,
        fork_rounds=processes is Processes.forked,
        backend=backend.value,
        wheelhouse=(wheelhouse or default_wheelhouse()) if backend is BisectBackend.docker else wheelhouse,
        budget_s=None if budget is None else parse_budget(budget),
    )
    outcome = run_bisect(request, argv=["harness"] + sys.argv[1:])
    typer.echo("\n" + render(outcome))
    typer.echo(f"\nbisect folder: {outcome.folder}")
    raise typer.Exit(exit_code(list(outcome.runs.values()), outcome.pairs))
