"""Datasets as jobs see them: fetched array files in the read-only data folder, or synthetic data.

Layout of the data folder (written by `harness data` on the host, read here):

    <data>/<name>/manifest.json   what the array file holds, where it came from, its sha256
    <data>/<name>/<name>.npz      uint8 images (N, H, W, C) and uint8 labels (N,), per split;
                                  for a text corpus, uint8 bytes (N,) per split (TEXT_KEYS)

The manifest helpers are standard library only, because the host imports them too (to list
datasets and to refuse a run whose dataset is missing before any job starts). A manifest is
read back as hostile input: every field is type-checked and the array file must be the one
beside it. Everything that builds arrays imports NumPy inside the function: every framework
stack ships NumPy, and all frameworks receive the same NumPy arrays, so they train on identical
data -- which the `used_fingerprint` in each result lets a reader verify.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suites.contract.errors import JobError

SYNTHETIC = "synthetic"
AUTO = "auto"  # the real dataset when it is in the data folder; otherwise a one-line refusal
# Real data shipped inside a suite's folder: nothing to fetch, never in the data folder.
BUNDLED = {"shakespeare": "tiny Shakespeare, in suites/gpt/corpus"}
MANIFEST = "manifest.json"
FORMAT = "harness-dataset"
FORMAT_VERSION = 1
ARRAY_KEYS = ("train_images", "train_labels", "test_images", "test_labels")
TEXT_KEYS = ("train_tokens", "test_tokens")  # a byte-level text corpus: one uint8 token per byte
MAX_MANIFEST_BYTES = 4 << 20  # a manifest is metadata; anything bigger is not one of ours
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DTYPES = ("uint8", "int32", "float32")

# How each named dataset gets into the data folder; the one command a missing-data error names.
FETCH_COMMANDS = {
    "mnist": "harness data fetch mnist",
    "cifar10": "harness data fetch cifar10",
    "catsdogs": "harness data fetch catsdogs",
    "tinyshakespeare": "harness data fetch tinyshakespeare",
}


class ManifestError(ValueError):
    """A manifest that exists but cannot be trusted (wrong types, a path outside its folder)."""


def fetch_command(name: str) -> str:
    return FETCH_COMMANDS.get(name, f"harness data fetch {name}")


def valid_name(name: str) -> bool:
    """Dataset names become folder names: lower-case letters, digits, - and _ only."""
    return bool(_NAME.fullmatch(name))


def dataset_dir(data_dir: Path, name: str) -> Path:
    if not valid_name(name):
        raise ManifestError(f"{name!r} is not a dataset name (lower-case letters, digits, - and _)")
    return data_dir / name


def missing_message(name: str, data_dir: Path | None) -> str:
    where = str(data_dir) if data_dir is not None else "no data folder was given"
    return (
        f"dataset {name!r} is not in the data folder ({where}): run `{fetch_command(name)}` on the host "
        f"(then pass --data-dir if it is not ./data), or use --param dataset={SYNTHETIC}"
    )


def auto_target(choices: Sequence[str]) -> str | None:
    """The real dataset `dataset=auto` stands for: the one choice that is neither auto nor synthetic."""
    real = [c for c in choices if c not in (AUTO, SYNTHETIC)]
    return real[0] if len(real) == 1 else None


def auto_missing_message(name: str, data_dir: Path | None) -> str:
    where = str(data_dir) if data_dir is not None else "no data folder was given"
    return (
        f"dataset=auto uses {name} when it is in the data folder, and it is not ({where}): run "
        f"`{fetch_command(name)}` on the host, or pass --param dataset={SYNTHETIC}"
    )


def resolve(requested: str, choices: Sequence[str], data_dir: Path | None) -> str:
    """`auto` -> the real dataset when present (else a JobError naming both ways out); others unchanged."""
    if requested != AUTO:
        return requested
    target = auto_target(choices)
    if target is None:
        return SYNTHETIC
    try:
        present = data_dir is not None and read_manifest(data_dir, target) is not None
    except ManifestError as error:
        raise JobError(f"{error}: run `{fetch_command(target)} --force` on the host") from None
    if not present:
        raise JobError(auto_missing_message(target, data_dir))
    return target


def _dims(shape: Any) -> bool:
    return isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)


def _problem(manifest: Any, name: str) -> str | None:
    """What is wrong with a parsed manifest's fields, or None. Everything read back is hostile."""
    if not isinstance(manifest, dict):
        return "is not a JSON object"
    if manifest.get("version") != FORMAT_VERSION:
        return f"has format version {manifest.get('version')!r}; this harness reads version {FORMAT_VERSION}"
    if manifest.get("name") != name:
        return f"names dataset {manifest.get('name')!r}, not {name!r}"
    file = manifest.get("file")
    # Only the dataset's own array file, right beside the manifest: never a path a tampered
    # manifest could point elsewhere with.
    if file != f"{name}.npz":
        return f"file is {file!r}; expected {name + '.npz'!r}"
    if not isinstance(manifest.get("sha256"), str) or not _HEX64.fullmatch(manifest["sha256"]):
        return "sha256 is not 64 hex digits"
    size = manifest.get("bytes")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return "bytes is not a non-negative integer"
    arrays = manifest.get("arrays")
    if not isinstance(arrays, dict) or not arrays:
        return "arrays is not an object of array descriptions"
    for key, described in arrays.items():
        if not isinstance(described, dict):
            return f"arrays.{key} is not an object"
        if not _dims(described.get("shape")):
            return f"arrays.{key}.shape is not a list of non-negative integers"
        if described.get("dtype") not in _DTYPES:
            return f"arrays.{key}.dtype is not one of {', '.join(_DTYPES)}"
    classes = manifest.get("classes")
    if classes is not None and (not isinstance(classes, list) or not all(isinstance(c, str) for c in classes)):
        return "classes is not a list of strings"
    for key in ("revision", "fingerprint", "created_at", "created_by"):
        if manifest.get(key) is not None and not isinstance(manifest[key], str):
            return f"{key} is not a string"
    if manifest.get("fingerprint") is not None and not _HEX64.fullmatch(manifest["fingerprint"]):
        return "fingerprint is not 64 hex digits"
    if manifest.get("source") is not None and not isinstance(manifest["source"], dict):
        return "source is not an object"
    size_field = manifest.get("image_size")
    if size_field is not None and (not isinstance(size_field, int) or isinstance(size_field, bool)):
        return "image_size is not an integer"
    return None


