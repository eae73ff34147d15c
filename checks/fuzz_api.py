#!/usr/bin/env python3
"""Random calls of the public API (`autotune.convolve`, `autotune.Convolver`,
`autotune.plan`), made as a user makes them, each compared with `scipy.ndimage.correlate`
/ `convolve` (every border) and `cv2.filter2D` (where OpenCV has the case) after the same
rounding; `checks/fuzz_kernels.py` checks kernel configs against the project's own
reference instead.

    python checks/fuzz_api.py --seeds 0-399 [--device 0] [--db URL] [--json OUT]

Each seed draws a pixel type and output type, channels (or a 2-D image), a batch or one
image, sizes (1, 2, primes, smaller than the filter), a filter (1x1, even, rectangular,
larger than the image; random or integer taps), 'valid' or 'same' output, a border and
its value, an anchor, flip, the algorithm, now and then NaN and infinite pixels in float
types, an input that is not contiguous (a slice, a transpose, negative strides) or
big-endian, and a Convolver built once and called on several images. `plan()` for the
same call must name the kernel `convolve` ran, and refuse what it refuses, with its
message.

Each result is compared with the documented sum of products (every tap times the pixel
under it, the image extended past its edge as numpy.pad extends it: cv2.filter2D's formula)
after the same rounding, and so are SciPy's and OpenCV's results: where one of those differs
from it, a note says so (scipy.ndimage and cv2's direct path leave zero taps out of their
sums, so a NaN or infinity under a zero tap is not NaN there, and scipy.ndimage NaN taps
too; cv2's DFT path, for filters of about 11x11 and more, spreads NaN further;
scipy.ndimage.correlate's N-D 'reflect' is not numpy.pad's, cv2's or its own 1-D filters'
where the filter reaches four image sizes or more before the first row or column), and a
wrong result names whichever of them it equals.

Prints one line per defect (a wrong result, an exception that is not one clear refusal,
a refusal of a documented case or a call that runs where the docs say it is refused, a plan
that is not what ran) with the seed that reproduces it (`--seeds N-N`), and one line per
note; then counts. Exits 1 on any defect. Not part of the test suite (a few hundred draws
take minutes on PoCL). Without `--db` the calls use an empty database (the untuned kernels);
`--random-bests N` makes a database of N kinds of either family instead (drawn as
`checks/fuzz_export.py` draws them, each with a random valid config as its best, seeded by
`--bests-seed`), so most calls borrow a related kind's kernel, made fit for the call, as a
tuned database serves them; a defect then reproduces with the same `--random-bests` and
`--bests-seed` beside its seed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import scipy.ndimage as ndi

import autotune
from autotune.families.image import NUMPY_PAD_MODES
from autotune.plans import cached_choices

FLOAT32_EPS = 2.0**-24
DTYPES = ("uint8", "uint16", "int16", "float16", "float32", "float64")
HOST_CONVERTED = ("int8", "int32", "uint32")  # converted to float32 on the host
SIZES = (1, 2, 3, 5, 7, 11, 13, 16, 17, 31, 64, 97, 130, 257, 300)
SMALL_SIZES = (1, 2, 3, 4, 5, 7)
SIDES = (1, 1, 2, 3, 3, 4, 5, 5, 6, 7, 8, 9, 11, 16, 17, 25)
BORDERS = {  # as a caller names it -> the border it means
    "constant": "constant",
    "replicate": "replicate",
    "nearest": "replicate",
    "reflect": "reflect",
    "mirror": "mirror",
    "reflect_101": "mirror",
    "wrap": "wrap",
    cv2.BORDER_CONSTANT: "constant",
    cv2.BORDER_REPLICATE: "replicate",
    cv2.BORDER_REFLECT: "reflect",
    cv2.BORDER_REFLECT_101: "mirror",
    cv2.BORDER_WRAP: "wrap",
}
SCIPY_MODES = {
    "constant": "constant",
    "replicate": "nearest",
    "reflect": "reflect",
    "mirror": "mirror",
    "wrap": "wrap",
}
CV2_BORDERS = {
    "constant": cv2.BORDER_CONSTANT,
    "replicate": cv2.BORDER_REPLICATE,
    "reflect": cv2.BORDER_REFLECT,
    "mirror": cv2.BORDER_REFLECT_101,
}  # cv2.filter2D has no BORDER_WRAP
CV2_TYPES = ("uint8", "uint16", "int16", "float32", "float64")  # pixel types cv2.filter2D filters
MAX_WORK = 30_000_000  # multiply-adds of one draw's reference (a few seconds of SciPy at most)


def seeds(text: str) -> range:
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


@dataclasses.dataclass
class Draw:
    """One call as a user makes it, and what the docs say of it."""

    seed: int
    dtype: str
    out_dtype: Any  # as passed
    result_dtype: str  # what comes back
    shape: tuple[int, ...]
    batch: bool
    channels: int | None  # None: a 2-D image (or batch of them)
    taps: np.ndarray  # the filter as passed (its own dtype)
    filter_form: str  # how it is passed: array, float64, int, list
    mode: str
    border: Any
    border_value: Any
    anchor: tuple[int, int] | None
    flip: bool
    algorithm: str
    layout: str  # contiguous, slice, transpose, negative, big-endian
    specials: bool  # NaN and infinities among the pixels
    convolver: bool
    zero_copy: bool
    chunks: int
    refusal: tuple[str, ...]  # parts of the messages of documented refusals, empty where it runs
    specialise: bool = False
    device_arrays: bool = False  # the Convolver also called with pyopencl arrays
    misuse: str | None = None  # an argument the docs say is refused
    refused_with: str = ""  # the message of the refusal
    level: str = ""  # how the kernel that ran was found (lookup.Choice.level)

    def text(self) -> str:
        fields = {
            "dtype": self.dtype,
            "out_dtype": str(self.out_dtype),
            "shape": list(self.shape),
            "batch": self.batch,
            "filter": list(self.taps.shape),
            "filter_form": self.filter_form,
            "mode": self.mode,
            "border": self.border,
            "border_value": repr(self.border_value),
            "anchor": self.anchor,
            "flip": self.flip,
            "algorithm": self.algorithm,
            "layout": self.layout,
            "specials": self.specials,
        }
        if self.specialise:
            fields["specialise"] = True
        if self.misuse:
            fields["misuse"] = self.misuse
        if self.convolver:
            fields |= {"convolver": True, "zero_copy": self.zero_copy, "chunks": self.chunks}
            fields["device_arrays"] = self.device_arrays
        return json.dumps(fields)


def draw_taps(
    rng: random.Random,
    nprng: np.random.Generator,
    shape: tuple[int, int],
    integer_out: bool,
    kind: str | None,
) -> np.ndarray:
    """Random taps (summing to 1 for integer output, so most outputs are in range),
    integer taps (exact sums: saturation and exact ties), or a low-rank filter (the
    separable form takes it)."""
    kind = kind or rng.choice(["random", "random", "integer", "rank"])
    if kind == "integer":
        return nprng.integers(-3, 4, shape).astype(np.float32)
    if kind == "rank":
        terms = rng.choice([1, 1, 2])
        taps = sum(
            np.outer(nprng.uniform(-1, 1, shape[0]), nprng.uniform(0.1, 1, shape[1])) for _ in range(terms)
        )
    else:
        taps = nprng.uniform(-0.25, 1, shape)
    if integer_out and abs(taps.sum()) > 1e-3:
        taps /= taps.sum()
    return taps.astype(np.float32)


def draw(seed: int) -> Draw:
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    algorithm = rng.choice(["auto"] * 8 + ["direct", "separable"])
    separable = algorithm == "separable" and rng.random() < 0.7  # a call the separable form takes
    dtype = rng.choice(DTYPES) if rng.random() > 0.05 else rng.choice(HOST_CONVERTED)
    same_out = rng.random() < 0.5
    if same_out:
        out_dtype: Any = rng.choice(["same", -1, np.dtype(dtype), dtype])
    else:
        out_dtype = rng.choice(["float32", np.float32, np.dtype("float32")])
    result_dtype = dtype if same_out else "float32"
    channels = None if separable else rng.choice([None, None, None, 1, 2, 3, 4])
    batch = not separable and rng.random() < 0.2
    rows, width = rng.choice(SIDES), rng.choice(SIDES)
    if separable or rng.random() < 0.3:
        rows = width  # square
    small = rng.random() < 0.2
    height = rng.choice(SMALL_SIZES if small else SIZES)
    image_width = rng.choice(SMALL_SIZES if rng.random() < 0.2 else SIZES)
    frames = rng.choice([1, 2, 3]) if batch else 1
    shape = (height, image_width) + ((channels,) if channels is not None else ())
    if batch:
        shape = (frames, *shape)
    work = frames * height * image_width * (channels or 1) * rows * width
    while work > MAX_WORK:  # keep each draw quick
        height, image_width = max(1, height // 2), max(1, image_width // 2)
        shape = (*((frames,) if batch else ()), height, image_width) + ((channels,) if channels else ())
        work = frames * height * image_width * (channels or 1) * rows * width
    integer_out = result_dtype in ("uint8", "uint16", "int16", *HOST_CONVERTED)
    taps = draw_taps(rng, nprng, (rows, width), integer_out, "rank" if separable else None)
    filter_form = rng.choice(["array", "array", "array", "float64", "list"])
    if filter_form == "float64":
        taps = taps.astype(np.float64)
    if np.all(taps == np.rint(taps)) and rng.random() < 0.5:
        filter_form, taps = "int", taps.astype(np.int32)
    mode = rng.choice(["valid", "same", "same"])
    border: Any = rng.choice(list(BORDERS))
    border_value: Any = 0.0
    if BORDERS[border] == "constant":
        border_value = rng.choice([0, 0.0, 7, -2.5, np.float32(3.25), 100])
    anchor = None
    if mode == "same" and rng.random() < 0.35:
        anchor = (rng.choice([-1, rng.randrange(width)]), rng.choice([-1, rng.randrange(rows)]))
        if separable:
            anchor = (anchor[0], anchor[0])
    flip = rng.random() < 0.3
    layout = "contiguous"
    if rng.random() < 0.25:
        layout = rng.choice(["slice", "transpose", "negative", "big-endian"])
    specials = dtype.startswith("float") and rng.random() < 0.15
    convolver = rng.random() < 0.3
    zero_copy = rng.random() < 0.7
    chunks = rng.choice([1, 1, 2, 3]) if convolver and not zero_copy else 1
    draw = Draw(
        seed, dtype, out_dtype, result_dtype, shape, batch, channels, taps, filter_form, mode, border,
        border_value, anchor, flip, algorithm, layout, specials, convolver, zero_copy, chunks, (),
    )  # fmt: skip
    draw.specialise = rng.random() < 0.05
    draw.device_arrays = convolver and rng.random() < 0.5
    if dtype.startswith("float") and BORDERS[border] == "constant" and rng.random() < 0.1:
        draw.border_value = rng.choice([np.nan, np.inf, -np.inf])
    if rng.random() < 0.03:  # NaN and infinite taps are taken as they are
        draw.taps = draw.taps.astype(np.float32)
        draw.taps.flat[rng.randrange(draw.taps.size)] = rng.choice([np.nan, np.inf, -np.inf])
        draw.filter_form = "array"
    if rng.random() < 0.06:
        misuse(draw, rng.choice(MISUSES), rng)
    draw.refusal = documented_refusal(draw)
    return draw


MISUSES = (
    "out_dtype",
    "anchor outside",
    "anchor valid",
    "4-D",
    "5 channels",
    "border",
    "huge",
    "wide",
    "flag",
)


def misuse(d: Draw, kind: str, rng: random.Random) -> None:
    """An argument the docs say is refused, in place of the draw's own."""
    d.misuse = kind
    rows, width = d.taps.shape
    if kind == "out_dtype":
        d.out_dtype = np.int16 if d.dtype == "float64" else np.float64
    elif kind == "anchor outside":
        d.mode, d.anchor = "same", rng.choice([(width, 0), (0, rows), (-2, 0)])
    elif kind == "anchor valid":
        d.mode, d.anchor = "valid", (0, 0)
    elif kind in ("4-D", "5 channels"):
        height, image_width = d.shape[1:3] if d.batch else d.shape[:2]
        d.batch, d.channels = False, 3 if kind == "4-D" else 5
        d.shape = (2, height, image_width, 3) if kind == "4-D" else (height, image_width, 5)
    elif kind == "border":
        d.mode, d.border = "same", cv2.BORDER_REFLECT | cv2.BORDER_ISOLATED
    elif kind == "huge":
        d.dtype = d.result_dtype = "float64"
        d.out_dtype = "float32"
    elif kind == "wide":
        d.taps, d.filter_form = np.ones((1, 256), np.float32), "array"
    elif kind == "flag":
        d.flip = "no"


