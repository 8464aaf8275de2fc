"""`harness data fetch NAME`: the hub (default) or the canonical archives -> one .npz + manifest.

`--source hub` goes through Hugging Face `datasets` (hub.py); `--source archive` downloads the
publishers' archives and verifies their published MD5s (mnist, cifar10, tinyshakespeare; the
default for a dataset the hub catalogue does not have). `--from DIR` reads a local copy of either
instead of the network.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.store.data import download, formats, hub, store
from harness.store.data.npz import NpzWriter
from harness.store.data.sources import IMPORTED, SOURCES, Source
from suites.contract.datasets import text_split

SOURCE_KINDS = ("hub", "archive")

DOWNLOADS = ".downloads"  # inside the dataset folder while fetching; removed afterwards


def archives_revision(fetched: Sequence[download.Fetched]) -> str:
    """The canonical archives never change: their published MD5s name the version."""
    return "md5 " + " ".join(f.archive.md5 for f in fetched)


def _source_record(fetched: Sequence[download.Fetched]) -> dict[str, Any]:
    return {
        "kind": "archives",
        "files": [
            {"name": f.archive.name, "from": f.url, "md5": f.archive.md5, "sha256": f.sha256, "bytes": f.bytes}
            for f in fetched
        ],
    }


def _mnist(writer: NpzWriter, files: dict[str, Path]) -> dict[str, Any]:
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = formats.read_idx(files[f"{prefix}-images-idx3-ubyte.gz"])
        labels = formats.read_idx(files[f"{prefix}-labels-idx1-ubyte.gz"])
        if len(images.shape) != 3 or len(labels.shape) != 1 or images.shape[0] != labels.shape[0]:
            raise HarnessError(f"MNIST {split}: images {images.shape} and labels {labels.shape} do not match")
        if max(labels.data, default=0) > 9:
            raise HarnessError(f"MNIST {split}: a label above 9; the labels file is not MNIST's")
        writer.add(f"{split}_images", (*images.shape, 1), "uint8", images.data)
        writer.add(f"{split}_labels", labels.shape, "uint8", labels.data)
    return {}


def _cifar10(writer: NpzWriter, files: dict[str, Path]) -> dict[str, Any]:
    batches = list(formats.read_cifar_tarball(files["cifar-10-python.tar.gz"]))
    for split, names in (("train", formats.CIFAR_TRAIN), ("test", formats.CIFAR_TEST)):
        chosen = [b for b in batches if b[0] in names]
        count = sum(b[3] for b in chosen)
        labels = [label for b in chosen for label in b[2]]
        if max(labels, default=0) > 9 or min(labels, default=0) < 0:
            raise HarnessError(f"CIFAR-10 {split}: a label outside 0..9")
        writer.add(f"{split}_images", (count, 32, 32, 3), "uint8", (b[1] for b in chosen))
        writer.add(f"{split}_labels", (count,), "uint8", bytes(labels))
    return {}


def _tinyshakespeare(writer: NpzWriter, files: dict[str, Path]) -> dict[str, Any]:
    # The md5 already pinned the bytes; the split is the contract's, so a job's bundled copy matches.
    train, test = text_split(files["input.txt"].read_bytes())
    writer.add("train_tokens", (len(train),), "uint8", train)
    writer.add("test_tokens", (len(test),), "uint8", test)
    return {"layout": "text bytes as uint8 tokens (N,); train the first 90 %, test the rest"}


CONVERTERS = {"mnist": _mnist, "cifar10": _cifar10, "tinyshakespeare": _tinyshakespeare}


def fetchable() -> list[str]:
    return sorted(set(hub.HUB) | set(SOURCES))


def fetch(
    name: str,
    data_dir: Path,
    *,
    source: str | None = None,
    revision: str | None = None,
    mirrors: Sequence[str] = (),
    from_dir: Path | None = None,
    force: bool = False,
    keep_archives: bool = False,
    size: int = 64,
    test_fraction: float = 0.2,
    seed: int = 42,
) -> store.Written:
    """Download (or take from `from_dir`), verify, convert and store one dataset.

    `source` None: the hub when the catalogue has the dataset there, else its canonical archive.
    """
    if name not in hub.HUB and name not in SOURCES:
        raise HarnessError(f"unknown dataset {name!r}; fetchable: {', '.join(fetchable())}")
    if source is None:
        source = "hub" if name in hub.HUB else "archive"
    if source not in SOURCE_KINDS:
        raise HarnessError(f"--source {source!r} is not one of {', '.join(SOURCE_KINDS)}")
    if source == "hub":
        if mirrors:
            raise HarnessError("--mirror applies to --source archive; for a hub mirror set HF_ENDPOINT")
        if name not in hub.HUB:
            raise HarnessError(f"{name} has no Hugging Face hub entry: use --source archive")
        entry = hub.HUB[name]
        hub.datasets_module()  # a missing extra is refused before anything is written
        store.prepare_folder(data_dir, name, force)
        loaded = hub.load(entry, revision=revision, from_dir=from_dir)
        return hub.convert(
            entry, loaded, data_dir, from_dir=from_dir, size=size, test_fraction=test_fraction, seed=seed,
            command=f"harness data fetch {name} --source hub",
        )  # fmt: skip
    if name not in SOURCES:
        also = f" (or `harness data import {name} PATH`)" if name in IMPORTED else ""
        raise HarnessError(f"{name} has no canonical archive: use --source hub{also}")
    if revision is not None:
        raise HarnessError("--revision applies to --source hub; the canonical archives have one version")
    archive_source: Source = SOURCES[name]
    bases = [download.check_mirror(m) for m in mirrors] or list(archive_source.urls)
    folder = store.prepare_folder(data_dir, name, force)
    work = folder / DOWNLOADS
    # --mirror replaces the canonical hosts (an institutional mirror, or a test server): a
    # mirror that fails must not silently fall back to the internet.
    fetched: list[download.Fetched] = []
    try:
        if from_dir is not None:
            fetched = [download.from_folder(a, from_dir) for a in archive_source.archives]
        else:
            with download.progress_bar() as bar:
                fetched = [download.download(a, bases, work, bar) for a in archive_source.archives]
        files = {f.archive.name: f.path for f in fetched}
        written = store.write_dataset(
            data_dir,
            name,
            lambda writer: CONVERTERS[name](writer, files),
            classes=list(archive_source.classes),
            source=_source_record(fetched),
            command=f"harness data fetch {name} --source archive",
            revision=archives_revision(fetched),
        )
    finally:
        if not keep_archives:
            shutil.rmtree(work, ignore_errors=True)
    return written
