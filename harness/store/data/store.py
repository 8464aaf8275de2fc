"""The data folder: one sub-folder per dataset, an .npz array file and the manifest describing it.

The layout and manifest keys are defined once in suites/contract/datasets.py, which jobs use to
read what is written here. A dataset is present only once its manifest exists; the manifest
is written last and atomically, so an interrupted fetch never looks like a dataset.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import __version__
from harness.core.errors import HarnessError
from harness.store.data.npz import NpzWriter
from suites.contract.datasets import (
    AUTO,
    BUNDLED,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    SYNTHETIC,
    ManifestError,
    auto_missing_message,
    auto_target,
    dataset_dir,
    fetch_command,
    fingerprint,
    missing_message,
    read_manifest,
    sha256_file,
    valid_name,
)


@dataclass
class Written:
    folder: Path
    manifest: dict[str, Any]


def manifest(data_dir: Path, name: str) -> dict[str, Any] | None:
    """`read_manifest` for host commands: a malformed manifest is one line naming the fix."""
    try:
        return read_manifest(data_dir, name)
    except ManifestError as error:
        raise HarnessError(f"{error}: run `{fetch_command(name)} --force` to write the dataset again") from None


def prepare_folder(data_dir: Path, name: str, force: bool) -> Path:
    """The dataset's folder, refusing to overwrite a present dataset unless `force`."""
    if not valid_name(name):
        raise HarnessError(f"{name!r} is not a dataset name (lower-case letters, digits, - and _)")
    folder = dataset_dir(data_dir, name)
    try:
        existing = read_manifest(data_dir, name)
    except ManifestError:
        existing = None  # a broken manifest protects nothing: writing the dataset again repairs it
    if existing is not None and not force:
        raise HarnessError(f"dataset {name} is already in {folder}; add --force to fetch and write it again")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / MANIFEST).unlink(missing_ok=True)  # absent until the new arrays are complete
    except OSError as error:
        raise HarnessError(f"cannot write the data folder {folder}: {error.strerror}") from None
    return folder


def write_dataset(
    data_dir: Path,
    name: str,
    fill: Callable[[NpzWriter], dict[str, Any]],
    *,
    classes: list[str],
    source: dict[str, Any],
    command: str,
    revision: str | None = None,
) -> Written:
    """`fill(writer)` adds the arrays and returns extra manifest fields; the manifest comes last."""
    folder = dataset_dir(data_dir, name)
    final = folder / f"{name}.npz"
    partial = folder / f".{name}.npz.partial"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with NpzWriter(partial) as writer:
            extra = fill(writer)
        partial.replace(final)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "name": name,
        "file": final.name,
        "sha256": sha256_file(final),
        "bytes": final.stat().st_size,
        "arrays": writer.arrays,
        # The content's id (independent of the zip container) and the upstream version it came
        # from: both travel into every result that trains on this dataset.
        "fingerprint": fingerprint(writer.contents),
        "revision": revision,
        "layout": "images uint8 (N, H, W, C); labels uint8 (N,)",
        "classes": classes,
        "source": source,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "created_by": f"{command} (fw-harness {__version__})",
        **extra,
    }
    tmp = folder / f".{MANIFEST}.partial"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    tmp.replace(folder / MANIFEST)
    return Written(folder, manifest)


def require(data_dir: Path, dataset: str, suite: str | None = None) -> None:
    """Before any job starts: a named dataset must be in the data folder (the job checks again).

    `auto` (the training suites' default) needs the suite to know which real dataset it means.
    """
    if dataset == SYNTHETIC or dataset in BUNDLED:
        return
    if dataset == AUTO:
        if (target := _auto_target(suite)) is not None and manifest(data_dir, target) is None:
            raise HarnessError(auto_missing_message(target, data_dir))
        return
    if not valid_name(dataset) or manifest(data_dir, dataset) is None:
        raise HarnessError(missing_message(dataset, data_dir))


def _auto_target(suite: str | None) -> str | None:
    from harness.store.plan import get_suite

    if suite is None:
        return None
    spec = get_suite(suite)
    choices = next((p.choices for p in spec.params if p.name == "dataset"), None) or ()
    return auto_target(choices)


def present(data_dir: Path) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(datasets with a valid manifest, datasets whose manifest is broken -> why), by name."""
    found: dict[str, dict[str, Any]] = {}
    broken: dict[str, str] = {}
    if not data_dir.is_dir():
        return found, broken
    for child in sorted(data_dir.iterdir()):
        if child.is_symlink() or not child.is_dir() or not valid_name(child.name):
            continue
        try:
            read = read_manifest(data_dir, child.name)
        except ManifestError as error:
            broken[child.name] = str(error)
            continue
        if read is not None:
            found[child.name] = read
    return found, broken
