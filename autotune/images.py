"""Image files for `autotune convolve`: PNG and TIFF through Pillow, .npy through NumPy.

Pixels keep their type (8-bit and 16-bit grey, 32-bit float TIFF, 8-bit RGB, RGBA and
grey with alpha as interleaved channels), so the kernel reads them as they are stored.
Pillow is an optional dependency (`pip install autotune[images]`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from autotune.errors import UsageError

IMAGE_SUFFIXES = (".png", ".tif", ".tiff")
# What each format stores, by NumPy dtype (Pillow modes: L, I;16, F), one channel;
# 8-bit pixels also as 2, 3 or 4 interleaved channels (LA, RGB, RGBA).
WRITABLE = {".png": ("uint8", "uint16"), ".tif": ("uint8", "uint16", "float32")}
COLOUR_MODES = {"LA": 2, "RGB": 3, "RGBA": 4}


def is_image_file(path: str | Path) -> bool:
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def _pillow(path: str | Path) -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise UsageError(f"{path}: PNG and TIFF files need Pillow: pip install 'autotune[images]'") from None
    return Image


def read_image(label: str, path: str | Path) -> np.ndarray:
    """A PNG or TIFF file's pixels, in their own type: (H, W) grey, or (H, W, C) for
    grey with alpha, RGB and RGBA (a palette image as RGB, or RGBA where it is
    transparent)."""
    image_module = _pillow(path)
    try:
        with image_module.open(path) as image:
            if image.mode == "P":
                image = image.convert("RGBA" if "transparency" in image.info else "RGB")
            if image.mode == "CMYK":
                raise UsageError(f"{label} {path} is a CMYK image: convert it to RGB first")
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
    if pixels.ndim > 3:
        raise UsageError(
            f"{path}: a {suffix[1:].upper()} file holds one image, not a batch of frames; write .npy"
        )
    if pixels.ndim == 3 and (pixels.dtype != np.uint8 or pixels.shape[2] not in COLOUR_MODES.values()):
        raise UsageError(
            f"{path}: a {suffix[1:].upper()} file holds 2, 3 or 4 channels of uint8 pixels, not "
            f"{pixels.shape[2]} of {pixels.dtype.name}; use --out-dtype same with a uint8 input, "
            "or write .npy"
        )
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
