"""The separable problem: a rank-r F x F filter given as r (column, row) tap pairs,
on pixels of a type (read and written by the kernel) with 'valid' or 'same' output."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from autotune.errors import UsageError
from autotune.families.base import Problem
from autotune.families.conv2d.problem import correlate_valid, seeded_image
from autotune.families.image import (
    FLOAT32_EPS,
    FilteredImage,
    check_pixels,
    drawn_once,
    pad_for_border,
    rounding_error,
    saturated,
)

MAX_RANK = 8


@dataclass(frozen=True)
class SeparableProblem(FilteredImage, Problem):
    """Correlation of an image of pixel type `dtype` with the filter
    sum_k outer(column_taps[k], row_taps[k]), into `out_dtype` pixels: 'valid' (border
    `none`: the input is the output grown by F - 1) or 'same' with a border (input and
    output of one size, the filter's tap `anchor` over each output, -1: F // 2)."""

    family: ClassVar[str] = "separable"
    size_fields: ClassVar[tuple[str, ...]] = ("out_width", "out_height")
    optional_fields: ClassVar[tuple[str, ...]] = ("out_dtype", "border", "anchor")

    filter_width: int
    rank: int
    out_width: int
    out_height: int
    dtype: str = "float32"
    seed: int = 0
    out_dtype: str = "float32"
    border: str = "none"
    anchor: int = -1

    def __post_init__(self) -> None:
        check_pixels(self.dtype, self.out_dtype, self.border)
        if self.anchor != -1 and not (self.same and 0 <= self.anchor < self.filter_width):
            raise UsageError(f"anchor must be -1 or a tap of the filter in 'same' output, got {self.anchor}")
        if self.anchor == self.filter_width // 2:  # the centre has one name: one problem, one key
            object.__setattr__(self, "anchor", -1)

    @property
    def anchor_tap(self) -> int:
        """The filter tap over the output pixel in 'same' output, in x and y."""
        return self.filter_width // 2 if self.anchor == -1 else self.anchor

    @property
    def min_bytes(self) -> int:
        pixels_in, pixels_out = self.in_width * self.in_height, self.out_width * self.out_height
        return np.dtype(self.dtype).itemsize * pixels_in + self.output_dtype.itemsize * pixels_out

    @property
    def flops(self) -> int:
        """Multiply-adds of the two passes per output (the row pass's extra rows of
        each tile are overhead, not counted)."""
        return 2 * 2 * self.rank * self.filter_width * self.out_width * self.out_height

    @drawn_once
    def data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Seeded image and taps (rank x F each). Float pixels and taps are uniform in
        [-1, 1); integer pixels span their type, and for integer output every term's
        taps are positive and the filter sums to 1 (outputs in range)."""
        rng = np.random.default_rng(self.seed)
        image = seeded_image(rng, self.dtype, (self.in_height, self.in_width))
        shape = (self.rank, self.filter_width)
        if self.output_dtype.kind in "iu":
            rows, columns = rng.uniform(0.25, 1, shape), rng.uniform(0.25, 1, shape)
            rows /= rows.sum(axis=1, keepdims=True)
            columns /= columns.sum(axis=1, keepdims=True) * self.rank
            return image, rows.astype(np.float32), columns.astype(np.float32)
        row_taps = rng.uniform(-1, 1, shape).astype(np.float32)
        return image, row_taps, rng.uniform(-1, 1, shape).astype(np.float32)

    def inputs(self) -> dict[str, np.ndarray]:
        image, row_taps, column_taps = self.data()
        return {"input": image, "row_taps": row_taps, "column_taps": column_taps}

    def taps(self) -> tuple[np.ndarray, np.ndarray]:
        """(row_taps, column_taps) of `data()` (kernels with taps compiled in need them)."""
        return _seeded_taps(self)

    def reference(self) -> np.ndarray:
        image, row_taps, column_taps = self.data()
        plane = image.astype(np.float64)
        if self.same:
            before = self.anchor_tap
            after = self.filter_width - 1 - before
            plane = pad_for_border(plane, (before, before), (after, after), self.border)
        return saturated(correlate_valid(plane, full_filter(row_taps, column_taps)), self.out_dtype)

    def tolerance(self) -> float:
        image, row_taps, column_taps = self.data()
        rounding = rounding_error(self.out_dtype, self.reference)
        return tolerance(image.astype(np.float64), row_taps, column_taps) + rounding


@functools.lru_cache(maxsize=32)
def _seeded_taps(problem: SeparableProblem) -> tuple[np.ndarray, np.ndarray]:
    _, row_taps, column_taps = problem.data()
    row_taps.flags.writeable = column_taps.flags.writeable = False
    return row_taps, column_taps


def full_filter(row_taps: np.ndarray, column_taps: np.ndarray) -> np.ndarray:
    """The F x F filter the terms add up to, in float64."""
    rows = np.asarray(row_taps, dtype=np.float64)
    columns = np.asarray(column_taps, dtype=np.float64)
    return np.einsum("kr,kc->rc", columns, rows)


def tolerance(image: np.ndarray, row_taps: np.ndarray, column_taps: np.ndarray) -> float:
    """A bound on float32 rounding: each term sums F products twice (row pass, then
    column pass), and the terms are summed in turn."""
    rank, width = np.shape(row_taps)
    scale = float(np.sum(np.abs(column_taps).sum(axis=1) * np.abs(row_taps).sum(axis=1)))
    terms = 2 * width + rank + 1
    return terms * FLOAT32_EPS * scale * float(np.abs(image).max()) + 1e-30
