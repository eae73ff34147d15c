"""Reading what people ask the convolution family for: filter widths, output sizes and
filters from .npy files, each checked with one clear error."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from autotune.errors import UsageError
from autotune.families.conv2d.render import MAX_FILTER_WIDTH

CPU_IMAGE = (2048, 2048)  # default output size on CPUs
GPU_IMAGE = (4096, 4096)  # and elsewhere


def parse_filter_widths(text: str) -> list[int]:
    widths = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise UsageError(f"--filter-width takes a comma list of positive integers, got {text!r}")
        width = int(part)
        if width < 1 or width > MAX_FILTER_WIDTH:
            raise UsageError(f"filter width must be from 1 to {MAX_FILTER_WIDTH}, got {width}")
        widths.append(width)
    return list(dict.fromkeys(widths))


FilterSize = int | tuple[int, int]  # F (F x F), or (rows, F)


def parse_filter_sizes(text: str) -> list[FilterSize]:
    """`3,5,3x5`: widths F of square filters, or ROWSxF sizes (rows first, as a NumPy
    shape; a square ROWSxF is its width alone)."""
    sizes: list[FilterSize] = []
    for part in text.split(","):
        pieces = part.strip().lower().split("x")
        if len(pieces) > 2 or not all(p.strip().isdigit() for p in pieces):
            raise UsageError(
                f"--filter-width takes a comma list of widths F or sizes ROWSxF (e.g. 3,5,3x5), got {text!r}"
            )
        values = [int(p) for p in pieces]
        for value in values:
            if not 1 <= value <= MAX_FILTER_WIDTH:
                raise UsageError(f"filter sizes must be from 1 to {MAX_FILTER_WIDTH}, got {part.strip()!r}")
        rows, width = values if len(values) == 2 else (values[0], values[0])
        sizes.append(width if rows == width else (rows, width))
    return list(dict.fromkeys(sizes))


def parse_image_size(text: str) -> tuple[int, int]:
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise UsageError(f"--image-size takes WIDTHxHEIGHT, e.g. 2048x2048, got {text!r}")
    width, height = (int(p) for p in parts)
    if not (1 <= width <= 65536 and 1 <= height <= 65536):
        raise UsageError(f"image size must be from 1x1 to 65536x65536, got {text!r}")
    return width, height


def default_image_size(device: Any) -> tuple[int, int]:
    return CPU_IMAGE if device.is_cpu else GPU_IMAGE


def image_size(text: str | None, device: Any) -> tuple[int, int]:
    """The output size asked for, or the device type's default. Any filter goes with any
    size: 'valid' input is the output grown by the filter, and 'same' output reads past
    the image's edge through its border however far the filter reaches, as `convolve`
    does for images smaller than the filter."""
    return parse_image_size(text) if text else default_image_size(device)


def _declared_bytes(f: Any) -> tuple[tuple[int, ...], int]:
    """The shape a .npy header declares and the bytes of data that shape needs; the
    file is left at the start of the data."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    elif hasattr(np.lib.format, "_read_array_header"):  # 3.0: a UTF-8 header
        shape, _, dtype = np.lib.format._read_array_header(f, version)
    else:
        raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    if dtype.hasobject:
        raise ValueError("it holds Python objects, not numbers")
    return shape, math.prod(shape) * dtype.itemsize


def load_npy(label: str, path: str) -> np.ndarray:
    """A .npy file's array. Its header is checked against the file's size first: a
    header declaring more data than the file holds is bad input, not an attempt to
    allocate it."""
    try:
        with open(path, "rb") as f:
            shape, needed = _declared_bytes(f)
            held = os.fstat(f.fileno()).st_size - f.tell()
            if needed > held:
                raise ValueError(
                    f"its header declares shape {shape} ({needed} bytes) but it holds {held} bytes"
                )
            f.seek(0)
            return np.load(f, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        if Path(path).suffix.lower() not in ("", ".npy") and Path(path).is_file():
            raise UsageError(f"{label} {path}: not a .npy file; images are read from PNG and TIFF") from None
        raise UsageError(f"{label} {path} is not a readable .npy file: {exc}") from None


def load_filter(path: str) -> np.ndarray:
    """A 2-D filter of real numbers from a .npy file, or a named one (`gaussian:17`,
    `sobel-x`: autotune/filters.py), as float32. A file is checked as `convolve()` checks
    a filter (as_image), so a value past float32's range is refused rather than made inf,
    and NaN and infinities are kept, as the API keeps them."""
    from autotune.call_arguments import as_image
    from autotune.filters import is_named, named_filter

    if is_named(path) or (not path.lower().endswith(".npy") and not Path(path).exists()):
        return named_filter(path)  # a name, or neither a name nor a file: the names are listed
    taps = load_npy("--filter", path)
    if taps.ndim != 2 or 0 in taps.shape or taps.dtype.kind not in "fiu":
        raise UsageError(f"--filter {path} must hold a 2-D array of numbers, got {taps.dtype} {taps.shape}")
    try:
        return as_image(f"--filter {path}", taps)
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
