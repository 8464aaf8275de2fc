"""`harness data fetch|import|list`: datasets for the training suites, prepared on the host."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from tabulate import tabulate

from harness.cli.options import DataDir, default_data_dir
from harness.execute import data as datasets

# Worked out once at import: the help text is read while the app is built, for every command.
_FETCHABLE = ", ".join(datasets.fetchable())
# Joined once, here: an annotation is evaluated again each time Typer builds the app (any command).
_IMPORTABLE = ", ".join(datasets.IMPORTED)

app = typer.Typer(
    no_args_is_help=True,
    help="Datasets for the training suites: fetched once on the host, mounted read-only into jobs.",
)


@app.command("fetch")
def fetch_cmd(
    name: Annotated[str, typer.Argument(help=f"dataset: {_FETCHABLE}")],
    data_dir: DataDir = None,
    source: Annotated[
        Optional[str],
        typer.Option(
            "--source",
            help="hub: Hugging Face `datasets` (its cache and progress; needs the fw-harness data extra); "
            "archive: the canonical archives with their published MD5s (mnist, cifar10, tinyshakespeare). "
            "Default: hub, or archive for a dataset the hub catalogue lacks (tinyshakespeare)",
        ),
    ] = None,
    revision: Annotated[
        Optional[str], typer.Option("--revision", help="hub: branch, tag or commit of the dataset repository")
    ] = None,
    mirror: Annotated[
        list[str],
        typer.Option("--mirror", help="archive: base URL to fetch from instead of the canonical hosts; repeatable"),
    ] = [],  # noqa: B006
    from_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--from",
            help="offline: a local copy (hub: the repository's parquet files or a save_to_disk folder; "
            "archive: the original archive files)",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="write the dataset again even if present")] = False,
    keep_archives: Annotated[bool, typer.Option("--keep-archives", help="archive: keep the downloads")] = False,
    size: Annotated[int, typer.Option(help="catsdogs: images are centre-cropped and resized to SIZE x SIZE")] = 64,
    test_fraction: Annotated[float, typer.Option(help="catsdogs: share held out as the test split")] = 0.2,
    seed: Annotated[int, typer.Option(help="catsdogs: seed of the train/test split")] = 42,
) -> None:
    """Download a dataset (the hub by default), check it, store one array file + manifest."""
    typer.echo(
        datasets.fetch(
            name,
            data_dir or default_data_dir(),
            source=source,
            revision=revision,
            mirrors=mirror,
            from_dir=from_dir,
            force=force,
            keep_archives=keep_archives,
            size=size,
            test_fraction=test_fraction,
            seed=seed,
        )
    )


@app.command("import")
def import_cmd(
    name: Annotated[str, typer.Argument(help=f"dataset: {_IMPORTABLE}")],
    path: Annotated[Path, typer.Argument(help="folder with 0/ (cats) and 1/ (dogs) image folders")],
    data_dir: DataDir = None,
    size: Annotated[int, typer.Option(help="images are centre-cropped and resized to SIZE x SIZE")] = 64,
    test_fraction: Annotated[float, typer.Option(help="share of the images held out as the test split")] = 0.2,
    seed: Annotated[int, typer.Option(help="seed of the train/test split")] = 42,
    force: Annotated[bool, typer.Option("--force", help="write the dataset again even if present")] = False,
) -> None:
    """Store a folder of class-labelled images, resized (needs Pillow: the fw-harness data extra)."""
    typer.echo(
        datasets.import_images(
            name, path, data_dir or default_data_dir(), size=size, test_fraction=test_fraction, seed=seed, force=force
        )
    )


@app.command("list")
def list_cmd(data_dir: DataDir = None) -> None:
    """Known datasets and what the data folder holds."""
    folder = (data_dir or default_data_dir()).resolve()
    rows = datasets.listing(folder)
    typer.echo(f"data folder: {folder}")
    typer.echo(
        tabulate(rows, headers=["dataset", "status", "train / test", "sample", "size", "revision", "fetched / how"])
    )