def read_manifest(data_dir: Path, name: str) -> dict[str, Any] | None:
    """The manifest of a present dataset; None when the dataset is absent or incomplete.

    A manifest that is there but malformed (wrong types, another file named, not JSON) raises
    ManifestError: a run must not silently fall back to other data.
    """
    folder = dataset_dir(data_dir, name)
    path = folder / MANIFEST
    if path.is_symlink() or not path.is_file():
        return None
    try:
        size = path.stat().st_size
        text = path.read_text(encoding="utf-8") if size <= MAX_MANIFEST_BYTES else None
    except OSError:
        return None
    except UnicodeDecodeError:
        raise ManifestError(f"{path} is not UTF-8 text") from None
    if text is None:
        raise ManifestError(f"{path} is larger than {MAX_MANIFEST_BYTES} bytes; not a dataset manifest")
    try:
        manifest = json.loads(text)
    except ValueError:
        raise ManifestError(f"{path} is not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ManifestError(f"{path} is not a harness dataset manifest (format {FORMAT!r})")
    problem = _problem(manifest, name)
    if problem:
        raise ManifestError(f"{path} {problem}")
    array = folder / manifest["file"]
    if array.is_symlink() or not array.is_file():
        return None  # an interrupted write: the arrays are not there (yet)
    return manifest


def sha256_file(path: Path, block: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def fingerprint(arrays: Iterable[tuple[str, str, Sequence[int], str]]) -> str:
    """One id for a dataset's content: (name, dtype, shape, sha256 of the C-order bytes) per array.

    Independent of the archive container (zip timestamps, compression), so the host that wrote
    the arrays and a job that generated or loaded them compute the same value for the same data.
    """
    digest = hashlib.sha256()
    for name, dtype, shape, content in sorted(arrays):
        digest.update(f"{name} {dtype} {','.join(str(int(d)) for d in shape)} {content}\n".encode())
    return digest.hexdigest()


def text_split(data: bytes) -> tuple[bytes, bytes]:
    """(train, test) of a text corpus: the first 90 % of the bytes, then the rest (nanoGPT's split).

    One rule for the host's converter and for a job's bundled copy of the same text, so both
    give the same arrays and so the same fingerprint.
    """
    n_train = len(data) * 9 // 10
    return data[:n_train], data[n_train:]


# ---------------------------------------------------------------------------------------------
# Array side (NumPy imported inside the functions).


@dataclass
class ImageData:
    """uint8 images (N, H, W, C), int32 labels (N,), for one training run."""

    train_x: Any
    train_y: Any
    test_x: Any
    test_y: Any
    classes: int
    source: str  # one line for the result's notes: which data, from where
    # Which data, for the result's `dataset` record: name, origin, revision, content fingerprint.
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.train_x.shape[1:])


def array_fingerprint(arrays: dict[str, Any]) -> str:
    """`fingerprint` of in-memory NumPy arrays (synthetic data, or a check of loaded data)."""
    import numpy as np

    return fingerprint(
        (name, str(a.dtype), a.shape, hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest())
        for name, a in arrays.items()
    )


def _job_manifest(data_dir: Path | None, name: str) -> dict[str, Any]:
    try:
        manifest = read_manifest(data_dir, name) if data_dir is not None else None
    except ManifestError as error:
        raise JobError(f"{error}: run `{fetch_command(name)} --force` on the host") from None
    if manifest is None or data_dir is None:
        raise JobError(missing_message(name, data_dir))
    return manifest


def load_fetched(data_dir: Path | None, name: str, *, verify: bool = True) -> dict[str, Any]:
    """The arrays of a fetched dataset; a JobError naming the fetch command when it is absent."""
    return _load(data_dir, name, verify=verify)[0]


def _load(
    data_dir: Path | None, name: str, *, verify: bool = True, keys: Sequence[str] = ARRAY_KEYS
) -> tuple[dict[str, Any], dict[str, Any]]:
    import numpy as np

    manifest = _job_manifest(data_dir, name)
    assert data_dir is not None
    path = dataset_dir(data_dir, name) / manifest["file"]
    if verify and sha256_file(path) != manifest["sha256"]:
        raise JobError(f"{path} does not match the sha256 in its manifest: run `{fetch_command(name)} --force`")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError) as error:
        raise JobError(f"{path} is not a readable array file ({error}): run `{fetch_command(name)} --force`") from None
    for key, declared in manifest["arrays"].items():
        if key not in arrays or list(arrays[key].shape) != list(declared["shape"]):
            raise JobError(f"{path}: array {key} does not match the manifest: run `{fetch_command(name)} --force`")
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise JobError(f"{path} has no {', '.join(missing)}: run `{fetch_command(name)} --force`")
    return arrays, manifest


