"""`harness data fetch tinyshakespeare`: a byte-level text corpus through the archive path.

The text here is a few lines written by the test, never the real input.txt; its md5 differs from
the published one, so tests that must succeed patch the catalogue in-process (as test_data.py
does), and the real CLI against the real catalogue proves a wrong checksum is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from harness.store.data import sources, store
from harness.store.data.npz import NpzWriter
from suites.contract import datasets
from suites.contract.errors import JobError
from tests.conftest import harness
from tests.test_data import _invoke

NAME = "tinyshakespeare"
# Multi-byte UTF-8 on purpose: the split is by bytes, so it may cut a character in two.
TEXT = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 5 + "Ça… fin\n"
).encode()


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding a small input.txt, and the catalogue patched to its md5 and size."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "input.txt").write_bytes(TEXT)
    source = sources.SOURCES[NAME]
    archive = dataclasses.replace(
        source.archives[0], md5=hashlib.md5(TEXT, usedforsecurity=False).hexdigest(), size=len(TEXT)
    )
    monkeypatch.setitem(sources.SOURCES, NAME, dataclasses.replace(source, archives=(archive,)))
    return folder


def _fetch(corpus: Path, data: Path, *extra: str) -> tuple[int, str]:
    return _invoke("data", "fetch", NAME, "--from", str(corpus), "--data-dir", str(data), *extra)


def _in_memory() -> dict[str, np.ndarray]:
    train, test = datasets.text_split(TEXT)
    return {"train_tokens": np.frombuffer(train, np.uint8), "test_tokens": np.frombuffer(test, np.uint8)}


def test_text_split_is_the_first_90_percent_of_the_bytes() -> None:
    assert datasets.text_split(b"") == (b"", b"")
    assert datasets.text_split(bytes(range(10))) == (bytes(range(9)), b"\x09")
    train, test = datasets.text_split(TEXT)
    assert len(train) == len(TEXT) * 9 // 10 and train + test == TEXT
    assert len(datasets.text_split(b"x" * 1_115_394)[0]) == 1_003_854  # the real file's split


def test_fetch_from_a_folder_stores_the_split(corpus: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    code, out = _fetch(corpus, data)  # the default source: the archive, as the hub has no entry
    assert code == 0, out
    assert "train_tokens" in out and "test_tokens" in out
    manifest = datasets.read_manifest(data, NAME)  # validated like every other manifest
    assert manifest is not None and manifest["classes"] == [] and manifest["source"]["kind"] == "archives"
    assert manifest["created_by"].startswith(f"harness data fetch {NAME} --source archive")
    assert manifest["revision"] == "md5 " + hashlib.md5(TEXT, usedforsecurity=False).hexdigest()
    expected = _in_memory()
    assert manifest["arrays"] == {k: {"shape": [len(v)], "dtype": "uint8"} for k, v in expected.items()}
    with np.load(data / NAME / f"{NAME}.npz", allow_pickle=False) as npz:
        assert sorted(npz.files) == sorted(expected)
        for key, want in expected.items():
            assert npz[key].dtype == np.uint8 and npz[key].ndim == 1
            np.testing.assert_array_equal(npz[key], want)
    assert manifest["fingerprint"] == datasets.array_fingerprint(expected)
    assert (corpus / "input.txt").read_bytes() == TEXT  # the user's own file stays
    # `data list` counts bytes for a text corpus.
    code, out = _invoke("data", "list", "--data-dir", str(data))
    line = next(line for line in out.splitlines() if line.startswith(NAME))
    assert (
        code == 0 and "present" in line and f"{len(expected['train_tokens'])} / {len(expected['test_tokens'])}" in line
    )
    assert "text (bytes)" in line


def test_fetched_text_reads_back_the_same_fingerprint(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(JobError, match=f"harness data fetch {NAME}"):
        datasets.fetched_text(tmp_path, NAME)  # absent: the message names the fetch command
    assert _fetch(corpus, tmp_path)[0] == 0
    text = datasets.fetched_text(tmp_path, NAME)
    expected = _in_memory()
    np.testing.assert_array_equal(text.train, expected["train_tokens"])
    np.testing.assert_array_equal(text.test, expected["test_tokens"])
    assert "\n" not in text.source and NAME in text.source
    record = datasets.describe_text(text)
    used = datasets.array_fingerprint(expected)
    assert record["used_fingerprint"] == used == record["fingerprint"]  # the whole stored corpus was used
    assert (record["name"], record["origin"]) == (NAME, "archives")
    assert (record["train_samples"], record["test_samples"]) == (
        len(expected["train_tokens"]),
        len(expected["test_tokens"]),
    )


def test_missing_manifest_and_list_name_the_fetch_command(tmp_path: Path) -> None:
    assert datasets.fetch_command(NAME) == f"harness data fetch {NAME}"
    code, out = _invoke("data", "list", "--data-dir", str(tmp_path))
    line = next(line for line in out.splitlines() if line.startswith(NAME))
    assert code == 0 and "missing" in line and f"harness data fetch {NAME}" in line


def test_a_tampered_array_file_is_refused_in_one_line(corpus: Path, tmp_path: Path) -> None:
    assert _fetch(corpus, tmp_path)[0] == 0
    npz = tmp_path / NAME / f"{NAME}.npz"
    npz.write_bytes(npz.read_bytes() + b"\0")
    with pytest.raises(JobError, match="does not match the sha256") as caught:
        datasets.fetched_text(tmp_path, NAME)
    assert "\n" not in str(caught.value) and f"harness data fetch {NAME} --force" in str(caught.value)


def test_a_manifest_naming_another_file_is_refused_in_one_line(corpus: Path, tmp_path: Path) -> None:
    assert _fetch(corpus, tmp_path)[0] == 0
    path = tmp_path / NAME / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "file": "mnist.npz"}))
    with pytest.raises(JobError, match="file is 'mnist.npz'") as caught:
        datasets.fetched_text(tmp_path, NAME)
    assert "\n" not in str(caught.value) and "--force" in str(caught.value)
    # Writing the dataset again repairs it without --force.
    code, out = _fetch(corpus, tmp_path)
    assert code == 0, out
    assert datasets.fetched_text(tmp_path, NAME).train.size


def test_text_and_image_readers_refuse_each_others_datasets(corpus: Path, tmp_path: Path) -> None:
    assert _fetch(corpus, tmp_path)[0] == 0
    with pytest.raises(JobError, match="has no train_images"):
        datasets.fetched_images(tmp_path, NAME, 10)
    # Tokens stored as int32 (not one byte each) are refused, though the manifest describes them.
    tokens = np.arange(12, dtype=np.int32)

    def fill(writer: NpzWriter) -> dict[str, object]:
        for key in datasets.TEXT_KEYS:
            writer.add(key, tokens.shape, "int32", tokens.tobytes())
        return {}

    store.write_dataset(tmp_path, "other", fill, classes=[], source={"kind": "test"}, command="test")
    with pytest.raises(JobError, match="train_tokens is int32 .* not 1-D uint8"):
        datasets.fetched_text(tmp_path, "other")


def test_source_hub_is_refused_in_one_line(corpus: Path, tmp_path: Path) -> None:
    code, out = _fetch(corpus, tmp_path, "--source", "hub")
    assert code == 2 and "--source archive" in out and "\n" not in out.strip()
    assert not (tmp_path / NAME).exists()  # refused before anything was written


def test_a_wrong_checksum_is_refused_by_the_real_cli(tmp_path: Path) -> None:
    """The published md5, a file that is not the original: one line, exit 2, no dataset."""
    (tmp_path / "input.txt").write_bytes(TEXT.ljust(1115394, b" "))  # the published size: the md5 decides
    proc = harness("data", "fetch", NAME, "--from", str(tmp_path), "--data-dir", str(tmp_path / "data"))
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(errors) == 1 and "does not match the published 6fb458f1232090904fb40fe944165e91" in errors[0]
    assert datasets.read_manifest(tmp_path / "data", NAME) is None
