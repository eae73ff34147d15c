"""The convolution problem: key, seeded data, the float64 reference and its tolerance."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from autotune.families.base import Problem
from autotune.families.image import FLOAT32_EPS, ValidImage


@dataclass(frozen=True)
class Conv2DProblem(ValidImage, Problem):
    """'valid' correlation of an (out + F - 1)-sized float32 image with an F x F filter."""

    family: ClassVar[str] = "conv2d"
    size_fields: ClassVar[tuple[str, ...]] = ("out_width", "out_height")

    filter_width: int
    out_width: int
    out_height: int
    dtype: str = "float32"
    seed: int = 0

    @property
    def flops(self) -> int:
        return 2 * self.filter_width**2 * self.out_width * self.out_height

    def data(self) -> tuple[np.ndarray, np.ndarray]:
        """Seeded input image and filter, uniform in [-1, 1)."""
        rng = np.random.default_rng(self.seed)
        image = rng.uniform(-1, 1, (self.in_height, self.in_width)).astype(np.float32)
        filt = rng.uniform(-1, 1, (self.filter_width, self.filter_width)).astype(np.float32)
        return image, filt

    def inputs(self) -> dict[str, np.ndarray]:
        image, filt = self.data()
        return {"input": image, "filter": filt}

    def taps(self) -> np.ndarray:
        """The filter of `data()` alone (kernels compiled for one filter need it to render)."""
        return _seeded_taps(self)

    def reference(self) -> np.ndarray:
        image, filt = self.data()
        return correlate_valid(image, filt)

    def tolerance(self) -> float:
        image, filt = self.data()
        return tolerance(image, filt)


@functools.lru_cache(maxsize=32)
def _seeded_taps(problem: Conv2DProblem) -> np.ndarray:
    taps = problem.data()[1]
    taps.flags.writeable = False
    return taps


def correlate_valid(image: np.ndarray, filt: np.ndarray) -> np.ndarray:
    """'valid' 2D correlation in float64 (no filter flip), as the kernels compute it."""
    image = np.asarray(image, dtype=np.float64)
    filt = np.asarray(filt, dtype=np.float64)
    f = filt.shape[0]
    out_h, out_w = image.shape[0] - f + 1, image.shape[1] - f + 1
    if f * f * out_h * out_w <= 20_000_000:
        out = np.zeros((out_h, out_w))
        for r in range(f):
            for c in range(f):
                out += filt[r, c] * image[r : r + out_h, c : c + out_w]
        return out
    # Large problems: circular convolution with the flipped filter; the 'valid'
    # region is untouched by the wrap-around.
    kernel = np.zeros_like(image)
    kernel[:f, :f] = filt[::-1, ::-1]
    full = np.fft.irfft2(np.fft.rfft2(image) * np.fft.rfft2(kernel), s=image.shape)
    return full[f - 1 :, f - 1 :]


def tolerance(image: np.ndarray, filt: np.ndarray) -> float:
    """A bound on float32 rounding for sums of F*F products (recursive summation)."""
    terms = filt.size + 1
    return terms * FLOAT32_EPS * float(np.abs(filt).sum()) * float(np.abs(image).max()) + 1e-30