def _fetched_record(name: str, manifest: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The result's `dataset` record of a fetched dataset, and the one line for the notes."""
    sha = manifest["sha256"]
    source = manifest.get("source") or {}
    record = {
        "name": name,
        "origin": str(source.get("kind", "unknown")),
        "repo": source.get("repo") if isinstance(source.get("repo"), str) else None,
        "revision": manifest.get("revision"),
        "fingerprint": manifest.get("fingerprint"),
        "sha256": sha,
        "created_by": manifest.get("created_by"),
    }
    revision = f", revision {str(manifest['revision'])[:12]}" if manifest.get("revision") else ""
    return record, f"{name} from the data folder{revision} (array file sha256 {sha[:16]})"


def fetched_images(data_dir: Path | None, name: str, classes: int) -> ImageData:
    arrays, manifest = _load(data_dir, name)
    for split in ("train", "test"):
        labels = arrays[f"{split}_labels"]
        if labels.size and (int(labels.min()) < 0 or int(labels.max()) >= classes):
            raise JobError(
                f"dataset {name}: {split} labels outside 0..{classes - 1}: run `{fetch_command(name)} --force`"
            )
    record, source = _fetched_record(name, manifest)
    return ImageData(
        train_x=arrays["train_images"],
        train_y=arrays["train_labels"].astype("int32"),
        test_x=arrays["test_images"],
        test_y=arrays["test_labels"].astype("int32"),
        classes=classes,
        source=source,
        record=record,
    )


@dataclass
class TextData:
    """uint8 token streams (one token per byte), train and test, for one training run."""

    train: Any
    test: Any
    source: str  # one line for the result's notes: which data, from where
    record: dict[str, Any] = field(default_factory=dict)  # as ImageData.record


def fetched_text(data_dir: Path | None, name: str) -> TextData:
    """A fetched text corpus (TEXT_KEYS), with every check `_load` makes of the manifest and file."""
    arrays, manifest = _load(data_dir, name, keys=TEXT_KEYS)
    for key in TEXT_KEYS:
        # The manifest's shape was checked, not the dtype: a token id above 255 must not slip in.
        if arrays[key].ndim != 1 or str(arrays[key].dtype) != "uint8":
            raise JobError(
                f"dataset {name}: {key} is {arrays[key].dtype} {arrays[key].shape}, not 1-D uint8 bytes: "
                f"run `{fetch_command(name)} --force`"
            )
    record, source = _fetched_record(name, manifest)
    return TextData(train=arrays["train_tokens"], test=arrays["test_tokens"], source=source, record=record)


def _prototypes(rng: Any, classes: int, height: int, width: int, channels: int) -> Any:
    """One smooth, distinct float pattern in [0, 1] per class: a few Gaussian strokes with a colour."""
    import numpy as np

    yy: Any
    xx: Any
    yy, xx = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    protos: Any = np.zeros((classes, height, width, channels), dtype=np.float32)
    for c in range(classes):
        canvas: Any = np.zeros((height, width, channels), dtype=np.float32)
        for _ in range(4):
            cy, cx = rng.uniform(0.2, 0.8) * height, rng.uniform(0.2, 0.8) * width
            sy, sx = rng.uniform(0.05, 0.25) * height, rng.uniform(0.05, 0.25) * width
            blob = np.exp(-0.5 * (((yy - cy) / sy) ** 2 + ((xx - cx) / sx) ** 2)).astype(np.float32)
            colour = rng.uniform(0.3, 1.0, size=channels).astype(np.float32)
            canvas += blob[:, :, None] * colour
        protos[c] = canvas / canvas.max()
    return protos


def _draw(rng: Any, protos: Any, n: int, chunk: int = 4096) -> tuple[Any, Any]:
    """n samples: a shifted, dimmed class pattern, a fainter distractor pattern, and noise.

    The distractor (another class at up to 0.4 of the main weight) and the noise make the task
    learnable but not trivial: accuracy climbs over epochs instead of jumping to 100 %.
    """
    import numpy as np

    classes, height, width, channels = protos.shape
    labels = rng.integers(0, classes, size=n).astype(np.int32)
    images = np.empty((n, height, width, channels), dtype=np.uint8)
    for lo in range(0, n, chunk):
        hi = min(lo + chunk, n)
        m = hi - lo
        y = labels[lo:hi]
        other = (y + rng.integers(1, classes, size=m)) % classes
        weight = rng.uniform(0.6, 1.0, size=(m, 1, 1, 1)).astype(np.float32)
        faint = weight * rng.uniform(0.0, 0.4, size=(m, 1, 1, 1)).astype(np.float32)
        batch = weight * protos[y] + faint * protos[other]
        # Translate each sample by up to 2 pixels (grouped by shift so it stays vectorised).
        shifts = rng.integers(-2, 3, size=(m, 2))
        for dy in range(-2, 3):
            for dx in range(-2, 3):
                rows = np.nonzero((shifts[:, 0] == dy) & (shifts[:, 1] == dx))[0]
                if rows.size and (dy or dx):
                    batch[rows] = np.roll(batch[rows], (dy, dx), axis=(1, 2))
        batch += rng.normal(0.0, 0.2, size=batch.shape).astype(np.float32)
        images[lo:hi] = np.clip(batch * 255.0, 0, 255).astype(np.uint8)
    return images, labels


def synthetic_images(
    shape: tuple[int, int, int], classes: int, n_train: int, n_test: int, seed: int, like: str
) -> ImageData:
    """Class-dependent images of the real dataset's shape, from one NumPy seed (same for every framework)."""
    import numpy as np

    height, width, channels = shape
    root = np.random.SeedSequence([seed, 0x5EED])
    proto_seed, train_seed, test_seed = root.spawn(3)
    protos = _prototypes(np.random.default_rng(proto_seed), classes, height, width, channels)
    train_x, train_y = _draw(np.random.default_rng(train_seed), protos, n_train)
    test_x, test_y = _draw(np.random.default_rng(test_seed), protos, n_test)
    return ImageData(
        train_x,
        train_y,
        test_x,
        test_y,
        classes,
        f"synthetic {like}-shaped data ({classes} classes, seed {seed})",
        synthetic_record(f"synthetic {like}-shaped images, seed {seed}", seed),
    )


def synthetic_record(what: str, seed: int) -> dict[str, Any]:
    """The `dataset` record of generated data; its fingerprint is filled in by `describe`."""
    return {"name": SYNTHETIC, "origin": "generated", "repo": None, "revision": f"seed {seed}", "what": what}


def describe(data: ImageData) -> dict[str, Any]:
    """The result's `dataset` record for the arrays one run really trains and tests on.

    `fingerprint` is the stored dataset's (fetched) or the generated arrays' (synthetic);
    `used_fingerprint` always covers exactly the samples this run used, so two frameworks that
    report the same value trained on the same bytes.
    """
    record = dict(data.record)
    used = array_fingerprint(
        {"train_images": data.train_x, "train_labels": data.train_y, "test_images": data.test_x,
         "test_labels": data.test_y}
    )  # fmt: skip
    if record.get("name") == SYNTHETIC:
        record["fingerprint"] = used
    record["used_fingerprint"] = used
    record["train_samples"] = int(len(data.train_y))
    record["test_samples"] = int(len(data.test_y))
    return record


def describe_text(data: TextData) -> dict[str, Any]:
    """`describe` for a text corpus: `used_fingerprint` over the two token arrays this run used."""
    record = dict(data.record)
    used = array_fingerprint({"train_tokens": data.train, "test_tokens": data.test})
    if record.get("name") == SYNTHETIC or record.get("name") in BUNDLED:  # no manifest's fingerprint to carry
        record["fingerprint"] = used
    record["used_fingerprint"] = used
    record["train_samples"] = int(len(data.train))
    record["test_samples"] = int(len(data.test))
    return record


def subset(data: ImageData, train_samples: int, test_samples: int) -> ImageData:
    """The first N samples of each split (0 keeps all): smaller runs on the same data."""
    n_train = train_samples or len(data.train_y)
    n_test = test_samples or len(data.test_y)
    if n_train > len(data.train_y) or n_test > len(data.test_y):
        raise JobError(
            f"train_samples={train_samples}, test_samples={test_samples} exceed the dataset "
            f"({len(data.train_y)} train, {len(data.test_y)} test samples)"
        )
    return ImageData(
        data.train_x[:n_train],
        data.train_y[:n_train],
        data.test_x[:n_test],
        data.test_y[:n_test],
        data.classes,
        data.source,
        dict(data.record),
    )


def split_off(x: Any, y: Any, keep: int, seed: int) -> tuple[Any, Any]:
    """A seeded random subset of `keep` rows (e.g. CIFAR-10's 45k of 50k training images)."""
    import numpy as np

    rows = np.random.default_rng(seed).permutation(len(y))[:keep]
    rows.sort()  # keep the source order within the subset; the epoch orders shuffle anyway
    return x[rows], y[rows]


def epoch_orders(n: int, epochs: int, seed: int, shuffle: bool) -> Any:
    """(epochs, n) int32 sample orders, made once on the host so every framework sees the same batches."""
    import numpy as np

    if not shuffle:
        return np.tile(np.arange(n, dtype=np.int32), (epochs, 1))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x0BDE]))
    return np.stack([rng.permutation(n).astype(np.int32) for _ in range(epochs)])


