"""`harness build`, `wheelhouse` and `clean`: the pinned stack images and what jobs leave behind."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import StacksOption, Variant, VariantOption, WheelhouseOption, default_wheelhouse
from harness.execute.stacks import DEFAULT_BASE_IMAGE, fill_wheelhouse
from harness.execute.stacks import build as build_stacks


def build(
    stacks: StacksOption = None,
    variant: VariantOption = Variant.cpu,
    base_image: Annotated[str, typer.Option("--base-image", help="image the stacks are built on")] = DEFAULT_BASE_IMAGE,
    wheelhouse: WheelhouseOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="do not echo the build output")] = False,
    verify: Annotated[
        bool, typer.Option("--verify", help="then print what each image was built for (CUDA, cuDNN, GPU kernels)")
    ] = False,
) -> None:
    """Build the stack images (tags name stack, variant and lock hash; an unchanged lock is reused)."""
    build_stacks(stacks, variant.value, base_image, wheelhouse or default_wheelhouse(), echo=not quiet, verify=verify)


def wheelhouse(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="folder to fill with wheels")],
    stacks: StacksOption = None,
    variant: VariantOption = Variant.cpu,
    find_links: Annotated[
        list[Path], typer.Option("--find-links", help="also look for wheels in this folder; repeatable")
    ] = [],  # noqa: B006
) -> None:
    """Download every wheel the stacks' locks pin into DIR, for `harness build --wheelhouse DIR` offline."""
    fill_wheelhouse(folder, stacks, variant.value, find_links)


def clean(
    run_id: Annotated[
        Optional[str], typer.Option("--run", help="only this run id [default: every harness run]")
    ] = None,
) -> None:
    """Remove job containers, volumes and networks a killed harness left behind (found by their labels)."""
    from harness.execute.clean import clean as remove_leftovers

    cleaned = remove_leftovers(run_id)
    for name in cleaned.containers:
        typer.echo(f"removed container {name}")
    for name in cleaned.volumes:
        typer.echo(f"removed volume {name}")
    for name in cleaned.networks:
        typer.echo(f"removed network {name}")
    for name in cleaned.kept:
        typer.echo(f"kept {name}: the harness that started it is still running (stop that run first)")
    if not cleaned.containers and not cleaned.volumes and not cleaned.networks and not cleaned.kept:
        typer.echo("nothing to clean")
