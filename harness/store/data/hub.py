"""`harness data fetch NAME` (the default `--source hub`): Hugging Face `datasets` on the host.

`datasets` downloads the hub's parquet files into its own cache (with its progress bars and its
offline mode), and this module converts the result once into the `.npz` + manifest that jobs
read: jobs never import `datasets` and never touch the network. The same code path reads a
local copy in the hub's layout (`--from DIR`: the repository's parquet files, e.g. from
`hf download REPO --repo-type dataset --local-dir DIR`, or a `save_to_disk` folder), which is
how offline machines and the tests use it.

Everything read is checked before use: the columns and class names must be the ones the
catalogue expects, labels must be in range, images are decoded with a pixel budget
(images.decode) and must have the dataset's shape (MNIST, CIFAR-10) or are centre-cropped and
resized (cats vs dogs, whose photos vary in size).
"""

from __future__ import annotations

import importlib
import random
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError, Unreachable
from harness.store.data import store
from harness.store.data.images import Unreadable, decode, pillow, square
from harness.store.data.imports import check_split_options, count_bar
from harness.store.data.npz import NpzWriter, add_image_splits

INSTALL_HINT = "pip install 'fw-harness[data]'"
_COMMIT = re.compile(r"[0-9a-f]{40}")
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")
MAX_SKIPPED_LISTED = 1000  # the manifest lists unreadable rows up to this many
PARQUET_BRANCH = "refs/convert/parquet"  # the hub's own parquet export of every public dataset


@dataclass(frozen=True)
class HubDataset:
    dataset: str  # the name in the data folder
    repo: str  # the hub's dataset id
    image: str  # image column
    label: str  # label column
    classes: tuple[str, ...]  # expected ClassLabel names, in label order
    shape: tuple[int, int, int] | None  # exact (H, W, C); None: any size, cropped and resized to --size
    test_split: str | None  # None: the hub has only "train"; a seeded --test-fraction of it is held out

    @property
    def mode(self) -> str:
        return "L" if self.shape is not None and self.shape[2] == 1 else "RGB"


HUB: dict[str, HubDataset] = {
    h.dataset: h
    for h in (
        HubDataset("mnist", "ylecun/mnist", "image", "label", tuple(str(i) for i in range(10)), (28, 28, 1), "test"),
        HubDataset(
            "cifar10",
            "uoft-cs/cifar10",
            "img",
            "label",
            ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
            (32, 32, 3),
            "test",
        ),
        HubDataset("catsdogs", "microsoft/cats_vs_dogs", "image", "labels", ("cat", "dog"), None, None),
    )
}


def datasets_module() -> Any:
    """`datasets`, imported only for `--source hub`: every other command works without it."""
    try:
        datasets = importlib.import_module("datasets")
    except ImportError:
        raise HarnessError(
            f"--source hub needs Hugging Face `datasets` on the host: {INSTALL_HINT} "
            "(or use --source archive for mnist and cifar10)"
        ) from None
    return datasets


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:240]}" if text else type(error).__name__


@dataclass
class Loaded:
    splits: dict[str, Any]  # split name -> datasets.Dataset
    revision: str | None  # the hub commit the files came from, when known
    origin: dict[str, Any]  # the manifest's `source`


def _local_commit(folder: Path) -> str | None:
    """The commit a `hf download --local-dir` copy came from (its .cache metadata), if it says one."""
    meta = folder / ".cache" / "huggingface" / "download"
    if meta.is_symlink() or not meta.is_dir():
        return None
    commits = set()
    for path in sorted(meta.rglob("*.metadata"))[:1000]:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 4096:
            continue
        first = path.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0].strip()
        if _COMMIT.fullmatch(first):
            commits.add(first)
    return commits.pop() if len(commits) == 1 else None


