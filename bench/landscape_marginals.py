#!/usr/bin/env python3
"""Each knob value of a landscape: how many points have it, the best and the median time
among them (over the optimum). Where a value's median is poor but its best is the optimum,
a model of average times steers away from the region that holds the optimum.

    python bench/landscape_marginals.py ../shared/landscapes/gemm_RTX_3060_laptop.json.gz
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autotune.replay import load  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("landscapes", nargs="+")
    args = parser.parse_args()
    for path in args.landscapes:
        landscape = load(path)
        names = list(landscape.space.knobs)
        ran = [(key, time) for key, time in landscape.values.items() if time is not None]
        optimum = landscape.optimum
        print(f"## {landscape.name}: {len(landscape.values)} points, {len(ran)} ran\n")
        print("| knob | value | points | best / optimum | median / optimum |")
        print("|---|---|---|---|---|")
        for index, name in enumerate(names):
            values = landscape.space.knobs[name].values
            if len(values) < 2:
                continue
            for value in values:
                times = [time for key, time in ran if key[index] == value]
                if times:
                    best, median = min(times) / optimum, statistics.median(times) / optimum
                    print(f"| {name} | {value} | {len(times)} | {best:.2f} | {median:.2f} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
