"""`harness data fetch|import|list`: datasets for the training suites, prepared on the host."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from tabulate import tabulate

from harness.cli.options import DataDir, default_data_dir
from harness.core.errors import HarnessError
from harness.store.data import fetch as fetching
from harness.store.data import hub, imports, store
from harness.store.data.sources import IMPORTED, SOURCES
from harness.text.numbers import fmt_bytes
from suites.contract.datasets import fetch_command

# Worked out once at import: the help text is read while the app is built, for every command.
_FETCHABLE = ", ".join(fetching.fetchable())

app = typer.Typer(
    no_args_is_help=True,
    help="Datasets for the training suites: fetched once on the host, mounted read-only into jobs.",
)


def _summary(written: store.Written) -> str:
    m = written.manifest
    shapes = ", ".join(f"{k} {tuple(v['shape'])}" for k, v in m["arrays"].items())
    revision = f"revision {m['revision'][:12]}, " if m.get("revision") else ""
    return (
        f"{m['name']}: {shapes}; {fmt_bytes(m['bytes'])} in {written.folder} "
        f"({revision}fingerprint {m['fingerprint'][:16]})"
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
    imports.check_split_options(size, test_fraction)  # before minutes of downloading, not after
    written = fetching.fetch(
        name,
        (data_dir or default_data_dir()).resolve(),
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
    skipped = written.manifest.get("skipped_count") or 0
    typer.echo(_summary(written) + (f"; skipped {skipped} unreadable images" if skipped else ""))


@app.command("import")
def import_cmd(
    name: Annotated[str, typer.Argument(help=f"dataset: {', '.join(IMPORTED)}")],
    path: Annotated[Path, typer.Argument(help="folder with 0/ (cats) and 1/ (dogs) image folders")],
    data_dir: DataDir = None,
    size: Annotated[int, typer.Option(help="images are centre-cropped and resized to SIZE x SIZE")] = 64,
    test_fraction: Annotated[float, typer.Option(help="share of the images held out as the test split")] = 0.2,
    seed: Annotated[int, typer.Option(help="seed of the train/test split")] = 42,
    force: Annotated[bool, typer.Option("--force", help="write the dataset again even if present")] = False,
) -> None:
    """Store a folder of class-labelled images, resized (needs Pillow: the fw-harness data extra)."""
    if name not in IMPORTED:
        raise HarnessError(f"{name!r} is not importable; importable: {', '.join(IMPORTED)}")
    imports.check_split_options(size, test_fraction)
    written = imports.import_catsdogs(
        path,
        (data_dir or default_data_dir()).resolve(),
        size=size,
        test_fraction=test_fraction,
        seed=seed,
        force=force,
        name=name,
    )
    skipped = written.manifest.get("skipped") or []
    typer.echo(_summary(written) + (f"; skipped {len(skipped)} unreadable files" if skipped else ""))


@app.command("list")
def list_cmd(data_dir: DataDir = None) -> None:
    """Known datasets and what the data folder holds."""
    folder = (data_dir or default_data_dir()).resolve()
    found, broken = store.present(folder)
    known = sorted(set(SOURCES) | set(hub.HUB) | set(IMPORTED))
    rows = []
    for name in known + [n for n in sorted(set(found) | set(broken)) if n not in known]:
        m = found.get(name)
        if name in broken:
            rows.append([name, "invalid", "-", "-", "-", "-", f"{broken[name]}; {fetch_command(name)} --force"])
            continue
        if m is None:
            rows.append([name, "missing", "-", "-", "-", "-", fetch_command(name)])
            continue
        arrays = m["arrays"]
        # Images (N, H, W, C) counted in samples, or a text corpus (N,) counted in bytes.
        kind = "tokens" if "train_tokens" in arrays else "images"
        train, test = arrays.get(f"train_{kind}", {}).get("shape"), arrays.get(f"test_{kind}", {}).get("shape")
        shape = "text (bytes)" if kind == "tokens" else "x".join(str(d) for d in train[1:]) if train else "-"
        rows.append(
            [name, "present", f"{train[0] if train else '-'} / {test[0] if test else '-'}", shape,
             fmt_bytes(m["bytes"]), (m.get("revision") or "-")[:12], m.get("created_at", "")]
        )  # fmt: skip
    typer.echo(f"data folder: {folder}")
    typer.echo(
        tabulate(rows, headers=["dataset", "status", "train / test", "sample", "size", "revision", "fetched / how"])
    )