def load(entry: HubDataset, *, revision: str | None, from_dir: Path | None) -> Loaded:
    """Through `datasets`: the hub repository (its cache first), or a local copy in the hub's layout."""
    ds = datasets_module()
    if revision is not None and not _REVISION.fullmatch(revision):
        raise HarnessError(f"--revision {revision!r} is not a branch, tag or commit name")
    if from_dir is not None:
        if not from_dir.is_dir():
            raise HarnessError(f"--from {from_dir} is not a folder")
        if revision is not None:
            raise HarnessError("--revision applies to the hub; a --from folder is one fixed copy")
        where = str(from_dir.resolve())
        try:
            if (from_dir / "dataset_dict.json").is_file():  # written by DatasetDict.save_to_disk
                loaded = ds.load_from_disk(str(from_dir))
                splits, commit, kind = dict(loaded.items()), None, "save_to_disk folder"
            else:
                builder = ds.load_dataset_builder(str(from_dir))
                builder.download_and_prepare()
                splits, commit, kind = dict(builder.as_dataset().items()), _local_commit(from_dir), "local hub copy"
        except HarnessError:
            raise
        except Exception as error:  # datasets' errors for a folder that is not a dataset
            raise HarnessError(
                f"--from {from_dir}: not a dataset `datasets` can read ({_one_line(error)}); it must hold the "
                f"repository's parquet files (hf download {entry.repo} --repo-type dataset --local-dir DIR) "
                "or a save_to_disk folder"
            ) from None
    else:
        where = f"https://huggingface.co/datasets/{entry.repo}"
        try:
            try:
                builder = ds.load_dataset_builder(entry.repo, revision=revision)
            except Exception as error:
                # A repository still holding a loading script (which `datasets` >= 3 no longer runs):
                # the hub's parquet conversion of the same data lives on this branch.
                if revision is not None or "script" not in str(error).lower():
                    raise
                revision = PARQUET_BRANCH
                builder = ds.load_dataset_builder(entry.repo, revision=revision)
            builder.download_and_prepare()
            splits, kind = dict(builder.as_dataset().items()), "hub"
        except Exception as error:  # offline, a proxy, a renamed repository: one line, never a traceback
            raise Unreachable(
                f"could not load {entry.repo} from the Hugging Face Hub ({_one_line(error)}); offline: copy it "
                f"elsewhere with `hf download {entry.repo} --repo-type dataset --local-dir DIR` and pass "
                f"--from DIR, or use --source archive (mnist, cifar10)"
            ) from None
        # The dataset module's hash is the commit the files were resolved at.
        hashed = str(getattr(builder, "hash", "") or "")
        commit = hashed if _COMMIT.fullmatch(hashed) else None
    fingerprints = {name: str(getattr(split, "_fingerprint", "")) for name, split in splits.items()}
    origin = {
        "kind": "hub",
        "repo": entry.repo,
        "requested_revision": revision or "main",
        "revision": commit,
        "read": kind,
        "from": where,
        "datasets_fingerprints": fingerprints,
        "rows": {name: int(split.num_rows) for name, split in splits.items()},
    }
    return Loaded(splits, commit, origin)


def _check_columns(entry: HubDataset, split: Any, name: str) -> None:
    ds = datasets_module()
    columns = list(split.column_names)
    for column in (entry.image, entry.label):
        if column not in columns:
            raise HarnessError(
                f"{entry.repo} split {name}: no column {column!r} (columns: {', '.join(columns)}); "
                "not the dataset this harness converts"
            )
    feature = split.features[entry.image]
    if not isinstance(feature, ds.Image):
        raise HarnessError(
            f"{entry.repo} split {name}: column {entry.image!r} holds {type(feature).__name__}, not images"
        )
    labels = split.features[entry.label]
    if (names := getattr(labels, "names", None)) is not None and tuple(names) != entry.classes:
        raise HarnessError(
            f"{entry.repo} split {name}: class names {list(names)[:12]} differ from the expected "
            f"{list(entry.classes)}; the labels would mean other things"
        )


def _rows(entry: HubDataset, split: Any, from_dir: Path | None) -> Iterator[tuple[int, bytes, int]]:
    """(row, encoded image bytes, label) with the images left undecoded by `datasets`."""
    ds = datasets_module()
    raw = split.select_columns([entry.image, entry.label]).cast_column(entry.image, ds.Image(decode=False))
    row = 0
    root = from_dir.resolve() if from_dir is not None else None
    for batch in raw.iter(batch_size=512):
        for image, label in zip(batch[entry.image], batch[entry.label], strict=True):
            yield row, _image_bytes(image, root, row), label
            row += 1


