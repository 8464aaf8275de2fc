"""`harness data fetch NAME`: archives -> verified -> one .npz + manifest in the data folder."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from harness.data import download, formats, store
from harness.data.npz import NpzWriter
from harness.data.sources import SOURCES, Source
from harness.errors import HarnessError

DOWNLOADS = ".downloads"  # inside the dataset folder while fetching; removed afterwards


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

        def chunks(chosen: list[tuple[str, bytes, list[int], int]] = chosen) -> Iterator[bytes]:
            for batch in chosen:
                yield batch[1]

        writer.add(f"{split}_images", (count, 32, 32, 3), "uint8", chunks())
        writer.add(f"{split}_labels", (count,), "uint8", bytes(labels))
    return {}


CONVERTERS = {"mnist": _mnist, "cifar10": _cifar10}


def fetch(
    name: str,
    data_dir: Path,
    *,
    mirrors: Sequence[str] = (),
    from_dir: Path | None = None,
    force: bool = False,
    keep_archives: bool = False,
) -> store.Written:
    """Download (or take from `from_dir`), verify, convert and store one dataset."""
    if name not in SOURCES:
        raise HarnessError(
            f"unknown dataset {name!r}; fetchable: {', '.join(SOURCES)} (catsdogs: `harness data import`)"
        )
    source: Source = SOURCES[name]
    folder = store.prepare_folder(data_dir, name, force)
    work = folder / DOWNLOADS
    # --mirror replaces the canonical hosts (an institutional mirror, or a test server): a
    # mirror that fails must not silently fall back to the internet.
    bases = list(mirrors) or list(source.urls)
    fetched: list[download.Fetched] = []
    try:
        if from_dir is not None:
            fetched = [download.from_folder(a, from_dir) for a in source.archives]
        else:
            with download.progress_bar() as bar:
                fetched = [download.download(a, bases, work, bar) for a in source.archives]
        files = {f.archive.name: f.path for f in fetched}
        written = store.write_dataset(
            data_dir,
            name,
            lambda writer: CONVERTERS[name](writer, files),
            classes=list(source.classes),
            source=_source_record(fetched),
            command=f"harness data fetch {name}",
        )
    finally:
        if not keep_archives:
            store.remove_downloads(work)
    return written
