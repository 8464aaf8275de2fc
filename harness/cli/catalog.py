"""`harness list` and `harness describe`: what the suites are, from the registry alone."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.core.errors import HarnessError
from harness.judge.assessment import tolerance_text
from harness.store.plan import get_suite, visible_suites
from harness.text.escape import plain
from suites.contract.registry import broken_problem, broken_suites
from suites.contract.spec import CheckSpec, SuiteSpec


def _param_lines(spec: SuiteSpec) -> list[str]:
    return [f"--param {p.name}={p.default}  ({p.type}; {p.describe_range()}) {p.help}" for p in spec.params]


def list_suites(all_: Annotated[bool, typer.Option("--all", help="include test-only suites")] = False) -> None:
    """Every suite, its frameworks, parameters with defaults, and what it measures."""
    for spec in visible_suites(include_hidden=all_).values():
        typer.echo(f"{spec.name}: {spec.description}")
        typer.echo(f"  frameworks: {', '.join(spec.frameworks)}")
        for fw, reason in spec.unsupported.items():
            typer.echo(f"  {fw}: skipped ({reason})")
        for line in _param_lines(spec):
            typer.echo(f"  {line}")
        typer.echo(f"  defaults: repeat {spec.repeat}, warmup {spec.warmup}, timeout {spec.timeout_s:g} s")
        typer.echo("")
    # A broken folder is listed too, so that a suite someone is writing does not just vanish.
    for name, problem in broken_suites().items():
        typer.echo(f"{plain(name)}: BROKEN, left out of every command: {problem}")
        typer.echo("")


def _check_line(check: CheckSpec) -> str:
    who = f" (reported by {', '.join(check.frameworks)})" if check.frameworks is not None else ""
    when = "" if check.required else " (only where the parameters produce it)"
    return f"{check.name}: {tolerance_text(check.as_record())}{who}{when} -- {check.help}"


def describe(suite: Annotated[str, typer.Argument(help="suite name")]) -> None:
    """Parameters (defaults, meaning), metrics, and the check values with their tolerances."""
    problem = broken_problem(suite)
    if problem is not None:
        raise HarnessError(f"suite {plain(suite)} is broken: {problem}")
    spec = get_suite(suite)
    typer.echo(f"{spec.name}: {spec.description}")
    typer.echo(f"  frameworks: {', '.join(spec.frameworks)}")
    for fw, reason in spec.unsupported.items():
        typer.echo(f"  {fw}: skipped ({reason})")
    typer.echo("parameters (--param NAME=VALUE; the value shown is the default):")
    for line in _param_lines(spec) or ["none"]:
        typer.echo(f"  {line}")
    if spec.smoke:
        typer.echo("  --smoke: " + ", ".join(f"{k}={v}" for k, v in spec.smoke.items()))
    typer.echo(f"  defaults: repeat {spec.repeat}, warmup {spec.warmup}, timeout {spec.timeout_s:g} s")
    if spec.metrics or spec.peak_shares:
        typer.echo("metrics: " + (", ".join(spec.metrics) or "named by the run (they depend on the parameters)"))
    for metric, name in spec.peak_shares.items():
        typer.echo(f"  {metric}: its % of peak (achieved FLOP/s over the datasheet peak) is the {name}")
    typer.echo("checks (every framework reports them; a value outside its tolerance fails the agreement gate):")
    for check in spec.checks:
        typer.echo(f"  {_check_line(check)}")
    if not spec.checks:
        typer.echo("  none")
