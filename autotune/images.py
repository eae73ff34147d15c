"""Image files for `autotune convolve`: PNG and TIFF through Pillow, .npy through NumPy.

Pixels keep their type (8-bit and 16-bit grey, 32-bit float TIFF), so the kernel reads
them as they are stored. Pillow is an optional dependency (`pip install autotune[images]`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from autotune.errors import UsageError

IMAGE_SUFFIXES = (".png", ".tif", ".tiff")
# What each format stores, by NumPy dtype (Pillow modes: L, I;16, F).
WRITABLE = {".png": ("uint8", "uint16"), ".tif": ("uint8", "uint16", "float32")}


def is_image_file(path: str | Path) -> bool:
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def _pillow(path: str | Path) -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise UsageError(f"{path}: PNG and TIFF files need Pillow: pip install 'autotune[images]'") from None
    return Image


def read_image(label: str, path: str | Path) -> np.ndarray:
    """A greyscale PNG or TIFF file's pixels, in their own type (2-D)."""
    image_module = _pillow(path)
    try:
        with image_module.open(path) as image:
            if image.mode in ("RGB", "RGBA", "P", "CMYK", "LA"):
                raise UsageError(
                    f"{label} {path} is a {image.mode} image: colour channels are not filtered yet; "
                    "give a greyscale image (one channel)"
                )
            pixels = np.asarray(image)
    except OSError as exc:
        raise UsageError(f"{label} {path} is not a readable PNG or TIFF file: {exc}") from None
    if pixels.dtype == np.bool_:
        pixels = pixels.astype(np.uint8) * 255
    return np.ascontiguousarray(pixels)


def image_writer(path: str | Path, pixels: np.ndarray) -> Any:
    """A function that writes `pixels` to an open file in the format `path` names; bad
    input (a type the format cannot hold) is refused before anything is written."""
    suffix = Path(path).suffix.lower()
    suffix = ".tif" if suffix == ".tiff" else suffix
    if pixels.dtype.name not in WRITABLE[suffix]:
        raise UsageError(
            f"{path}: a {suffix[1:].upper()} file holds {', '.join(WRITABLE[suffix])} pixels, not "
            f"{pixels.dtype.name}; use --out-dtype same with such an input, or write .npy"
        )
    image_module = _pillow(path)
    image = image_module.fromarray(pixels)
    file_format = "PNG" if suffix == ".png" else "TIFF"

    def write(f: BinaryIO) -> None:
        image.save(f, format=file_format)

    return write
