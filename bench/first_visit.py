#!/usr/bin/env python3
"""How long the measuring worker prepares for a problem it has not measured yet.

    python bench/first_visit.py [--tree PATH] [--image-size 4096x4096]

`Session._prepare` (the seeded data, the float64 reference and tolerance, the device
buffers) on the default device, for conv2d F = 3 and 33 and the separable family at
F = 17 rank 1, in seconds. `--tree` imports autotune from another checkout (`git worktree
add /tmp/old REV`), so two trees can be timed one after the other.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--image-size", default="4096x4096", help="output WxH")
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    from autotune.families.conv2d import Conv2DProblem
    from autotune.families.separable.problem import SeparableProblem
    from autotune.session import Session

    width, height = (int(n) for n in args.image_size.lower().split("x"))
    problems = {
        "conv2d F = 3": Conv2DProblem(3, width, height),
        "conv2d F = 33": Conv2DProblem(33, width, height),
        "separable F = 17 rank 1": SeparableProblem(
            filter_width=17, rank=1, out_width=width, out_height=height
        ),
    }
    session = Session(0)
    for label, problem in problems.items():
        started = time.perf_counter()
        session._prepare(problem)
        print(f"{args.tree}: {label}: {time.perf_counter() - started:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