def _image_bytes(image: Any, root: Path | None, row: int) -> bytes:
    if not isinstance(image, dict):
        raise HarnessError(f"row {row}: the image cell is {type(image).__name__}, not an encoded image")
    if isinstance(data := image.get("bytes"), (bytes, bytearray)):
        return bytes(data)
    # Without embedded bytes the cell names a file: read it only from inside the --from folder.
    path = image.get("path")
    if root is not None and isinstance(path, str):
        target = (root / path).resolve()
        if target.is_relative_to(root) and target.is_file():
            return target.read_bytes()
    raise HarnessError(f"row {row}: the image has no embedded bytes and no file inside the --from folder")


def _label(value: Any, classes: int, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < classes:
        raise HarnessError(f"{where}: label {value!r} is not one of 0..{classes - 1}")
    return value


def convert(
    entry: HubDataset,
    loaded: Loaded,
    data_dir: Path,
    *,
    from_dir: Path | None,
    size: int,
    test_fraction: float,
    seed: int,
    command: str,
) -> store.Written:
    """Decode, check and store: uint8 (N, H, W, C) images and uint8 labels per split."""
    image_module = pillow()
    lanczos = image_module.Resampling.LANCZOS
    if entry.test_split is None:
        if "train" not in loaded.splits:
            raise HarnessError(f"{entry.repo}: no train split (splits: {', '.join(loaded.splits)})")
        parts = {"all": loaded.splits["train"]}
    else:
        if missing := [s for s in ("train", entry.test_split) if s not in loaded.splits]:
            raise HarnessError(f"{entry.repo}: no {', '.join(missing)} split (splits: {', '.join(loaded.splits)})")
        parts = {"train": loaded.splits["train"], "test": loaded.splits[entry.test_split]}
    for name, split in parts.items():
        _check_columns(entry, split, name)
    shape = entry.shape or (size, size, 3)
    if entry.shape is None:
        check_split_options(size, test_fraction)
    skipped: list[str] = []
    labels: dict[str, bytearray] = {"train": bytearray(), "test": bytearray()}
    with tempfile.TemporaryDirectory(dir=data_dir / entry.dataset) as tmp:
        raw = {part: Path(tmp) / f"{part}.u8" for part in labels}
        with count_bar() as bar, raw["train"].open("wb") as train_out, raw["test"].open("wb") as test_out:
            outs = {"train": train_out, "test": test_out}
            for name, split in parts.items():
                total = int(split.num_rows)
                held_out: set[int] = set()
                if name == "all":
                    order = list(range(total))
                    random.Random(seed).shuffle(order)
                    held_out = set(order[: max(1, round(total * test_fraction))])
                task = bar.add_task(f"converting {entry.dataset} {name}", total=total)
                for row, data, value in _rows(entry, split, from_dir):
                    where = f"{entry.repo} {name} row {row}"
                    label = _label(value, len(entry.classes), where)
                    part = name if name != "all" else ("test" if row in held_out else "train")
                    try:
                        image = decode(image_module, data, where, entry.mode)
                    except Unreadable as error:
                        if entry.shape is not None:  # MNIST / CIFAR-10 have no broken images: refuse
                            raise HarnessError(f"{error}: not a readable image") from None
                        skipped.append(f"{name}/{row}")
                        bar.update(task, advance=1)
                        continue
                    if entry.shape is None:
                        pixels = square(image, size, lanczos)
                    elif image.size != (shape[1], shape[0]):
                        raise HarnessError(f"{where}: image is {image.size[0]}x{image.size[1]}, expected "
                                           f"{shape[1]}x{shape[0]}")  # fmt: skip
                    else:
                        pixels = image.tobytes()
                    outs[part].write(pixels)
                    labels[part].append(label)
                    bar.update(task, advance=1)
        if not labels["train"] or not labels["test"]:
            raise HarnessError(f"{entry.repo}: no readable images left for the train or test split")

        def fill(writer: NpzWriter) -> dict[str, Any]:
            add_image_splits(writer, raw, labels, shape)
            if entry.shape is not None:
                return {}
            return {
                "image_size": size,
                "test_fraction": test_fraction,
                "split_seed": seed,
                "skipped": skipped[:MAX_SKIPPED_LISTED],
                "skipped_count": len(skipped),
            }

        return store.write_dataset(
            data_dir,
            entry.dataset,
            fill,
            classes=list(entry.classes),
            source=loaded.origin,
            command=command,
            revision=loaded.revision,
        )
