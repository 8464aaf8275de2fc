"""`harness data fetch --source hub`: Hugging Face `datasets` on tiny datasets built here in the hub's
on-disk formats (the repository's parquet layout, and `save_to_disk`), loaded through the same
code path as a hub download, offline. Nothing here reaches the network: the hub is unreachable
from these machines, and HF_HUB_OFFLINE / HF_DATASETS_OFFLINE are set before `datasets` loads.
"""

from __future__ import annotations

import io
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

import dataclasses  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import datasets as hf  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from harness.cli import app  # noqa: E402
from harness.core.errors import HarnessError  # noqa: E402
from harness.store.data import hub  # noqa: E402
from suites.contract import datasets  # noqa: E402
from tests.conftest import finished, harness, read, run_folder  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"
DIGITS = [str(i) for i in range(10)]
CIFAR = list(hub.HUB["cifar10"].classes)


@pytest.fixture(autouse=True)
def _hf_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """`datasets`' cache in a temporary folder, for this process and the CLI subprocesses."""
    home = tmp_path_factory.mktemp("hf-home")
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setattr(hf.config, "HF_DATASETS_CACHE", home / "datasets")


def _png(pixels: np.ndarray) -> dict[str, Any]:
    stream = io.BytesIO()
    Image.fromarray(pixels).save(stream, format="PNG")
    return {"bytes": stream.getvalue(), "path": None}


@dataclasses.dataclass
class Built:
    folder: Path
    arrays: dict[str, np.ndarray]  # what the converted .npz must hold (mnist, cifar10)


def _mnist_repo(root: Path, names: list[str] = DIGITS, image_column: str = "image") -> Built:
    """ylecun/mnist's layout: mnist/{train,test}-00000-of-00001.parquet, plus the metadata that
    `hf download --local-dir` leaves behind (the commit the files came from)."""
    rng = np.random.default_rng(0)
    features = hf.Features({image_column: hf.Image(), "label": hf.ClassLabel(names=names)})
    arrays = {}
    for split, n in (("train", 64), ("test", 16)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n)
        table = hf.Dataset.from_dict(
            {image_column: [_png(im) for im in images], "label": [int(v) for v in labels]}, features=features
        )
        (root / "mnist").mkdir(parents=True, exist_ok=True)
        table.to_parquet(str(root / "mnist" / f"{split}-00000-of-00001.parquet"))
        meta = root / ".cache" / "huggingface" / "download" / "mnist"
        meta.mkdir(parents=True, exist_ok=True)
        (meta / f"{split}-00000-of-00001.parquet.metadata").write_text(f"{COMMIT}\netag\n1700000000.0\n")
        arrays[f"{split}_images"], arrays[f"{split}_labels"] = images[..., None], labels.astype(np.uint8)
    return Built(root, arrays)


def _cifar_saved(root: Path) -> Built:
    """uoft-cs/cifar10's columns (img, label) as a `save_to_disk` folder."""
    rng = np.random.default_rng(1)
    features = hf.Features({"img": hf.Image(), "label": hf.ClassLabel(names=CIFAR)})
    splits, arrays = {}, {}
    for split, n in (("train", 60), ("test", 16)):
        images = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
        labels = rng.integers(0, 10, n)
        splits[split] = hf.Dataset.from_dict(
            {"img": [_png(im) for im in images], "label": [int(v) for v in labels]}, features=features
        )
        arrays[f"{split}_images"], arrays[f"{split}_labels"] = images, labels.astype(np.uint8)
    hf.DatasetDict(splits).save_to_disk(str(root))
    return Built(root, arrays)


