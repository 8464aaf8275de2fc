"""Readers for the canonical archive formats, standard library only.

- MNIST: gzip-compressed IDX files (big-endian magic and dimensions, then uint8 data).
- CIFAR-10: a tarball of Python pickles, each a dict whose b"data" is a NumPy uint8 array
  (10000, 3072) in channel-planar order (1024 R, 1024 G, 1024 B per row) and b"labels" a list.
  The pickles hold NumPy objects, so they are read with a restricted unpickler that maps the few
  NumPy reconstruction functions onto small stand-ins capturing shape, dtype and raw bytes, and
  refuses every other global: no NumPy on the host, and no code execution from a tampered file.
"""

from __future__ import annotations

import codecs
import gzip
import io
import math
import pickle
import struct
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError

IDX_UBYTE = 0x08


@dataclass
class RawArray:
    """uint8 data in C order with its shape."""

    shape: tuple[int, ...]
    data: bytes


def read_idx(path: Path) -> RawArray:
    """A gzip IDX file of unsigned bytes (MNIST's images or labels)."""
    try:
        with gzip.open(path, "rb") as stream:
            raw = stream.read()
    except (OSError, EOFError) as error:
        raise HarnessError(f"{path.name}: not a readable gzip file ({error}); delete it and fetch again") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != IDX_UBYTE:
        raise HarnessError(f"{path.name}: not an IDX file of unsigned bytes (magic {raw[:4].hex()})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    if len(raw) - header != math.prod(shape):
        raise HarnessError(f"{path.name}: header says {shape} = {math.prod(shape)} bytes, file has {len(raw) - header}")
    return RawArray(tuple(shape), raw[header:])


# ---------------------------------------------------------------------------------------------
# CIFAR-10 python pickles.


class _DType:
    """Stand-in for numpy.dtype(...): only uint8 is accepted."""

    def __init__(self, spec: Any, *args: Any) -> None:
        self.spec = spec.decode() if isinstance(spec, bytes) else str(spec)

    def __setstate__(self, state: Any) -> None:
        pass  # byte order and flags: irrelevant for single bytes

    @property
    def is_uint8(self) -> bool:
        return self.spec in ("u1", "|u1", "uint8", "B")


class _Array:
    """Stand-in for numpy.ndarray, filled by __setstate__ (pickle protocol <= 4)."""

    def __init__(self, shape: tuple[int, ...] = (), dtype: _DType | None = None, data: bytes = b"") -> None:
        self.shape, self.dtype, self.data, self.fortran = tuple(shape), dtype, bytes(data), False

    def __setstate__(self, state: Any) -> None:
        _version, shape, dtype, fortran, raw = state
        self.shape, self.dtype, self.fortran = tuple(int(d) for d in shape), dtype, bool(fortran)
        self.data = raw.encode("latin1") if isinstance(raw, str) else bytes(raw)


def _reconstruct(cls: Any, shape: Any, dtype: Any) -> _Array:
    return _Array()


def _frombuffer(buffer: Any, dtype: _DType, shape: Any, order: Any) -> _Array:
    """Protocol 5 pickles of arrays (numpy >= 1.16 writing protocol 5)."""
    array = _Array(tuple(int(d) for d in shape), dtype, bytes(buffer))
    array.fortran = order in ("F", b"F")
    return array


_ALLOWED: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("numpy", "ndarray"): _Array,
    ("numpy", "dtype"): _DType,
    ("_codecs", "encode"): codecs.encode,  # how Python 3 protocol-2 pickles spell bytes
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a dataset pickle") from None


def _get(batch: dict[Any, Any], key: str) -> Any:
    for k in (key.encode(), key):
        if k in batch:
            return batch[k]
    raise KeyError(key)


def _planar_to_hwc(rows: bytes, count: int, pixels: int) -> bytes:
    """(N, 3, H*W) channel planes -> (N, H*W, 3) interleaved, by strided slice assignment per image."""
    out = bytearray(len(rows))
    step = 3 * pixels
    for i in range(count):
        base = i * step
        for c in range(3):
            out[base + c : base + step : 3] = rows[base + c * pixels : base + (c + 1) * pixels]
    return bytes(out)


def read_cifar_batch(blob: bytes, where: str) -> tuple[bytes, list[int], int]:
    """One pickled batch -> (HWC uint8 bytes, labels, count)."""
    try:
        batch = _RestrictedUnpickler(io.BytesIO(blob), encoding="bytes").load()
        array, labels = _get(batch, "data"), [int(v) for v in _get(batch, "labels")]
    except (pickle.UnpicklingError, KeyError, ValueError, TypeError, EOFError) as error:
        raise HarnessError(f"{where}: not a CIFAR-10 python batch ({error})") from None
    if not isinstance(array, _Array) or array.dtype is None or not array.dtype.is_uint8 or array.fortran:
        raise HarnessError(f"{where}: data is not a C-order uint8 array")
    if len(array.shape) != 2 or array.shape[1] != 3072 or array.shape[0] != len(labels):
        raise HarnessError(f"{where}: data shape {array.shape} with {len(labels)} labels; expected (N, 3072)")
    if len(array.data) != array.shape[0] * 3072:
        raise HarnessError(f"{where}: {len(array.data)} data bytes for shape {array.shape}")
    return _planar_to_hwc(array.data, array.shape[0], 1024), labels, array.shape[0]


CIFAR_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR_TEST = ("test_batch",)


def read_cifar_tarball(path: Path) -> Iterator[tuple[str, bytes, list[int], int]]:
    """(member name, HWC bytes, labels, count) for the five train batches, then the test batch."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
            for name in CIFAR_TRAIN + CIFAR_TEST:
                if name not in members:
                    raise HarnessError(f"{path.name}: no member {name}; not the CIFAR-10 python archive")
                if (stream := tar.extractfile(members[name])) is None:
                    raise HarnessError(f"{path.name}: member {name} is not a regular file")
                data, labels, count = read_cifar_batch(stream.read(), f"{path.name}:{name}")
                yield name, data, labels, count
    except (tarfile.TarError, OSError, EOFError) as error:
        raise HarnessError(f"{path.name}: not a readable .tar.gz ({error}); delete it and fetch again") from None