def documented_refusal(d: Draw) -> tuple[str, ...]:
    """Parts of the messages the docs promise for a call they say is refused (any one
    of them where several apply); empty for a call that runs."""
    misused = {
        "out_dtype": "out_dtype must be 'float32' or 'same'",
        "anchor outside": "lies outside the",
        "anchor valid": "'valid' output has none",
        "4-D": "pass batch=True",
        "5 channels": "with C from 1 to 4 channels",
        "border": "border must be one of",
        "huge": "beyond float32's range",
        "wide": "each side must be from 1 to 255 taps",
        "flag": "flip must be True or False",
    }
    reasons = [misused[d.misuse]] if d.misuse else []
    rows, width = d.taps.shape
    height, image_width = d.shape[1:3] if d.batch else d.shape[:2]
    frames = d.shape[0] if d.batch else 1
    if d.mode == "valid" and (height < rows or image_width < width):
        reasons.append("smaller than the")
    if d.algorithm == "separable":
        if (d.channels or 1) > 1 or frames > 1 or rows != width:
            reasons.append("the separable form filters one channel of one image with a square filter")
        taps = np.asarray(d.taps, np.float64)
        singular = np.linalg.svd(taps, compute_uv=False) if np.isfinite(taps).all() else None
        if singular is None or np.sum(singular > singular[0] * 1e-4) > 8:
            reasons.append("the filter is not separable")
        if d.mode == "same" and d.misuse is None:
            before = same_before((rows, width), d.flip, d.anchor)
            if before[0] != before[1]:
                reasons.append("anchors its filter at one tap in x and y")
    return tuple(reasons)