def _catsdogs_repo(root: Path) -> Built:
    """microsoft/cats_vs_dogs' shape: one train split, photos of varying sizes, labels cat/dog,
    and one broken image (the real set had 1 738 of them)."""
    rng = np.random.default_rng(2)
    images, labels = [], []
    for i in range(40):
        label = i % 2
        h, w = 24 + (i % 5) * 3, 30 + (i % 3) * 4
        pixels = rng.integers(0, 60, (h, w, 3)).astype(np.uint8)
        half = slice(0, h // 2) if label == 0 else slice(h // 2, h)
        pixels[half, :, 0 if label == 0 else 2] += 180  # cats reddish on top, dogs bluish below
        images.append(_png(pixels))
        labels.append(label)
    images[7] = {"bytes": b"\x89PNG not really", "path": None}
    features = hf.Features({"image": hf.Image(), "labels": hf.ClassLabel(names=["cat", "dog"])})
    (root / "data").mkdir(parents=True)
    hf.Dataset.from_dict({"image": images, "labels": labels}, features=features).to_parquet(
        str(root / "data" / "train-00000-of-00001.parquet")
    )
    return Built(root, {})


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    if isinstance(result.exception, HarnessError):
        return 2, str(result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_mnist_from_a_local_copy_of_the_hub_repository(tmp_path: Path) -> None:
    built = _mnist_repo(tmp_path / "ylecun-mnist")
    data = tmp_path / "data"
    code, out = _invoke("data", "fetch", "mnist", "--from", str(built.folder), "--data-dir", str(data))
    assert code == 0, out
    manifest = datasets.read_manifest(data, "mnist")
    assert manifest is not None
    assert manifest["source"]["kind"] == "hub" and manifest["source"]["repo"] == "ylecun/mnist"
    assert manifest["revision"] == COMMIT  # from the download metadata of the local copy
    arrays = datasets.load_fetched(data, "mnist")
    for key, want in built.arrays.items():
        np.testing.assert_array_equal(arrays[key], want)
    # The fingerprint is the content's: recomputed from the arrays, it is the manifest's.
    assert manifest["fingerprint"] == datasets.array_fingerprint({k: arrays[k] for k in datasets.ARRAY_KEYS})
    assert f"fingerprint {manifest['fingerprint'][:16]}" in out


def test_cifar10_from_a_save_to_disk_folder(tmp_path: Path) -> None:
    built = _cifar_saved(tmp_path / "cifar-saved")
    data = tmp_path / "data"
    code, out = _invoke("data", "fetch", "cifar10", "--from", str(built.folder), "--data-dir", str(data))
    assert code == 0, out
    arrays = datasets.load_fetched(data, "cifar10")
    for key, want in built.arrays.items():
        np.testing.assert_array_equal(arrays[key], want)
    manifest = datasets.read_manifest(data, "cifar10")
    assert manifest is not None and manifest["classes"] == CIFAR and manifest["revision"] is None
    assert manifest["source"]["read"] == "save_to_disk folder" and len(manifest["fingerprint"]) == 64


def test_catsdogs_from_the_hub_layout_is_resized_split_and_skips_broken_images(tmp_path: Path) -> None:
    built = _catsdogs_repo(tmp_path / "cats-vs-dogs")
    data = tmp_path / "data"
    code, out = _invoke("data", "fetch", "catsdogs", "--from", str(built.folder), "--data-dir", str(data),
                        "--size", "16", "--test-fraction", "0.25")  # fmt: skip
    assert code == 0, out
    assert "skipped 1 unreadable" in out
    arrays = datasets.load_fetched(data, "catsdogs")
    assert arrays["train_images"].shape[1:] == (16, 16, 3)
    assert len(arrays["train_labels"]) + len(arrays["test_labels"]) == 39  # 40 rows, one broken
    assert len(arrays["test_labels"]) in (9, 10)  # 10 held out, less the broken one if it was among them
    images = np.concatenate([arrays["train_images"], arrays["test_images"]])
    labels = np.concatenate([arrays["train_labels"], arrays["test_labels"]])
    reddish = images[..., 0].mean(axis=(1, 2)) > images[..., 2].mean(axis=(1, 2))
    assert (reddish == (labels == 0)).all()  # labels still belong to their images after the split
    manifest = datasets.read_manifest(data, "catsdogs")
    assert manifest is not None and manifest["image_size"] == 16 and manifest["skipped"] == ["all/7"]
    assert manifest["source"]["repo"] == "microsoft/cats_vs_dogs"


def test_other_columns_or_class_names_are_refused(tmp_path: Path) -> None:
    renamed = _mnist_repo(tmp_path / "letters", names=list("abcdefghij"))
    code, out = _invoke("data", "fetch", "mnist", "--from", str(renamed.folder), "--data-dir", str(tmp_path / "d1"))
    assert code == 2 and "class names" in out
    other = _mnist_repo(tmp_path / "pixels", image_column="pixels")
    code, out = _invoke("data", "fetch", "mnist", "--from", str(other.folder), "--data-dir", str(tmp_path / "d2"))
    assert code == 2 and "no column 'image'" in out
    code, out = _invoke("data", "fetch", "mnist", "--from", str(tmp_path / "nothing"), "--data-dir", str(tmp_path))
    assert code == 2 and "not a folder" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = _invoke("data", "fetch", "mnist", "--from", str(empty), "--data-dir", str(tmp_path / "d3"))
    assert code == 2 and "not a dataset `datasets` can read" in out


def test_the_hub_unreachable_is_one_line_naming_the_offline_routes(tmp_path: Path) -> None:
    proc = harness("data", "fetch", "mnist", "--data-dir", str(tmp_path))  # the default: --source hub
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    # a network fault, not bad input: exit 1 (errors.Unreachable), as for a mirror that fails
    assert proc.returncode == 1 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "ylecun/mnist" in errors[0] and "--from DIR" in errors[0] and "--source archive" in errors[0]
    assert datasets.read_manifest(tmp_path, "mnist") is None


def test_host_commands_work_without_datasets_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` now raises ImportError
    code, out = _invoke("data", "fetch", "mnist", "--data-dir", str(tmp_path))
    assert code == 2 and "pip install 'fw-harness[data]'" in out and "\n" not in out.strip()
    assert not (tmp_path / "mnist").exists()
    code, out = _invoke("data", "list", "--data-dir", str(tmp_path))
    assert code == 0 and "missing" in out
    code, out = _invoke("data", "fetch", "catsdogs", "--source", "archive", "--data-dir", str(tmp_path))
    assert code == 2 and "no canonical archive" in out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "suite", "params"),
    [
        ("mnist", "mnist", ("train_samples=64", "test_samples=16", "batch_size=16")),
        ("cifar10", "cifar10", ("batch_size=16",)),
        ("catsdogs", "resnet18", ("image_size=16", "batch_size=8")),
    ],
)
def test_fetch_convert_run_through_datasets(name: str, suite: str, params: tuple[str, ...], tmp_path: Path,
                                            results: Path) -> None:  # fmt: skip
    """fetch (hub layout, offline) -> convert -> run with the default dataset=auto -> the result names the data."""
    source = {"mnist": _mnist_repo, "cifar10": _cifar_saved, "catsdogs": _catsdogs_repo}[name](tmp_path / "copy")
    data = tmp_path / "data"
    fetched = harness("data", "fetch", name, "--from", str(source.folder), "--data-dir", str(data), "--size", "16")
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    args = [a for p in ("epochs=2", *params) for a in ("--param", p)]
    proc = harness("run", "--suite", suite, "--frameworks", "pytorch", "--backend", "local", "--threads", "1",
                   "--data-dir", str(data), "--results-dir", str(results), *args)  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    doc = read(run_folder(proc.stdout) / "pytorch.json")
    manifest = json.loads((data / name / "manifest.json").read_text())
    assert doc["params"]["dataset"] == "auto" and doc["status"] == "ok"
    assert doc["dataset"]["name"] == name and doc["dataset"]["origin"] == "hub"
    assert (
        doc["dataset"]["fingerprint"] == manifest["fingerprint"] and doc["dataset"]["revision"] == manifest["revision"]
    )
    assert doc["dataset"]["repo"] == hub.HUB[name].repo


def test_a_repository_with_a_loading_script_falls_back_to_the_hubs_parquet_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub itself cannot be reached here: its answers are stood in for by the local copy."""
    built = _mnist_repo(tmp_path / "copy")
    real = hf.load_dataset_builder
    asked: list[str | None] = []

    def hub_stand_in(path: str, revision: str | None = None, **kwargs: Any) -> Any:
        assert path == "ylecun/mnist"
        asked.append(revision)
        if revision is None:
            raise RuntimeError("Dataset scripts are no longer supported, but found mnist.py")
        return real(str(built.folder), **kwargs)

    monkeypatch.setattr(hf, "load_dataset_builder", hub_stand_in)
    code, out = _invoke("data", "fetch", "mnist", "--data-dir", str(tmp_path / "data"))
    assert code == 0, out
    assert asked == [None, hub.PARQUET_BRANCH]
    manifest = datasets.read_manifest(tmp_path / "data", "mnist")
    assert manifest is not None and manifest["source"]["requested_revision"] == hub.PARQUET_BRANCH
