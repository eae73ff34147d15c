"""Named filters, for the command line and tests: `gaussian:17`, `box:5`, `sobel-x`,
`log:9`, written as correlation taps (the direction OpenCV's `filter2D` uses).

The derivative filters respond positively where values grow to the right (`-x`) or
downwards (`-y`): Sobel and Scharr as OpenCV's kernels, Prewitt with the same layout.
`log` and `dog` are written here (Laplacian and difference of Gaussians, rank 2). Gaussians are
OpenCV's `getGaussianKernel(F, 0)` unless a sigma is given (`gaussian:17:2.5`), and sum
to 1. A sigma must lie below 1e6 and above 0; a Gaussian's taps tend to a unit impulse as
sigma shrinks (so `dog` tends to zero), which is what tiny sigmas give. `log`'s scale grows
as 1 / sigma^2, so it takes sigmas from LOG_MIN_SIGMA only: below that its taps head for
float32's limit and its output for infinity.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from autotune.errors import UsageError

MAX_NAMED_WIDTH = 255
MAX_SIGMA = 1e6  # exclusive
LOG_MIN_SIGMA = 1e-6  # inclusive; log's centre tap is -2 / sigma^2, -2e12 here: far below float32's limit


def default_sigma(width: int) -> float:
    """OpenCV's sigma for a Gaussian of this width when none is given."""
    return 0.3 * ((width - 1) * 0.5 - 1) + 0.8


# OpenCV's getGaussianKernel answers widths up to 9 with these fixed tables when no
# sigma is given (in 256ths); wider ones from default_sigma.
_SMALL_GAUSSIANS = {
    1: [256],
    3: [64, 128, 64],
    5: [16, 64, 96, 64, 16],
    7: [8, 28, 56, 72, 56, 28, 8],
    9: [4, 13, 30, 51, 60, 51, 30, 13, 4],
}


def gaussian_taps(width: int, sigma: float) -> np.ndarray:
    """A 1-D Gaussian of `width` taps centred on the middle, summing to 1.

    The exponents are shifted so the middle taps' is 0 and divided by sigma twice, never
    by sigma**2 (which underflows to 0 for sigma below 1e-154): a tiny sigma then gives
    the limit, a unit impulse (two halves for even widths), rather than 0 / 0. Where the
    quotient overflows the tap is exp(-inf), exactly 0."""
    x = np.abs(np.arange(width) - (width - 1) / 2)
    x0 = x.min()
    with np.errstate(over="ignore", under="ignore"):
        taps = np.exp(-0.5 * ((x - x0) * (x + x0) / sigma) / sigma)
    return taps / taps.sum()


def _gaussian(width: int, sigma: float | None = None) -> np.ndarray:
    if sigma is None and width in _SMALL_GAUSSIANS:
        taps = np.array(_SMALL_GAUSSIANS[width], dtype=np.float64) / 256
    else:
        taps = gaussian_taps(width, sigma or default_sigma(width))
    return np.outer(taps, taps)


def _box(width: int) -> np.ndarray:
    return np.full((width, width), 1.0 / width**2)


def _log(width: int, sigma: float | None = None) -> np.ndarray:
    """Laplacian of a Gaussian, g''(y) g(x) + g(y) g''(x): rank 2."""
    sigma = sigma or default_sigma(width)
    x = np.arange(width) - (width - 1) / 2
    g = gaussian_taps(width, sigma)
    second = g * ((x / sigma) ** 2 - 1) / sigma**2  # finite for sigma >= LOG_MIN_SIGMA
    return np.outer(second, g) + np.outer(g, second)


def _dog(width: int, sigma: float | None = None, ratio: float = 1.6) -> np.ndarray:
    """Difference of Gaussians (sigma and ratio * sigma): rank 2."""
    sigma = sigma or default_sigma(width)
    return _gaussian(width, sigma) - _gaussian(width, ratio * sigma)


_DERIVATIVES = {  # (smoothing across, difference along)
    "sobel": ([1.0, 2.0, 1.0], [-1.0, 0.0, 1.0]),
    "scharr": ([3.0, 10.0, 3.0], [-1.0, 0.0, 1.0]),
    "prewitt": ([1.0, 1.0, 1.0], [-1.0, 0.0, 1.0]),
}
_SIZED: dict[str, Callable[..., np.ndarray]] = {"gaussian": _gaussian, "box": _box, "log": _log, "dog": _dog}
NAMES = [*(f"{n}:F" for n in _SIZED), *(f"{n}-{axis}" for n in _DERIVATIVES for axis in "xy")]


def named_filter(text: str) -> np.ndarray:
    """The filter a name gives (float32, F x F); a name this module does not know, or a
    width or sigma out of range, is bad input."""
    name, *params = text.strip().lower().split(":")
    for derivative, (smooth, difference) in _DERIVATIVES.items():
        if name in (f"{derivative}-x", f"{derivative}-y") and not params:
            taps = np.outer(smooth, difference)
            return (taps if name.endswith("x") else taps.T).astype(np.float32)
    if name not in _SIZED or not 1 <= len(params) <= 2:
        raise UsageError(f"unknown filter {text!r} (named filters: {', '.join(NAMES)}; or a .npy file)")
    if not params[0].isdigit() or not 1 <= int(params[0]) <= MAX_NAMED_WIDTH:
        raise UsageError(f"{text!r}: the width must be an integer from 1 to {MAX_NAMED_WIDTH}")
    width = int(params[0])
    if len(params) == 1:
        return _SIZED[name](width).astype(np.float32)
    if name == "box":
        raise UsageError(f"{text!r}: a box filter takes a width only")
    try:
        sigma = float(params[1])
    except ValueError:
        sigma = float("nan")
    if name == "log":
        accepted, low = LOG_MIN_SIGMA <= sigma < MAX_SIGMA, f"at least {LOG_MIN_SIGMA:g}"
        why = " (log's taps grow as 1 / sigma^2)"
    else:
        accepted, low, why = 0 < sigma < MAX_SIGMA, "greater than 0", ""
    if not accepted:
        raise UsageError(
            f"{text!r}: sigma must be a number {low} and less than {MAX_SIGMA:g}{why}, got {params[1]}"
        )
    return _SIZED[name](width, sigma).astype(np.float32)


def is_named(text: str) -> bool:
    """Whether a --filter value names a filter rather than a file."""
    return not text.lower().endswith(".npy") and text.split(":")[0].lower() in {
        *(_SIZED),
        *(f"{d}-{axis}" for d in _DERIVATIVES for axis in "xy"),
    }
