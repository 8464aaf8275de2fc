"""`harness data import catsdogs PATH`: class folders of image files -> the same .npz + manifest.

PATH holds `0/` (cats) and `1/` (dogs). Each image is converted to RGB, centre-cropped to a
square and resized to SIZE x SIZE with a Lanczos filter (Pillow, an optional host extra). A
seeded shuffle of the sorted file list decides the test split, so the same folder always gives
the same arrays. Unreadable files (the public Kaggle set has a few) are skipped and listed; an
image declaring more pixels than images.MAX_PIXELS (a decompression bomb) stops the import.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from harness.core.errors import HarnessError
from harness.store.data import store
from harness.store.data.images import Unreadable, decode, pillow, square
from harness.store.data.npz import NpzWriter, add_image_splits

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
FOLDER_CLASSES = (("0", "cat"), ("1", "dog"))


def _files(root: Path) -> list[tuple[Path, int]]:
    if not root.is_dir():
        raise HarnessError(f"{root} is not a folder; it must contain 0/ (cats) and 1/ (dogs) with image files")
    found = []
    for label, (folder, _) in enumerate(FOLDER_CLASSES):
        if not (sub := root / folder).is_dir():
            raise HarnessError(f"{root} has no {folder}/ folder; expected 0/ (cats) and 1/ (dogs)")
        # Regular files only: a link could bring any file of this machine into the stored dataset.
        images = sorted(
            p for p in sub.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file() and not p.is_symlink()
        )
        if not images:
            raise HarnessError(f"{sub} holds no image files ({', '.join(sorted(IMAGE_SUFFIXES))})")
        found += [(p, label) for p in images]
    return found


def count_bar() -> Progress:
    """A bar counting images (or rows) on stderr, so stdout stays clean for what the command prints."""
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=Console(stderr=True),
    )  # fmt: skip


def check_split_options(size: int, test_fraction: float) -> None:
    """--size and --test-fraction of an image dataset, refused before any download or decoding."""
    if not 8 <= size <= 1024:
        raise HarnessError(f"--size {size} must be between 8 and 1024 pixels")
    if not 0.0 < test_fraction < 1.0:
        raise HarnessError(f"--test-fraction {test_fraction} must be between 0 and 1")


def import_catsdogs(
    root: Path, data_dir: Path, *, size: int, test_fraction: float, seed: int, force: bool, name: str = "catsdogs"
) -> store.Written:
    image_module = pillow()
    lanczos = image_module.Resampling.LANCZOS
    check_split_options(size, test_fraction)
    files = _files(root)
    order = list(range(len(files)))
    random.Random(seed).shuffle(order)
    n_test = max(1, round(len(files) * test_fraction))
    split = {"test": sorted(order[:n_test]), "train": sorted(order[n_test:])}
    store.prepare_folder(data_dir, name, force)
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(dir=data_dir / name) as tmp:
        raw = {part: Path(tmp) / f"{part}.u8" for part in split}
        labels: dict[str, bytearray] = {part: bytearray() for part in split}
        with count_bar() as bar:
            task = bar.add_task("resizing images", total=len(files))
            for part, indices in split.items():
                with raw[part].open("wb") as out:
                    for i in indices:
                        path, label = files[i]
                        where = str(path.relative_to(root))
                        try:
                            pixels = square(decode(image_module, path, where, "RGB"), size, lanczos)
                        except Unreadable:
                            skipped.append(where)
                        else:
                            out.write(pixels)
                            labels[part].append(label)
                        bar.update(task, advance=1)
        if not labels["train"] or not labels["test"]:
            raise HarnessError(f"{root}: no readable images left for the train or test split")

        def fill(writer: NpzWriter) -> dict[str, Any]:
            add_image_splits(writer, raw, labels, (size, size, 3))
            return {"image_size": size, "test_fraction": test_fraction, "split_seed": seed, "skipped": skipped}

        return store.write_dataset(
            data_dir,
            name,
            fill,
            classes=[cls for _, cls in FOLDER_CLASSES],
            source={"kind": "folder", "path": str(root.resolve()), "files": len(files)},
            command=f"harness data import {name} {root}",
        )
