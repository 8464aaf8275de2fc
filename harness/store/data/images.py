"""Decoding untrusted image files with Pillow (an optional host extra), within a pixel budget.

Image headers declare their size and decoders allocate it: a 50 kB PNG can declare 40 000 x
40 000 pixels and ask for gigabytes (a decompression bomb). Pillow only warns below twice its
own limit, so the size is checked here, from the header, before anything is decoded.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError

MAX_PIXELS = 64 * 1024 * 1024  # 64 megapixels: 8192 x 8192; a photo of a pet is far smaller


class Unreadable(Exception):
    """Pillow could not decode this file (truncated, not an image, an unsupported format)."""


def pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise HarnessError(
            "reading images needs Pillow on the host: pip install 'fw-harness[data]' (or pip install Pillow)"
        ) from None
    return Image


def decode(image_module: Any, source: bytes | Path, where: str, mode: str, max_pixels: int = MAX_PIXELS) -> Any:
    """The image converted to `mode` ("L", "RGB"), fully decoded and detached from its file.

    A size above `max_pixels` is a HarnessError naming the file (the run stops: a bomb is not an
    image to skip quietly); anything Pillow cannot decode raises Unreadable.
    """
    stream = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DecompressionBombWarning is handled below; palette notes are noise
        try:
            with image_module.open(stream) as image:
                width, height = image.size
                if width * height > max_pixels:
                    raise HarnessError(_bomb(where, f"{width}x{height}", max_pixels))
                return image.convert(mode)
        except HarnessError:
            raise
        except image_module.DecompressionBombError:
            raise HarnessError(_bomb(where, "its declared size", max_pixels)) from None
        except Exception as error:  # Pillow's many ways of saying "not an image": never a traceback
            raise Unreadable(f"{where}: {type(error).__name__}") from None


def _bomb(where: str, size: str, max_pixels: int) -> str:
    return (
        f"{where}: {size} pixels is over the limit of {max_pixels / 1e6:.0f} megapixels per image "
        "(a decompression bomb, or a photo far larger than training needs); remove or shrink it and run again"
    )


def square(image: Any, size: int, lanczos: Any) -> bytes:
    """Centre-crop to a square and resize to size x size: raw bytes in the image's mode."""
    w, h = image.size
    side = min(w, h)
    left, top = (w - side) // 2, (h - side) // 2
    return bytes(image.crop((left, top, left + side, top + side)).resize((size, size), lanczos).tobytes())