def same_before(shape: tuple[int, int], flip: bool, anchor: tuple[int, int] | None) -> tuple[int, int]:
    """The rows and columns of border before the image in 'same' output: the taps of the
    correlated (flipped, with `flip`) filter over each output. An anchor names a tap of the
    filter as given, as cv2's does (flipping a kernel flips its anchor, cv2's docs say);
    the default is SciPy's (correlate: tap F // 2; convolve: F // 2 of the filter given)."""
    before = []
    for side, chosen in zip(shape, (anchor[1], anchor[0]) if anchor else (-1, -1), strict=True):
        tap = side // 2 if chosen == -1 else chosen
        before.append(side - 1 - tap if flip else tap)
    return before[0], before[1]


def pixels(d: Draw, nprng: np.random.Generator, scale: float) -> np.ndarray:
    """An image of the draw's type and shape, its values spanning an integer type or in
    [-scale, scale) for floats, with NaN and infinities where the draw has them."""
    kind = np.dtype(d.dtype)
    if kind.kind in "iu":
        info = np.iinfo(kind)
        low, high = (info.min, info.max) if kind.itemsize <= 2 else (-(2**28), 2**28)
        return nprng.integers(max(low, info.min), high, d.shape, endpoint=True).astype(kind)
    image = nprng.uniform(-scale, scale, d.shape)
    if kind != np.float64:
        image = image.astype(np.float32)
    image = image.astype(kind)
    if d.specials:
        spots = nprng.integers(0, image.size, max(1, image.size // 50))
        image.flat[spots] = nprng.choice(np.array([np.nan, np.inf, -np.inf], kind), spots.size)
    if d.misuse == "huge":
        image.flat[image.size // 2] = 1e300  # finite, past float32's range
    return image


def laid_out(image: np.ndarray, layout: str, batch: bool) -> np.ndarray:
    """The same values in a layout a caller may have: a strided slice, rows and columns
    transposed in memory, negative strides, big-endian bytes."""
    if layout == "slice":
        bigger = np.zeros(tuple(n * 2 + 1 for n in image.shape), image.dtype)
        view = bigger[tuple(slice(1, None, 2) for _ in image.shape)]
        view[...] = image
        return view
    if layout == "transpose":
        rows, columns = (1, 2) if batch else (0, 1)
        return np.swapaxes(np.ascontiguousarray(np.swapaxes(image, rows, columns)), rows, columns)
    if layout == "negative":
        return np.ascontiguousarray(image[::-1, ::-1])[::-1, ::-1]
    if layout == "big-endian" and image.dtype.itemsize > 1:
        return image.astype(image.dtype.newbyteorder(">"))
    return image


def planes(image: np.ndarray, batch: bool) -> np.ndarray:
    """(frames, channels, H, W) float64 view of an image as the draw lays it out."""
    array = np.asarray(image, np.float64)
    if not batch:
        array = array[None]
    if array.ndim == 3:
        array = array[..., None]
    return np.moveaxis(array, 3, 1)


def exact_sum(d: Draw, image: np.ndarray) -> np.ndarray:
    """The documented result in float64, in the output's layout: each output the sum of
    products of every tap with the pixel under it (cv2.filter2D's formula), the image
    extended past its edge by numpy.pad (the docs' names: reflect is numpy's symmetric,
    mirror its reflect). IEEE arithmetic throughout: a NaN or infinity under a zero tap
    makes the output NaN (0 x inf is NaN)."""
    taps = np.asarray(d.taps, np.float64)
    kernel = taps[::-1, ::-1] if d.flip else taps
    rows, width = kernel.shape
    stacked = planes(image, d.batch)  # (frames, channels, H, W)
    if d.mode == "same":
        top, left = same_before((rows, width), d.flip, d.anchor)
        pads = ((0, 0), (0, 0), (top, rows - 1 - top), (left, width - 1 - left))
        border = BORDERS[d.border]
        if border == "constant":
            stacked = np.pad(stacked, pads, constant_values=float(d.border_value))
        else:
            stacked = np.pad(stacked, pads, mode=NUMPY_PAD_MODES[border])
    out_h, out_w = stacked.shape[2] - rows + 1, stacked.shape[3] - width + 1
    total = np.zeros((*stacked.shape[:2], out_h, out_w))
    with np.errstate(invalid="ignore", over="ignore"):
        for (a, b), tap in np.ndenumerate(kernel):
            total += tap * stacked[:, :, a : a + out_h, b : b + out_w]
    return shaped(np.moveaxis(total, 1, 3), d)


def scipy_result(d: Draw, image: np.ndarray) -> np.ndarray:
    """scipy.ndimage.correlate's result (convolve's with `flip`) in float64, in the
    output's layout: 'same' with SciPy's border and origin (the tap F // 2 + origin),
    'valid' as the 'constant' result with tap (0, 0) over each output, cropped."""
    taps = np.asarray(d.taps, np.float64)
    rows, width = taps.shape
    out = []
    for frame in planes(image, d.batch):
        results = []
        for plane in frame:
            if d.mode == "valid":
                kernel = taps[::-1, ::-1] if d.flip else taps
                full = ndi.correlate(plane, kernel, mode="constant", origin=(-(rows // 2), -(width // 2)))
                results.append(full[: plane.shape[0] - rows + 1, : plane.shape[1] - width + 1])
                continue
            origin = [0 if a == -1 else a - n // 2 for a, n in zip(anchor_yx(d), (rows, width), strict=True)]
            function = ndi.convolve if d.flip else ndi.correlate
            mode = SCIPY_MODES[BORDERS[d.border]]
            results.append(function(plane, taps, mode=mode, cval=float(d.border_value), origin=origin))
        out.append(np.stack(results, axis=-1))
    return shaped(np.stack(out), d)


def anchor_yx(d: Draw) -> tuple[int, int]:
    return (-1, -1) if d.anchor is None else (d.anchor[1], d.anchor[0])


def shaped(stacked: np.ndarray, d: Draw) -> np.ndarray:
    """(frames, H, W, channels) as the draw's output is laid out."""
    if d.channels is None:
        stacked = stacked[..., 0]
    return stacked if d.batch else stacked[0]


def cv2_result(d: Draw, image: np.ndarray) -> np.ndarray | None:
    """cv2.filter2D's result where OpenCV has the case (its depths, no wrap, a constant
    border of 0), else None."""
    border = BORDERS[d.border]
    if d.dtype not in CV2_TYPES or (d.mode == "same" and border not in CV2_BORDERS):
        return None
    if d.mode == "same" and border == "constant" and float(d.border_value) != 0.0:
        return None  # filter2D's constant border is 0
    depth = -1 if d.result_dtype == d.dtype else cv2.CV_32F
    if d.dtype == "float64":
        depth = cv2.CV_64F  # filter2D writes float64 images as float64 only
    taps = np.asarray(d.taps, np.float64 if d.taps.dtype == np.float64 else np.float32)
    rows, width = taps.shape
    kernel = np.ascontiguousarray(taps[::-1, ::-1]) if d.flip else taps
    if d.mode == "valid":
        anchor, border_type = (0, 0), cv2.BORDER_CONSTANT
    else:
        before = same_before((rows, width), d.flip, d.anchor)
        anchor, border_type = (before[1], before[0]), CV2_BORDERS[border]
    values = np.ascontiguousarray(image.astype(image.dtype.newbyteorder("=")))
    frames = values if d.batch else values[None]
    out = []
    for frame in frames:
        result = cv2.filter2D(frame, depth, kernel, anchor=anchor, borderType=border_type)
        if d.mode == "valid":
            result = result[: frame.shape[0] - rows + 1, : frame.shape[1] - width + 1]
        out.append(result.reshape(result.shape[:2] + frame.shape[2:]))
    return np.stack(out) if d.batch else out[0]


def tolerance(d: Draw, image: np.ndarray) -> float:
    """The float32 rounding of a sum of the filter's products (README: (rows * F + 2) *
    2**-24 * sum|filter| * max|pixel|, the border's value a pixel too); the separable form
    adds its terms' own rounding."""
    values = np.asarray(image, np.float64)
    finite = values[np.isfinite(values)]
    border_value = abs(float(d.border_value)) if np.isfinite(float(d.border_value)) else 0.0
    largest = max(float(np.abs(finite).max(initial=0.0)), border_value)
    taps = np.asarray(d.taps, np.float64)
    taps = taps[np.isfinite(taps)]  # NaN and infinite taps give non-finite outputs, compared as such
    error = (taps.size + 2) * FLOAT32_EPS * float(np.abs(taps).sum()) * largest + 1e-30
    return error * 4 if d.algorithm == "separable" else error


def disagreement(got: np.ndarray, exact: np.ndarray, error: float, result_dtype: Any) -> str | None:
    """Why `got` (of the result type) is not `exact` after the same rounding, or None:
    integers the nearest to the exact sum (either neighbour where it lies within `error`
    of a half), saturated; floats within `error` (float16 within its own rounding too),
    NaN and infinities where the exact result has them."""
    kind = np.dtype(result_dtype)
    if got.dtype != kind:
        return f"dtype {got.dtype}, expected {kind}"
    if got.shape != exact.shape:
        return f"shape {got.shape}, expected {exact.shape}"
    values = got.astype(np.float64)
    kind = kind.newbyteorder("=")
    if kind.kind in "iu":
        info = np.iinfo(kind)
        exact = np.nan_to_num(exact, nan=0.0)  # NaN gives 0
        low = np.clip(np.rint(exact - error), info.min, info.max)
        high = np.clip(np.rint(exact + error), info.min, info.max)
        bad = (values < low) | (values > high)
    else:
        finite = np.isfinite(exact)
        with np.errstate(invalid="ignore"):
            same_special = (np.isnan(exact) & np.isnan(values)) | (~finite & (values == exact))
            limit = error + (np.abs(exact) * 2.0**-11 + 2.0**-24 if kind == np.float16 else 0.0)
            near = np.abs(values - exact) <= limit
            if kind == np.float16:  # past 65504 a float16 output is +-inf
                largest = float(np.finfo(np.float16).max)
                overflow = np.isinf(values) & (np.sign(values) == np.sign(exact))
                near |= overflow & (np.abs(exact) >= 65520 - limit)
                near |= (np.abs(values) == largest) & (np.abs(exact) <= 65520 + limit)
        bad = np.where(finite, ~near, ~same_special)
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (
        f"{int(bad.sum())} of {bad.size} outputs wrong, first at {where}: "
        f"got {got[where]!r}, exact {exact[where]!r} (tolerance {error:.3g})"
    )


def call_options(d: Draw, device: int, db: str) -> dict[str, Any]:
    options: dict[str, Any] = {"device": device, "db": db, "mode": d.mode, "border": d.border}
    options |= {"border_value": d.border_value, "out_dtype": d.out_dtype, "flip": d.flip}
    options |= {"algorithm": d.algorithm, "batch": d.batch, "anchor": d.anchor, "specialise": d.specialise}
    return options


def filter_argument(d: Draw) -> Any:
    return d.taps.tolist() if d.filter_form == "list" else d.taps


def one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


class Outcome(Exception):
    """A defect found by a draw: its category and what was seen."""

    def __init__(self, category: str, detail: str) -> None:
        super().__init__(detail)
        self.category = category


def check_result(d: Draw, got: np.ndarray, image: np.ndarray, what: str, notes: list[str]) -> None:
    """`got` against the documented sum after the same rounding; scipy.ndimage's and
    cv2.filter2D's results (where OpenCV has the case) against it too: where one of them
    differs, a note, and the defect names the one `got` equals."""
    exact = exact_sum(d, image)
    error = tolerance(d, image)
    # Output of the image's type comes in its byte order (a big-endian image's: big-endian).
    expected = image.dtype if d.result_dtype == d.dtype else np.dtype(d.result_dtype)
    wrong = disagreement(got, exact, error, expected)
    equal_to = []
    for name, theirs in (("scipy.ndimage", scipy_result(d, image)), ("cv2.filter2D", cv2_result(d, image))):
        if theirs is None:
            continue
        rounded = rounded_as(theirs, d.result_dtype)
        differs = disagreement(rounded, exact, error, d.result_dtype)
        if differs:
            notes.append(f"{name} differs from the documented sum: {differs}")
        if wrong and not disagreement(got, rounded.astype(np.float64), error * 2, expected):
            equal_to.append(name)
    if wrong:
        also = f" (equal to {' and '.join(equal_to)})" if equal_to else ""
        raise Outcome("wrong result" + also, f"{what}: {wrong}")


def rounded_as(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 results as an output of `dtype` holds them: integers rounded to nearest
    even and saturated (NaN: 0), floats cast."""
    kind = np.dtype(dtype)
    if kind.kind in "iu":
        info = np.iinfo(kind)
        return np.clip(np.nan_to_num(np.rint(values), nan=0.0), info.min, info.max).astype(kind)
    with np.errstate(over="ignore"):  # past float16's range: inf, as the docs say
        return values.astype(kind)


def what_ran() -> Any:
    """The choice of the plan the last call used (the plan cache's most recent)."""
    return cached_choices()[-1]


def same_choice(planned: Any, ran: Any) -> str | None:
    if planned.problem != ran.problem:
        return f"plan() names {planned.problem}, convolve ran {ran.problem}"
    if planned.config != ran.config:
        return f"plan() names config {planned.config}, convolve ran {ran.config}"
    return None


def refusal_of(call: Any) -> BaseException | None:
    try:
        call()
    except (ValueError, TypeError) as error:
        return error
    return None


def run_draw(d: Draw, device: int, db: str, notes: list[str]) -> str:
    """'ran' or 'refused'; raises Outcome for a defect."""
    nprng = np.random.default_rng(d.seed + 10_000)
    scale = 1.0 if d.dtype != "float16" or nprng.random() < 0.8 else 3000.0
    image = laid_out(pixels(d, nprng, scale), d.layout, d.batch)
    options = call_options(d, device, db)
    filt = filter_argument(d)
    planned = {name: value for name, value in options.items() if name != "border_value"}
    planned |= {"dtype": image.dtype, "filter": filt}
    filter_size: Any = d.taps.shape
    if d.taps.shape[0] == d.taps.shape[1] and d.seed % 2:
        filter_size = d.taps.shape[0]
    try:
        got = autotune.convolve(image, filt, **options)
    except (ValueError, TypeError) as error:
        message = str(error)
        if not any(part in message for part in d.refusal):
            raise Outcome("refused a documented case", one_line(error)) from None
        if "\n" in message:
            raise Outcome("refusal of more than one line", one_line(error)) from None
        d.refused_with = message
        check_refusals(d, image, filt, filter_size, options, planned, message)
        return "refused"
    except Exception as error:  # noqa: BLE001 - anything else is a defect
        raise Outcome("exception", f"convolve: {one_line(error)} @ {origin_of(error)}") from None
    if d.refusal:
        raise Outcome("ran what the docs refuse", f"expected a refusal naming {d.refusal!r}")
    ran = what_ran()
    d.level = ran.level
    check_result(d, got, image, "convolve", notes)
    try:
        chosen = autotune.plan(d.shape, filter_size, **planned)
    except Exception as error:  # noqa: BLE001
        raise Outcome("plan() refuses what convolve ran", one_line(error)) from None
    differs = same_choice(chosen, ran)
    if differs:
        raise Outcome("plan() is not what convolve ran", differs)
    if d.convolver:
        run_convolver(d, image, options, filt, chosen, nprng, scale, notes)
    return "ran"


def origin_of(error: BaseException) -> str:
    """Where an exception was raised: its innermost frame."""
    frame = traceback.extract_tb(error.__traceback__)[-1]
    return f"{frame.filename.split('/autotune/')[-1]}:{frame.lineno} {frame.name}"


def check_refusals(
    d: Draw,
    image: np.ndarray,
    filt: Any,
    filter_size: Any,
    options: dict[str, Any],
    planned: dict[str, Any],
    message: str,
) -> None:
    """plan() and a Convolver refuse what convolve() refused, with its message (an image's
    values are refused by the Convolver's call, and plan() never sees them)."""
    if d.misuse != "huge":
        planning = refusal_of(lambda: autotune.plan(d.shape, filter_size, **planned))
        if planning is None or message not in str(planning):
            raise Outcome("plan() does not refuse as convolve() does", repr(planning))

    def build_and_call() -> None:
        autotune.Convolver(d.shape, filt, dtype=image.dtype, **options)(image)

    built = refusal_of(build_and_call)
    if built is None or message not in str(built):
        raise Outcome("Convolver does not refuse as convolve() does", repr(built))


def run_convolver(
    d: Draw,
    image: np.ndarray,
    options: dict[str, Any],
    filt: Any,
    chosen: Any,
    nprng: np.random.Generator,
    scale: float,
    notes: list[str],
) -> None:
    """A Convolver built once and called on the draw's image and two more (from NumPy,
    and where the draw says from pyopencl arrays too)."""
    height = d.shape[1] if d.batch else d.shape[0]
    rows = d.taps.shape[0]
    out_rows = height if d.mode == "same" else height - rows + 1
    refused = None
    if d.chunks > 1 and (d.batch or BORDERS[d.border] == "wrap" and d.mode == "same"):
        refused = "chunks"
    elif d.chunks > max(1, out_rows // rows):
        refused = "chunks must be from 1 to"
    try:
        convolver = autotune.Convolver(
            d.shape, filt, dtype=image.dtype, zero_copy=d.zero_copy, chunks=d.chunks, **options
        )
    except (ValueError, TypeError) as error:
        if refused and refused in str(error):
            return
        raise Outcome("Convolver refuses what convolve ran", one_line(error)) from None
    except Exception as error:  # noqa: BLE001
        raise Outcome("Convolver exception", f"{one_line(error)} @ {origin_of(error)}") from None
    if refused:
        raise Outcome("Convolver ran what the docs refuse", f"expected a refusal naming {refused!r}")
    differs = same_choice(chosen, convolver.plan)
    if differs:
        raise Outcome("Convolver's plan is not plan()'s", differs)
    for call in range(3):
        current = image if call == 0 else laid_out(pixels(d, nprng, scale), d.layout, d.batch)
        result_dtype = current.dtype if d.result_dtype == d.dtype else np.dtype(d.result_dtype)
        out = None
        if call == 1:  # a result array of the caller's
            out = np.empty(convolver.output_shape, result_dtype)
        elif call == 2 and current.shape == convolver.output_shape and current.dtype == result_dtype:
            out = current  # in place: the docs promise the answer of a fresh array
        pixels_before = current.copy()
        try:
            got = convolver(current, out=out)
        except Exception as error:  # noqa: BLE001
            raise Outcome(
                "Convolver call exception", f"call {call}: {one_line(error)} @ {origin_of(error)}"
            ) from None
        if out is not None and got is not out:
            raise Outcome("Convolver call", f"call {call}: the result is not the array given as out=")
        what = f"Convolver call {call}" + (
            " in place" if out is current else " with out=" if out is not None else ""
        )
        current = pixels_before
        check_result(d, got, current, what, notes)
        native = np.dtype(d.result_dtype)
        if (
            d.device_arrays
            and convolver.dtype == current.dtype.newbyteorder("=")
            and convolver.output_dtype == native
        ):
            import pyopencl.array as cl_array

            array = cl_array.to_device(convolver.queue, np.ascontiguousarray(current, convolver.dtype))
            try:
                got = convolver(array).get()
            except Exception as error:  # noqa: BLE001
                raise Outcome(
                    "Convolver device call exception", f"{one_line(error)} @ {origin_of(error)}"
                ) from None
            check_result(
                d, got, current.astype(current.dtype.newbyteorder("=")), f"device call {call}", notes
            )


def random_bests(url: str, count: int, seed: int, device_index: int) -> Counter[str]:
    """A database of `count` kinds of either family, each with a random valid config as its
    best on this device (and a literal best's argument-reading twin measured slower), at
    small sizes: what a user's tuned database holds, without measuring."""
    from fuzz_export import FAMILIES, Tuned, store_best
    from fuzz_kernels import draw_config, draw_problem

    from autotune.devices import device_info
    from autotune.families import get_family

    device = device_info(device_index)
    rng = random.Random(seed)
    made: Counter[str] = Counter()
    for _ in range(count):
        family = get_family(rng.choice(FAMILIES))
        problem = draw_problem(family, rng)
        if problem.key().get("dtype") == "float64" and not device.double_precision:
            continue
        config = draw_config(family, problem, device, rng)
        if config is None:
            continue
        configs = [family.space.complete(config)]
        if not family.serves_any_data(configs[0]):
            configs.append(family.any_data_twin(configs[0], problem, device))
        store_best(url, family, device, [Tuned(problem, configs)])
        made[family.name] += 1
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-99")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--db", default="sqlite://", help="database URL (default: an empty one)")
    parser.add_argument("--random-bests", type=int, default=0, help="make a database of this many kinds")
    parser.add_argument("--bests-seed", type=int, default=0, help="seed of --random-bests")
    parser.add_argument("--json", help="write every draw's call and outcome here")
    args = parser.parse_args()
    if args.random_bests > 0 and args.db != "sqlite://":
        parser.error("give --db or --random-bests, not both")
    with tempfile.TemporaryDirectory(prefix="fuzz_api_") as folder:
        if args.random_bests > 0:
            args.db = f"sqlite:///{Path(folder) / 'random_bests.db'}"
            made = random_bests(args.db, args.random_bests, args.bests_seed, args.device)
            print(f"random bests (--bests-seed {args.bests_seed}): {dict(made)}", flush=True)
        return fuzz(args)


def fuzz(args: argparse.Namespace) -> int:
    """Every seed's draw against `args.db`; 1 on any defect."""
    counts: Counter[str] = Counter()
    records = []
    for seed in seeds(args.seeds):
        d = draw(seed)
        notes: list[str] = []
        try:
            outcome = run_draw(d, args.device, args.db, notes)
            detail = ""
        except Outcome as defect:
            outcome, detail = defect.category, str(defect)
            print(f"seed {seed}: {outcome}: {d.text()} :: {detail[:400]}", flush=True)
        except Exception as error:  # noqa: BLE001 - a fault of this check: said, and the next seed runs
            outcome, detail = "check failed", f"{one_line(error)} @ {origin_of(error)}"
            print(f"seed {seed}: {outcome}: {d.text()} :: {detail[:400]}", flush=True)
        counts[outcome] += 1
        if d.level:
            counts[f"kernel: {d.level}"] += 1
        for note in notes:
            counts["note: " + note.split(" differs")[0] + " differs"] += 1
            print(f"seed {seed}: note: {d.text()} :: {note[:400]}", flush=True)
        detail = detail or d.refused_with
        call = json.loads(d.text())
        records.append({"seed": seed, "call": call, "outcome": outcome, "detail": detail, "kernel": d.level})
    print("counts:", dict(counts))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    defects = sum(
        n
        for name, n in counts.items()
        if name not in ("ran", "refused") and not name.startswith(("note", "kernel: "))
    )
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
