"""The separable problem: a rank-r F x F filter given as r (column, row) tap pairs."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from autotune.families.base import Problem
from autotune.families.conv2d.problem import correlate_valid
from autotune.families.image import FLOAT32_EPS, ValidImage

MAX_RANK = 8


@dataclass(frozen=True)
class SeparableProblem(ValidImage, Problem):
    """'valid' correlation of an (out + F - 1)-sized float32 image with the filter
    sum_k outer(column_taps[k], row_taps[k])."""

    family: ClassVar[str] = "separable"
    size_fields: ClassVar[tuple[str, ...]] = ("out_width", "out_height")

    filter_width: int
    rank: int
    out_width: int
    out_height: int
    dtype: str = "float32"
    seed: int = 0

    @property
    def flops(self) -> int:
        """Multiply-adds of the two passes per output (the row pass's extra rows of
        each tile are overhead, not counted)."""
        return 2 * 2 * self.rank * self.filter_width * self.out_width * self.out_height

    def data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Seeded image and taps (rank x F each), uniform in [-1, 1)."""
        rng = np.random.default_rng(self.seed)
        image = rng.uniform(-1, 1, (self.in_height, self.in_width)).astype(np.float32)
        shape = (self.rank, self.filter_width)
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
        return correlate_valid(image, full_filter(row_taps, column_taps))

    def tolerance(self) -> float:
        image, row_taps, column_taps = self.data()
        return tolerance(image, row_taps, column_taps)


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