def batch_starts(n: int, batch: int, drop_last: bool) -> tuple[list[int], int]:
    """Start offsets of the full batches, and the size of the last partial batch (0: none)."""
    full = n // batch
    tail = 0 if drop_last else n - full * batch
    return [i * batch for i in range(full)], tail


# ---------------------------------------------------------------------------------------------
# The toy set of seed 002 (two blobs plus two circles), following scikit-learn's definitions.


def make_blobs(
    n: int, centers: int, std: float, seed: int, box: tuple[float, float] = (-10.0, 10.0)
) -> tuple[Any, Any]:
    """sklearn.datasets.make_blobs(n, n_features=2, centers, cluster_std=std, random_state=seed), same steps."""
    import numpy as np

    rng = np.random.RandomState(seed)
    means = rng.uniform(box[0], box[1], size=(centers, 2))
    per = [n // centers + (1 if i < n % centers else 0) for i in range(centers)]
    x = np.concatenate([rng.normal(loc=means[i], scale=std, size=(per[i], 2)) for i in range(centers)])
    y = np.concatenate([np.full(per[i], i) for i in range(centers)])
    order = np.arange(n)
    rng.shuffle(order)
    return x[order], y[order]


def make_circles(n_out: int, n_in: int, noise: float, factor: float, seed: int) -> tuple[Any, Any]:
    """sklearn.datasets.make_circles((n_out, n_in), noise, factor, random_state=seed), same steps."""
    import numpy as np

    rng = np.random.RandomState(seed)
    t_out = np.linspace(0, 2 * math.pi, n_out, endpoint=False)
    t_in = np.linspace(0, 2 * math.pi, n_in, endpoint=False)
    x = np.vstack([np.append(np.cos(t_out), np.cos(t_in) * factor), np.append(np.sin(t_out), np.sin(t_in) * factor)]).T
    y = np.hstack([np.zeros(n_out, dtype=np.intp), np.ones(n_in, dtype=np.intp)])
    order = np.arange(n_out + n_in)
    rng.shuffle(order)
    x, y = x[order], y[order]
    x += rng.normal(scale=noise, size=x.shape)
    return x, y


def toy_set(size: int, seed: int) -> tuple[Any, Any]:
    """Seed 002's nested classes: blobs (20 %) plus circles (60 % outer, 20 % inner) scaled x3, shifted."""
    import numpy as np

    xb, yb = make_blobs(int(size * 0.2), centers=2, std=1.9, seed=seed)
    xc, yc = make_circles(int(size * 0.6), int(size * 0.2), noise=0.05, factor=0.1, seed=seed)
    xc = xc * 3.0
    xc[:, 0] += 2.5
    xc[:, 1] -= 7.0
    return np.concatenate([xb, xc]).astype(np.float32), np.concatenate([yb, yc]).astype(np.int32)
