"""A filter's separable terms: the smallest r for which sum_k outer(column_k, row_k)
equals the filter to within float32 rounding (from its SVD), so that the separable
kernels compute what the direct kernel would, within the same tolerance."""

from __future__ import annotations

import numpy as np

from autotune.families.image import FLOAT32_EPS


def separable_terms(filt: np.ndarray, max_rank: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(row_taps, column_taps), each rank x F in float32, for the lowest numerical rank
    up to `max_rank`; None if the filter needs more terms.

    A rank is accepted when the terms, rounded to float32, differ from the filter by at
    most F * eps32 * sum|filter| in total (summed over taps): about one float32 rounding
    per tap, far inside the direct kernel's own rounding bound of (F² + 1) * eps32 *
    sum|filter| per unit of input."""
    filt = np.asarray(filt, dtype=np.float64)
    width = filt.shape[0]
    scale = float(np.abs(filt).sum())
    if scale == 0.0 or not np.all(np.isfinite(filt)):
        return None
    u, s, vt = np.linalg.svd(filt)
    allowed = width * FLOAT32_EPS * scale
    for rank in range(1, min(max_rank, width) + 1):
        root = np.sqrt(s[:rank])
        column_taps = (u[:, :rank] * root).T.astype(np.float32)
        row_taps = (vt[:rank, :] * root[:, None]).astype(np.float32)
        approximation = np.einsum("kr,kc->rc", column_taps.astype(np.float64), row_taps.astype(np.float64))
        if float(np.abs(approximation - filt).sum()) <= allowed:
            # row-major, as kernels and buffers read them (the transpose above is not)
            return np.ascontiguousarray(row_taps), np.ascontiguousarray(column_taps)
    return None
