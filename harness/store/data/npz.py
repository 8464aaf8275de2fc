"""Writing NumPy's .npy/.npz formats with the standard library.

The .npy format is a magic string, a version, a little header dict and the raw C-order bytes;
.npz is a zip of .npy files. Writing them directly keeps NumPy off the host while jobs read
the files with `numpy.load(path, allow_pickle=False)`. Members carry a fixed timestamp, so the
same arrays give the same file, and each array's content sha256 is kept for the manifest's
fingerprint (suites/contract/datasets.fingerprint).
"""

from __future__ import annotations

import hashlib
import math
import struct
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

MAGIC = b"\x93NUMPY"
EPOCH = (1980, 1, 1, 0, 0, 0)  # the zip format's earliest date: no wall-clock time in the file
DESCR = {"uint8": "|u1", "int32": "<i4", "float32": "<f4"}
ITEMSIZE = {"uint8": 1, "int32": 4, "float32": 4}


def npy_header(shape: tuple[int, ...], dtype: str) -> bytes:
    """A version 1.0 header, padded so the data starts at a multiple of 64 bytes."""
    dims = ", ".join(str(int(d)) for d in shape) + ("," if len(shape) == 1 else "")
    text = f"{{'descr': '{DESCR[dtype]}', 'fortran_order': False, 'shape': ({dims}), }}"
    unpadded = len(MAGIC) + 2 + 2 + len(text) + 1
    text += " " * (-unpadded % 64) + "\n"
    return MAGIC + b"\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1")


class NpzWriter:
    """Adds arrays one at a time, streaming their bytes, to a deflate-compressed .npz."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.arrays: dict[str, dict[str, object]] = {}
        # (name, dtype, shape, sha256 of the raw bytes) per array: the dataset fingerprint's input
        self.contents: list[tuple[str, str, tuple[int, ...], str]] = []

    def add(self, name: str, shape: tuple[int, ...], dtype: str, chunks: Iterable[bytes] | bytes) -> None:
        expected = math.prod(shape) * ITEMSIZE[dtype]
        written = 0
        digest = hashlib.sha256()
        info = zipfile.ZipInfo(f"{name}.npy", date_time=EPOCH)
        info.compress_type = zipfile.ZIP_DEFLATED  # at zlib's default level
        info.external_attr = 0o644 << 16
        with self._zip.open(info, "w", force_zip64=True) as member:
            member.write(npy_header(shape, dtype))
            for chunk in [chunks] if isinstance(chunks, (bytes, bytearray, memoryview)) else chunks:
                member.write(chunk)
                digest.update(chunk)
                written += len(chunk)
        if written != expected:
            raise ValueError(f"array {name}: wrote {written} bytes, shape {shape} {dtype} needs {expected}")
        self.arrays[name] = {"shape": list(shape), "dtype": dtype}
        self.contents.append((name, dtype, tuple(int(d) for d in shape), digest.hexdigest()))

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> NpzWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def add_image_splits(
    writer: NpzWriter,
    raw: Mapping[str, Path],
    labels: Mapping[str, Sequence[int]],
    image_shape: tuple[int, ...],
) -> None:
    """`train_images`, `train_labels`, `test_images`, `test_labels` from raw uint8 pixel files
    (streamed in 4 MiB blocks, never whole in memory) and their labels."""

    def chunks(path: Path) -> Iterator[bytes]:
        with path.open("rb") as stream:
            while block := stream.read(1 << 22):
                yield block

    for part in ("train", "test"):
        count = len(labels[part])
        writer.add(f"{part}_images", (count, *image_shape), "uint8", chunks(raw[part]))
        writer.add(f"{part}_labels", (count,), "uint8", bytes(labels[part]))
