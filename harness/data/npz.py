"""Writing NumPy's .npy/.npz formats with the standard library.

The .npy format is a magic string, a version, a little header dict and the raw C-order bytes;
.npz is a zip of .npy files. Writing them directly keeps NumPy off the host while jobs read
the files with `numpy.load(path, allow_pickle=False)`.
"""

from __future__ import annotations

import math
import struct
import zipfile
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

MAGIC = b"\x93NUMPY"
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

    def __init__(self, path: Path, compresslevel: int = 6) -> None:
        self.path = path
        self._zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=compresslevel)
        self.arrays: dict[str, dict[str, object]] = {}

    def add(self, name: str, shape: tuple[int, ...], dtype: str, chunks: Iterable[bytes] | bytes) -> None:
        expected = math.prod(shape) * ITEMSIZE[dtype]
        written = 0
        with self._zip.open(f"{name}.npy", "w", force_zip64=True) as member:
            member.write(npy_header(shape, dtype))
            for chunk in [chunks] if isinstance(chunks, (bytes, bytearray, memoryview)) else chunks:
                member.write(chunk)
                written += len(chunk)
        if written != expected:
            raise ValueError(f"array {name}: wrote {written} bytes, shape {shape} {dtype} needs {expected}")
        self.arrays[name] = {"shape": list(shape), "dtype": dtype}

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> NpzWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
