"""`harness list` and `harness describe`: what the suites are, from the registry alone."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.execute.catalog import description, get_suite, listing


def list_suites(all_: Annotated[bool, typer.Option("--all", help="include test-only suites")] = False) -> None:
    """Every suite, its frameworks, parameters with defaults, and what it measures."""
    for line in listing(include_hidden=all_):
        typer.echo(line)


def describe(suite: Annotated[str, typer.Argument(help="suite name")]) -> None:
    """Parameters (defaults, meaning), metrics, and the check values with their tolerances."""
    for line in description(get_suite(suite)):  # a broken or unknown suite: one line, from get_suite
        typer.echo(line)
