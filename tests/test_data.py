"""`harness data`: fetch from a local HTTP server (never the network), import, list, formats.

The fake archives are tiny but in the canonical formats: gzip IDX files for MNIST and a
tar.gz of Python-2-style pickles for CIFAR-10. Their checksums differ from the published ones,
so tests that must succeed patch the catalogue in-process; the CLI test against the real
catalogue proves a wrong checksum is refused.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import http.server
import io
import json
import pickle
import struct
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core.errors import HarnessError
from harness.store.data import download, formats, sources
from harness.store.data.npz import NpzWriter, npy_header
from suites.contract import datasets
from suites.contract.errors import JobError
from tests.conftest import harness

N_TRAIN, N_TEST = 30, 12  # MNIST-like counts; CIFAR batches of 6 images


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()


def _idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as out:
        out.write(header + array.astype(np.uint8).tobytes())


class _Py2Pickler(pickle._Pickler):  # type: ignore[name-defined,misc]
    """Writes bytes as Python 2 `str` (BINSTRING), like the cPickle files inside the real archive."""

    dispatch = dict(pickle._Pickler.dispatch)  # type: ignore[attr-defined]

    def save_bytes(self, obj: bytes) -> None:
        self.write(pickle.BINSTRING + struct.pack("<I", len(obj)) + obj)
        self.memoize(obj)

    dispatch[bytes] = save_bytes


def _py2_pickle(obj: object) -> bytes:
    stream = io.BytesIO()
    _Py2Pickler(stream, protocol=2).dump(obj)
    # NumPy 2 names its module numpy._core; the 2009 archive says numpy.core.
    return stream.getvalue().replace(b"numpy._core.multiarray", b"numpy.core.multiarray")


@dataclasses.dataclass
class Fakes:
    folder: Path
    mnist: dict[str, np.ndarray]
    cifar: dict[str, np.ndarray]

    def md5s(self) -> dict[str, str]:
        return {p.name: _md5(p) for p in self.folder.iterdir()}


@pytest.fixture(scope="module")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> Fakes:
    folder = tmp_path_factory.mktemp("archives")
    rng = np.random.default_rng(0)
    mnist = {
        "train_images": rng.integers(0, 256, (N_TRAIN, 28, 28), dtype=np.uint8),
        "train_labels": rng.integers(0, 10, N_TRAIN, dtype=np.uint8),
        "test_images": rng.integers(0, 256, (N_TEST, 28, 28), dtype=np.uint8),
        "test_labels": rng.integers(0, 10, N_TEST, dtype=np.uint8),
    }
    _idx(folder / "train-images-idx3-ubyte.gz", mnist["train_images"])
    _idx(folder / "train-labels-idx1-ubyte.gz", mnist["train_labels"])
    _idx(folder / "t10k-images-idx3-ubyte.gz", mnist["test_images"])
    _idx(folder / "t10k-labels-idx1-ubyte.gz", mnist["test_labels"])
    planar = rng.integers(0, 256, (36, 3072), dtype=np.uint8)  # 5 train batches + test, 6 images each
    labels = rng.integers(0, 10, 36)
    with tarfile.open(folder / "cifar-10-python.tar.gz", "w:gz") as tar:
        for i, name in enumerate(formats.CIFAR_TRAIN + formats.CIFAR_TEST):
            rows = slice(6 * i, 6 * i + 6)
            blob = _py2_pickle({b"batch_label": b"x", b"labels": [int(v) for v in labels[rows]], b"data": planar[rows]})
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    hwc = planar.reshape(36, 3, 32, 32).transpose(0, 2, 3, 1)
    cifar = {"train_images": hwc[:30], "train_labels": labels[:30], "test_images": hwc[30:], "test_labels": labels[30:]}
    return Fakes(folder, mnist, cifar)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server(fakes: Fakes) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 serving the fake archives: the only place tests download from."""
    handler = functools.partial(_Quiet, directory=str(fakes.folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def fake_checksums(fakes: Fakes, monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalogue with the fake archives' md5s (and nothing else changed: archives with no
    fake here, such as tinyshakespeare's in test_data_text.py, keep their published md5s)."""
    md5s = fakes.md5s()
    for name, source in list(sources.SOURCES.items()):
        archives = tuple(
            dataclasses.replace(
                a,
                md5=md5s.get(a.name, a.md5),
                size=(fakes.folder / a.name).stat().st_size if a.name in md5s else a.size,
            )
            for a in source.archives
        )
        monkeypatch.setitem(sources.SOURCES, name, dataclasses.replace(source, archives=archives))


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    if isinstance(result.exception, HarnessError):
        return getattr(result.exception, "exit_code", 2), str(result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize("name", ["mnist", "cifar10"])
def test_fetch_from_a_mirror_stores_the_arrays(name: str, fakes: Fakes, server: str, fake_checksums: None,
                                               tmp_path: Path) -> None:  # fmt: skip
    code, out = _invoke("data", "fetch", name, "--source", "archive", "--mirror", server, "--data-dir", str(tmp_path))
    assert code == 0, out
    manifest = datasets.read_manifest(tmp_path, name)
    assert manifest is not None and manifest["name"] == name
    # The archives' published MD5s are the revision; the content fingerprint is the arrays' own.
    assert manifest["revision"].startswith("md5 ") and len(manifest["fingerprint"]) == 64
    assert all(f["from"].startswith(server) for f in manifest["source"]["files"])
    assert not (tmp_path / name / ".downloads").exists()  # archives removed after conversion
    arrays = datasets.load_fetched(tmp_path, name)  # the job-side reader, sha256 verified
    expected = fakes.mnist if name == "mnist" else fakes.cifar
    for key, want in expected.items():
        got = arrays[key]
        if key.endswith("images") and name == "mnist":
            assert got.shape == (*want.shape, 1)  # NHWC with one channel
            got = got[..., 0]
        np.testing.assert_array_equal(got, want)
    assert arrays["train_images"].dtype == np.uint8
    # Fetching again is refused unless forced; forced, the same archives give the same file.
    code, out = _invoke("data", "fetch", name, "--source", "archive", "--mirror", server, "--data-dir", str(tmp_path))
    assert code == 2 and "--force" in out
    code, out = _invoke("data", "fetch", name, "--source", "archive", "--mirror", server, "--data-dir", str(tmp_path),
                        "--force")  # fmt: skip
    assert code == 0, out
    again = datasets.read_manifest(tmp_path, name)
    assert again is not None and (again["sha256"], again["fingerprint"]) == (
        manifest["sha256"],
        manifest["fingerprint"],
    )
    assert again["created_at"] >= manifest["created_at"]


def test_fetch_from_a_local_folder(fakes: Fakes, fake_checksums: None, tmp_path: Path) -> None:
    code, out = _invoke("data", "fetch", "mnist", "--source", "archive", "--from", str(fakes.folder),
                        "--data-dir", str(tmp_path))  # fmt: skip
    assert code == 0, out
    assert (fakes.folder / "train-images-idx3-ubyte.gz").exists()  # the user's own files stay
    assert datasets.load_fetched(tmp_path, "mnist")["test_labels"].shape == (N_TEST,)


def test_wrong_checksum_is_refused_by_the_real_cli(server: str, tmp_path: Path) -> None:
    """The published md5s, fake archives: one line, exit 1 (what the server sent is wrong, not the
    input), no dataset written, no fallback to the internet."""
    proc = harness("data", "fetch", "mnist", "--source", "archive", "--mirror", server, "--data-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert "does not match the published f68b3c2dcbeaaa9fbdd348bbdeb94873" in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr  # (above it: the progress bar)
    assert datasets.read_manifest(tmp_path, "mnist") is None


def test_unreachable_mirror_names_the_offline_route(tmp_path: Path) -> None:
    code, out = _invoke("data", "fetch", "mnist", "--source", "archive", "--mirror", "http://127.0.0.1:9/",
                        "--data-dir", str(tmp_path))  # fmt: skip
    assert code == 1 and "--from FOLDER" in out  # a network fault, not bad input


def test_list_shows_present_and_missing(fakes: Fakes, fake_checksums: None, tmp_path: Path) -> None:
    _invoke("data", "fetch", "mnist", "--source", "archive", "--from", str(fakes.folder), "--data-dir", str(tmp_path))
    code, out = _invoke("data", "list", "--data-dir", str(tmp_path))
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert "present" in lines["mnist"] and f"{N_TRAIN} / {N_TEST}" in lines["mnist"] and "28x28x1" in lines["mnist"]
    assert "missing" in lines["cifar10"] and "harness data fetch cifar10" in lines["cifar10"]
    assert "harness data fetch catsdogs" in lines["catsdogs"]


def test_import_catsdogs(tmp_path: Path) -> None:
    from PIL import Image

    root = tmp_path / "pets"
    for label, colour in (("0", (200, 30, 30)), ("1", (30, 30, 200))):
        (root / label).mkdir(parents=True)
        for i in range(5):
            Image.new("RGB", (40 + 7 * i, 30 + 5 * i), colour).save(root / label / f"{i}.jpg")
    (root / "0" / "broken.jpg").write_bytes(b"not a jpeg")  # the Kaggle set has a few of these
    outside = tmp_path / "elsewhere.jpg"  # a file of this machine a link would bring into the dataset
    Image.new("RGB", (40, 30), (30, 200, 30)).save(outside)
    (root / "1" / "link.jpg").symlink_to(outside)
    data = tmp_path / "data"
    code, out = _invoke("data", "import", "catsdogs", str(root), "--size", "16", "--data-dir", str(data))
    assert code == 0, out
    assert "skipped 1 unreadable" in out
    arrays = datasets.load_fetched(data, "catsdogs")
    assert arrays["train_images"].shape[1:] == (16, 16, 3)
    assert len(arrays["train_labels"]) + len(arrays["test_labels"]) == 10
    images = np.concatenate([arrays["train_images"], arrays["test_images"]])
    labels = np.concatenate([arrays["train_labels"], arrays["test_labels"]])
    assert (images[labels == 0][..., 0] > 150).all() and (images[labels == 1][..., 2] > 150).all()  # no green
    manifest = datasets.read_manifest(data, "catsdogs")
    assert manifest is not None and manifest["skipped"] == ["0/broken.jpg"] and manifest["image_size"] == 16
    code, out = _invoke("data", "import", "catsdogs", str(tmp_path / "nowhere"), "--data-dir", str(data), "--force")
    assert code == 2 and "0/ (cats) and 1/ (dogs)" in out


# ---------------------------------------------------------------------------------------------
# Formats and the job side.


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 28, 28, 1), (0, 4)])
def test_stdlib_npz_reads_back_with_numpy(shape: tuple[int, ...], tmp_path: Path) -> None:
    array = (np.arange(int(np.prod(shape))) % 251).astype(np.uint8).reshape(shape)
    with NpzWriter(tmp_path / "a.npz") as writer:
        writer.add("x", shape, "uint8", array.tobytes())
        writer.add("y", (3,), "int32", np.array([1, -2, 3], np.int32).tobytes())
    with np.load(tmp_path / "a.npz", allow_pickle=False) as loaded:
        np.testing.assert_array_equal(loaded["x"], array)
        np.testing.assert_array_equal(loaded["y"], [1, -2, 3])
    assert len(npy_header(shape, "uint8")) % 64 == 0


def test_npz_writer_refuses_a_short_array(tmp_path: Path) -> None:
    with NpzWriter(tmp_path / "a.npz") as writer, pytest.raises(ValueError, match="needs 6"):
        writer.add("x", (2, 3), "uint8", b"\x00" * 5)


def test_dataset_pickles_cannot_run_code() -> None:
    evil = pickle.dumps({b"data": print, b"labels": []}, protocol=2)
    with pytest.raises(HarnessError, match="refusing to load .*print"):
        formats.read_cifar_batch(evil, "evil")


def test_idx_with_a_wrong_length_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.gz"
    with gzip.open(path, "wb") as out:
        out.write(bytes([0, 0, 8, 1]) + struct.pack(">I", 10) + b"\x00" * 9)
    with pytest.raises(HarnessError, match="10 bytes, file has 9"):
        formats.read_idx(path)


def test_job_side_missing_and_tampered_datasets(fakes: Fakes, fake_checksums: None, tmp_path: Path) -> None:
    with pytest.raises(JobError, match="harness data fetch cifar10"):
        datasets.load_fetched(tmp_path, "cifar10")
    _invoke("data", "fetch", "mnist", "--source", "archive", "--from", str(fakes.folder), "--data-dir", str(tmp_path))
    manifest_path = tmp_path / "mnist" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["sha256"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(JobError, match="does not match the sha256"):
        datasets.load_fetched(tmp_path, "mnist")


def test_toy_set_follows_the_seed_definition() -> None:
    x, y = datasets.toy_set(10_000, 42)
    assert x.shape == (10_000, 2) and x.dtype == np.float32
    assert np.bincount(y).tolist() == [1000 + 6000, 1000 + 2000]  # blobs 1000/1000, circles 6000 out / 2000 in
    circles = x[2000:]
    radius = np.hypot(circles[:, 0] - 2.5, circles[:, 1] + 7.0)
    assert abs(np.median(radius[y[2000:] == 0]) - 3.0) < 0.1  # outer circle, scaled x3
    assert abs(np.median(radius[y[2000:] == 1]) - 0.3) < 0.1  # inner circle, factor 0.1, x3


def test_synthetic_images_are_seeded_and_class_dependent() -> None:
    a = datasets.synthetic_images((28, 28, 1), 10, 500, 100, seed=3, like="MNIST")
    b = datasets.synthetic_images((28, 28, 1), 10, 500, 100, seed=3, like="MNIST")
    np.testing.assert_array_equal(a.train_x, b.train_x)
    assert a.train_x.dtype == np.uint8 and a.train_x.shape == (500, 28, 28, 1)
    # Nearest class mean on the raw pixels already beats chance by far: the data is learnable.
    means = np.stack([a.train_x[a.train_y == c].reshape(-1, 784).mean(0) for c in range(10)])
    guess = np.argmin(((a.test_x.reshape(-1, 784)[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert (guess == a.test_y).mean() > 0.5


# ---------------------------------------------------------------------------------------------
# Hostile inputs: each is one line and exit 2 (or a refused download), never a traceback.


def _one_line_exit_2(proc: subprocess.CompletedProcess[str]) -> str:
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return errors[0]


@pytest.mark.parametrize(
    "change",
    [
        {"arrays": ["train_images"]},
        {"bytes": "many"},
        {"file": "../../outside.npz"},
        {"sha256": 12},
        {"arrays": {"train_images": {"shape": "28x28", "dtype": "uint8"}}},
        {"fingerprint": ["not", "hex"]},
    ],
    ids=["arrays-list", "bytes-text", "file-outside", "sha-number", "shape-text", "fingerprint-list"],
)
def test_a_wrongly_typed_manifest_is_one_line_everywhere(change: dict[str, object], fakes: Fakes,
                                                        fake_checksums: None, tmp_path: Path) -> None:  # fmt: skip
    _invoke("data", "fetch", "mnist", "--source", "archive", "--from", str(fakes.folder), "--data-dir", str(tmp_path))
    path = tmp_path / "mnist" / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    # The job side refuses it with the fix...
    with pytest.raises(JobError, match="--force"):
        datasets.load_fetched(tmp_path, "mnist")
    # ...`data list` marks it invalid instead of crashing...
    code, out = _invoke("data", "list", "--data-dir", str(tmp_path))
    assert code == 0 and "invalid" in next(line for line in out.splitlines() if line.startswith("mnist"))
    # ...and a run stops before any job, in one line (the real CLI).
    proc = harness("run", "--suite", "mnist", "--param", "dataset=mnist", "--data-dir", str(tmp_path),
                   "--backend", "local", "--results-dir", str(tmp_path / "results"))  # fmt: skip
    assert "harness data fetch mnist --force" in _one_line_exit_2(proc)
    assert not (tmp_path / "results").exists()
    # Writing the dataset again repairs it without --force.
    code, out = _invoke("data", "fetch", "mnist", "--source", "archive", "--from", str(fakes.folder),
                        "--data-dir", str(tmp_path))  # fmt: skip
    assert code == 0, out


def test_manifest_that_is_not_json_or_huge(tmp_path: Path) -> None:
    folder = tmp_path / "mnist"
    folder.mkdir()
    (folder / "mnist.npz").write_bytes(b"x")
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(datasets.ManifestError, match="not valid JSON"):
        datasets.read_manifest(tmp_path, "mnist")
    (folder / "manifest.json").write_bytes(b" " * (datasets.MAX_MANIFEST_BYTES + 1))
    with pytest.raises(datasets.ManifestError, match="larger than"):
        datasets.read_manifest(tmp_path, "mnist")


def _png_declaring(width: int, height: int) -> bytes:
    """A tiny PNG whose header declares width x height RGB pixels (a decompression bomb's shape)."""
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("side", [9_000, 60_000])  # over the harness's 64 MP cap; over Pillow's own bomb error
def test_a_decompression_bomb_stops_the_import_in_one_line(side: int, tmp_path: Path) -> None:
    from PIL import Image

    root = tmp_path / "pets"
    for label in ("0", "1"):
        (root / label).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (20, 20), (40 * i, 90, 20)).save(root / label / f"{i}.png")
    (root / "1" / "bomb.png").write_bytes(_png_declaring(side, side))
    proc = harness("data", "import", "catsdogs", str(root), "--size", "16", "--data-dir", str(tmp_path / "data"))
    line = _one_line_exit_2(proc)
    assert "1/bomb.png" in line and "megapixels" in line
    assert datasets.read_manifest(tmp_path / "data", "catsdogs") is None


@pytest.mark.parametrize(
    "mirror", ["not a url", "ftp://mirror.example/mnist/", "file:///etc/", "http://127.0.0.1:port/", "https:///x/",
               "http://127.0.0.1:9/?q=1"],
)  # fmt: skip
def test_a_bad_mirror_url_is_one_line(mirror: str, tmp_path: Path) -> None:
    code, out = _invoke(
        "data", "fetch", "mnist", "--source", "archive", "--mirror", mirror, "--data-dir", str(tmp_path)
    )
    assert code == 2 and "--mirror" in out and "\n" not in out.strip()
    assert not (tmp_path / "mnist").exists()  # refused before anything was written


def test_a_bad_mirror_url_through_the_real_cli(tmp_path: Path) -> None:
    proc = harness("data", "fetch", "mnist", "--source", "archive", "--mirror", "ftp://x/", "--data-dir", str(tmp_path))
    assert "not an http(s) URL" in _one_line_exit_2(proc)


class _Endless(http.server.BaseHTTPRequestHandler):
    """Streams up to 200 MiB for any path; `announce` sends that size as Content-Length."""

    announce = False
    sent: list[int] = []

    def do_GET(self) -> None:
        total = 200 << 20
        self.send_response(200)
        if self.announce:
            self.send_header("Content-Length", str(total))
        self.end_headers()
        block, sent = b"\0" * (1 << 16), 0
        try:
            while sent < total:
                self.wfile.write(block)
                sent += len(block)
        except OSError:  # the client stopped reading and closed
            pass
        finally:
            type(self).sent.append(sent)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _fetch_from(handler: type[http.server.BaseHTTPRequestHandler], data_dir: Path) -> tuple[int, str]:
    """`data fetch mnist` from a mirror served by `handler` on this machine."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        return _invoke("data", "fetch", "mnist", "--source", "archive", "--mirror",
                       f"http://127.0.0.1:{httpd.server_address[1]}/", "--data-dir", str(data_dir))  # fmt: skip
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("announce", [False, True])
def test_downloads_stop_at_the_published_size(announce: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server sending far more than the archive's published size: refused, and not read to the end."""
    handler = type("Handler", (_Endless,), {"announce": announce, "sent": []})
    code, out = _fetch_from(handler, tmp_path)
    assert code == 1 and "train-images-idx3-ubyte.gz" in out
    published = sources.SOURCES["mnist"].archives[0].size
    if announce:
        assert f"announces {200 << 20} bytes" in out
    else:
        assert f"sent more than the published {published} bytes" in out
    # The client read at most the published size (plus what sat in socket buffers when it hung up).
    assert handler.sent and max(handler.sent) < published + (16 << 20) < (200 << 20)
    assert not any((tmp_path / "mnist").rglob("*.part")) and datasets.read_manifest(tmp_path, "mnist") is None


class _Drip(http.server.BaseHTTPRequestHandler):
    """Announces the archive's size, then sends one byte every 50 ms: alive, but far too slow."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(sources.SOURCES["mnist"].archives[0].size))
        self.end_headers()
        try:
            for _ in range(20 * 600):  # ten minutes at most
                self.wfile.write(b"\0")
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:  # the client gave up and closed
            pass

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_slow_drip_mirror_is_given_up_at_the_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline holds while a block is read: a byte every 50 ms never fills a 64 KiB read, so a
    check made only between whole blocks would wait for hours (issue 23: 400 s against a stated 258 s)."""
    monkeypatch.setattr(download, "TIMEOUT_S", 1.0)
    monkeypatch.setattr(download, "MIN_RATE", 10**9)  # deadline: about 1 s
    started = time.monotonic()
    code, out = _fetch_from(_Drip, tmp_path)
    assert code == 1 and "gave up" in out, out
    assert time.monotonic() - started < 30  # four archives, each given up at its own ~1 s deadline
