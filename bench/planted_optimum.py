#!/usr/bin/env python3
"""`gp` on the direct family's whole kernel space, for a planted optimum: how many seeds
find it within a budget, with and without the problem's live values.

The objective counts how many of four knobs differ from a planted point (work_x 4,
work_y 8, filter_space local, unroll full), plus a little for wide work-groups, on the
rules of a one-channel F = 9 problem (no device), three points asked before each tell
as when compiling ahead: the search `tests/test_search.py` runs for one seed.

    python bench/planted_optimum.py [--seeds 0-11] [--evaluations 60] [--no-live-values]
"""

from __future__ import annotations

import argparse
import math
import sys

from autotune.families.conv2d import CONV2D
from autotune.search import Search

PLANTED = {"work_x": 4, "work_y": 8, "filter_space": "local", "unroll": "full"}


def seeds_of(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-11")
    parser.add_argument("--evaluations", type=int, default=60)
    parser.add_argument("--no-live-values", action="store_true", help="model every value of every knob")
    args = parser.parse_args()
    space, problem = CONV2D.space, {"filter_width": 9}
    # Left out with --no-live-values, so the script also runs on trees from before them.
    live = {} if args.no_live_values else {"live_values": space.live_values(problem)}
    found = 0
    for seed in seeds_of(args.seeds):
        search = Search(space, "gp", seed, valid=lambda c: not space.violations(c, problem), **live)
        best, at = math.inf, 0
        for asked in range(0, args.evaluations, 3):
            batch = [search.ask() for _ in range(3)]
            for trial, config in batch:  # type: ignore[misc]
                value = 1.0 + sum(config[k] != v for k, v in PLANTED.items()) + 0.01 * config["local_x"] / 256
                search.tell(trial, value)
                if value < best:
                    best, at = value, asked + 3
        found += best < 1.02
        print(f"seed {seed}: best {best:.3f} after {at} evaluations")
    print(f"found the planted optimum on {found} of {len(seeds_of(args.seeds))} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
