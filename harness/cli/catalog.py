"""`harness list` and `harness describe`: what the suites are, from the registry alone."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.store.plan import get_suite, visible_suites


def list_suites(all_: Annotated[bool, typer.Option("--all", help="include test-only suites")] = False) -> None:
    """Every suite, its frameworks, parameters with defaults, and what it measures."""
    for spec in visible_suites(include_hidden=all_).values():
        typer.echo(f"{spec.name}: {spec.description}")
        typer.echo(f"  frameworks: {', '.join(spec.frameworks)}")
        for fw, reason in spec.unsupported.items():
            typer.echo(f"  {fw}: skipped ({reason})")
        for p in spec.params:
            typer.echo(f"  --param {p.name}={p.default}  ({p.type}; {p.describe_range()}) {p.help}")
        typer.echo(f"  defaults: repeat {spec.repeat}, warmup {spec.warmup}, timeout {spec.timeout_s:g} s")
        typer.echo("")


def describe(suite: Annotated[str, typer.Argument(help="suite name")]) -> None:
    """Parameters and checks of one suite."""
    spec = get_suite(suite)
    typer.echo(f"{spec.name}: {spec.description}")
    for check in spec.checks:
        typer.echo(f"  check {check.name}: {check.help}")
