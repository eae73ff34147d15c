#!/usr/bin/env python3
"""What each `autotune.convolve()` call costs, wall clock, as a program sees it: the
first call for a width, the same or a new filter again, and the same with
`specialise=True` (a kernel with the filter compiled in, one compile per filter).

    python3 bench/convolve_calls.py --device 0 --db sqlite:///tuned.db --filter-width 9 [-s 4096x4096]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import autotune
from autotune import runtime
from autotune.families.conv2d.inputs import GPU_IMAGE, parse_filter_widths, parse_image_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--db", required=True)
    parser.add_argument("--filter-width", default="9")
    parser.add_argument("--image-size", "-s", default=None, help="output WxH (default 4096x4096)")
    args = parser.parse_args()
    width_px, height_px = parse_image_size(args.image_size) if args.image_size else GPU_IMAGE
    rng = np.random.default_rng(0)
    print("| F | call | kernel | wall ms |")
    print("|---|---|---|---|")
    for width in parse_filter_widths(args.filter_width):
        image = rng.uniform(-1, 1, (height_px + width - 1, width_px + width - 1)).astype(np.float32)
        a, b, c = (rng.uniform(-1, 1, (width, width)).astype(np.float32) for _ in range(3))
        plan = autotune.plan(image.shape, width, device=args.device, db=args.db)
        print(f"<!-- F={width}: {plan.level} {plan.config} -->")
        calls = [
            ("first call for the width, filter A", a, False),
            ("filter A again", a, False),
            ("new filter B", b, False),
            ("filter A, specialise=True", a, True),
            ("filter A again, specialise=True", a, True),
            ("new filter C, specialise=True", c, True),
        ]
        for label, filt, specialise in calls:
            start = time.perf_counter()
            autotune.convolve(image, filt, device=args.device, db=args.db, specialise=specialise)
            wall = (time.perf_counter() - start) * 1e3
            _, source = next(reversed(runtime._kernels))
            kind = "filter compiled in" if "filter_values" in source else "reads the argument"
            print(f"| {width} | {label} | {kind} | {wall:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
