#!/usr/bin/env python3
"""`autotune.convolve()` on an image of more than 2^31 values, checked where the bands
meet: the kernels index with 32-bit ints, so such an image runs in bands of rows.

    python bench/huge_image.py --device 0 [--height 46400] [--width 46402] [--filter-width 3]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import autotune
from autotune import runtime
from autotune.families.conv2d.problem import correlate_valid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--height", type=int, default=46400)
    parser.add_argument("--width", type=int, default=46402)
    parser.add_argument("--filter-width", type=int, default=3)
    parser.add_argument("--db", default="sqlite:///:memory:")
    args = parser.parse_args()

    f = args.filter_width
    image = np.empty((args.height, args.width), dtype=np.float32)
    for start in range(0, args.height, 4096):  # a cheap pattern no two neighbours share
        rows = np.arange(start, min(start + 4096, args.height), dtype=np.float32)[:, None]
        image[start : start + rows.shape[0]] = np.sin(rows * 0.37 + np.arange(args.width) * 0.11)
    filt = np.random.default_rng(0).uniform(-1, 1, (f, f)).astype(np.float32)
    bands = runtime._bands(image.shape, f)
    started = time.perf_counter()
    out = autotune.convolve(image, filt, device=args.device, db=args.db)
    seconds = time.perf_counter() - started
    # every band's first and last output rows, where one band meets the next
    checked = sorted({r for first, rows in bands for r in (first, first + rows - 1)})
    worst = 0.0
    for row in checked:
        expected = correlate_valid(image[row : row + f], filt)[0]
        worst = max(worst, float(np.abs(out[row] - expected).max()))
    print(
        f"{image.size} values ({args.height}x{args.width}), F={f}: {len(bands)} band(s), "
        f"{seconds:.1f} s for the call, {len(checked)} rows checked at band edges, max error {worst:.2e}"
    )
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
