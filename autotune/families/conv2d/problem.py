"""The convolution problem: key, seeded data, the float64 reference and its tolerance.

Pixel types and borders are problem dimensions: a uint8 'same' problem with a mirror
border is tuned apart from a float32 'valid' one (other bytes move, edge tiles take
another path)."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from autotune.errors import UsageError
from autotune.families.base import Problem
from autotune.families.image import (
    FLOAT32_EPS,
    FilteredImage,
    check_pixels,
    drawn_once,
    pad_for_border,
    rounding_error,
    saturated,
)
from autotune.host_memory import copy_threads

MAX_CHANNELS = 4


@dataclass(frozen=True)
class Conv2DProblem(FilteredImage, Problem):
    """Correlation of an image of pixel type `dtype` with a float32 filter of
    `filter_rows` x `filter_width` taps (F x F unless `filter_height` says otherwise),
    into `out_dtype` pixels: 'valid' (border `none`: the input is the output grown by
    the filter less one) or 'same' with a border (input and output of one size, the
    filter anchored at its centre tap unless `anchor` / `anchor_y` say otherwise).
    `channels` interleaved per pixel; `frames` images of one size one after another (a
    batch, one launch: the kernel tuned for one frame serves it)."""

    family: ClassVar[str] = "conv2d"
    size_fields: ClassVar[tuple[str, ...]] = ("out_width", "out_height")
    optional_fields: ClassVar[tuple[str, ...]] = (
        "out_dtype",
        "border",
        "anchor",
        "channels",
        "frames",
        "filter_height",
        "anchor_y",
    )

    filter_width: int
    out_width: int
    out_height: int
    dtype: str = "float32"
    seed: int = 0
    out_dtype: str = "float32"
    border: str = "none"
    anchor: int = -1  # 'same' output: the column of taps over the output pixel; -1: F // 2 (cv2's default)
    channels: int = 1  # interleaved channels per pixel, each filtered alike
    frames: int = 1  # images of this size one after another, filtered in one launch
    filter_height: int = 0  # rows of taps; 0: as many as filter_width (a square filter)
    anchor_y: int = -1  # the row of taps over the output pixel; -1: as `anchor` says (centre for -1)

    def __post_init__(self) -> None:
        check_pixels(self.dtype, self.out_dtype, self.border)
        if type(self.channels) is not int or not 1 <= self.channels <= MAX_CHANNELS:
            raise UsageError(f"channels must be from 1 to {MAX_CHANNELS}, got {self.channels!r}")
        if type(self.frames) is not int or self.frames < 1:
            raise UsageError(f"frames must be a positive int, got {self.frames!r}")
        if type(self.filter_height) is not int or self.filter_height < 0:
            raise UsageError(f"filter_height must be a positive int (0: square), got {self.filter_height!r}")
        if self.filter_height == self.filter_width:  # a square filter has one name
            object.__setattr__(self, "filter_height", 0)
        for name, value, taps in (("anchor", self.anchor, self.filter_width), ("anchor_y", self.anchor_y, 0)):
            if value != -1 and not (self.same and value >= 0 and (not taps or value < taps)):
                raise UsageError(f"{name} must be -1 or a tap of the filter in 'same' output, got {value}")
        # One name per anchor: the centre is -1, and a row anchor that follows from
        # `anchor` is -1 too (so every problem has one key).
        column, row = self.anchor_column, self.anchor_row
        if not 0 <= row < self.filter_rows:
            raise UsageError(
                f"anchor_y must be a row of the {self.filter_rows}-row filter, got {row}"
                + ("" if self.anchor_y != -1 else f" (from anchor={self.anchor}: give anchor_y)")
            )
        object.__setattr__(self, "anchor", -1 if column == self.filter_width // 2 else column)
        object.__setattr__(self, "anchor_y", -1 if row == self._default_row() else row)

    def _default_row(self) -> int:
        return self.filter_rows // 2 if self.anchor == -1 else self.anchor

    @property
    def filter_rows(self) -> int:
        """Rows of taps (the filter's height)."""
        return self.filter_height or self.filter_width

    @property
    def filter_shape(self) -> tuple[int, int]:
        return (self.filter_rows, self.filter_width)

    @property
    def anchor_column(self) -> int:
        """The column of filter taps over the output pixel in 'same' output."""
        return self.filter_width // 2 if self.anchor == -1 else self.anchor

    @property
    def anchor_row(self) -> int:
        """The row of filter taps over the output pixel in 'same' output."""
        return self._default_row() if self.anchor_y == -1 else self.anchor_y

    @property
    def min_bytes(self) -> int:
        pixels_in, pixels_out = self.in_width * self.in_height, self.out_width * self.out_height
        values = np.dtype(self.dtype).itemsize * pixels_in + self.output_dtype.itemsize * pixels_out
        return values * self.channels * self.frames

    @property
    def flops(self) -> int:
        return (
            2
            * self.filter_rows
            * self.filter_width
            * self.out_width
            * self.out_height
            * self.channels
            * self.frames
        )

    @property
    def launch_extent(self) -> tuple[int, ...]:
        """Values of an output row, rows, and (for a batch) frames along launch dimension 2."""
        extent = (self.out_width * self.channels, self.out_height)
        return extent if self.frames == 1 else (*extent, self.frames)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self._shape(self.out_height, self.out_width)

    def _shape(self, height: int, width: int) -> tuple[int, ...]:
        """(H, W), (H, W, C), (N, H, W) or (N, H, W, C) of an image of this problem."""
        batch = (self.frames,) if self.frames > 1 else ()
        return (*batch, height, width) + ((self.channels,) if self.channels > 1 else ())

    @drawn_once
    def data(self) -> tuple[np.ndarray, np.ndarray]:
        """Seeded input image and filter. Float pixels and the filter are uniform in
        [-1, 1); integer pixels span their type, and for integer output the filter
        sums to 1 (most outputs in range, some saturating at either end)."""
        rng = np.random.default_rng(self.seed)
        image = seeded_image(rng, self.dtype, self._shape(self.in_height, self.in_width))
        filt = rng.uniform(-1, 1, self.filter_shape).astype(np.float32)
        if self.output_dtype.kind in "iu":
            filt = rng.uniform(-0.25, 1, filt.shape)
            filt = (filt / filt.sum()).astype(np.float32)
        return image, filt

    def inputs(self) -> dict[str, np.ndarray]:
        image, filt = self.data()
        return {"input": image, "filter": filt}

    def taps(self) -> np.ndarray:
        """The filter of `data()` alone (kernels compiled for one filter need it to render)."""
        return _seeded_taps(self)

    def reference(self) -> np.ndarray:
        image, filt = self.data()
        planes = image.reshape(self.frames, self.in_height, self.in_width, self.channels)
        outputs = np.empty((self.frames, self.out_height, self.out_width, self.channels))
        for frame in range(self.frames):
            for channel in range(self.channels):
                plane = planes[frame, :, :, channel].astype(np.float64)
                if self.same:
                    before = (self.anchor_row, self.anchor_column)
                    after = (
                        self.filter_rows - 1 - self.anchor_row,
                        self.filter_width - 1 - self.anchor_column,
                    )
                    plane = pad_for_border(plane, before, after, self.border)
                outputs[frame, :, :, channel] = correlate_valid(plane, filt)
        return saturated(outputs.reshape(self.output_shape), self.out_dtype)

    def tolerance(self) -> float:
        image, filt = self.data()
        return tolerance(image, filt) + rounding_error(self.out_dtype, self.reference)


def seeded_image(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Pixels of `dtype`: integers spanning their type, floats uniform in [-1, 1) (float64
    ones with all their digits, so kernels must round them as they read)."""
    kind = np.dtype(dtype)
    if kind.kind in "iu":
        info = np.iinfo(kind)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(kind)
    if kind == np.float64:
        return rng.uniform(-1, 1, shape)
    return rng.uniform(-1, 1, shape).astype(np.float32).astype(kind)


@functools.lru_cache(maxsize=32)
def _seeded_taps(problem: Conv2DProblem) -> np.ndarray:
    taps = problem.data()[1]
    taps.flags.writeable = False
    return taps


def correlate_valid(image: np.ndarray, filt: np.ndarray) -> np.ndarray:
    """'valid' 2D correlation in float64 (no filter flip), as the kernels compute it."""
    image = np.asarray(image, dtype=np.float64)
    filt = np.asarray(filt, dtype=np.float64)
    rows, columns = filt.shape
    out_h, out_w = image.shape[0] - rows + 1, image.shape[1] - columns + 1
    if rows * columns * out_h * out_w <= 20_000_000:
        out = np.zeros((out_h, out_w))
        for r in range(rows):
            for c in range(columns):
                out += filt[r, c] * image[r : r + out_h, c : c + out_w]
        return out
    return _correlate_by_blocks(image, filt, out_h, out_w)


FFT_BLOCK_ROWS = 512  # image rows per band of `_correlate_by_blocks` (at least 4 (F - 1))


def _correlate_by_blocks(image: np.ndarray, filt: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Large problems: bands of output rows, each a circular convolution of its image rows
    (zero-padded to FFT-friendly sizes) with the flipped filter, whose 'valid' part the
    wrap-around leaves untouched; the bands in threads (NumPy's FFT releases the GIL).
    A search computes this once per problem before its first kernel is timed, where one FFT
    of the whole image on one core took seconds (BENCHMARKS.md, "A problem's first visit")."""
    rows, columns = filt.shape
    step = max(FFT_BLOCK_ROWS, 4 * (rows - 1)) - rows + 1  # output rows per band
    width = _fft_size(image.shape[1])
    flipped = filt[::-1, ::-1]
    spectra: dict[int, np.ndarray] = {}  # FFT height -> the filter's spectrum
    starts = range(0, out_h, step)
    for start in starts:
        height = _fft_size(min(step, out_h - start) + rows - 1)
        if height not in spectra:
            kernel = np.zeros((height, width))
            kernel[:rows, :columns] = flipped
            spectra[height] = np.fft.rfft2(kernel)
    out = np.empty((out_h, out_w))

    def band(start: int) -> None:
        stop = min(start + step, out_h)
        piece = image[start : stop + rows - 1]
        shape = (_fft_size(piece.shape[0]), width)
        full = np.fft.irfft2(np.fft.rfft2(piece, s=shape) * spectra[shape[0]], s=shape)
        out[start:stop] = full[rows - 1 : piece.shape[0], columns - 1 : image.shape[1]]

    with ThreadPoolExecutor(min(len(starts), copy_threads())) as pool:
        list(pool.map(band, starts))
    return out


def _fft_size(n: int) -> int:
    """The smallest 2^a 3^b 5^c >= n (FFTs of such lengths are fastest)."""
    best = 1 << max(n - 1, 0).bit_length()
    five = 1
    while five < best:
        three = five
        while three < best:
            size = three
            while size < n:
                size *= 2
            best = min(best, size)
            three *= 3
        five *= 5
    return best


def tolerance(image: np.ndarray, filt: np.ndarray) -> float:
    """A bound on float32 rounding for sums of F*F products (recursive summation)."""
    terms = filt.size + 1
    return terms * FLOAT32_EPS * float(np.abs(filt).sum()) * float(np.abs(image).max()) + 1e-30
