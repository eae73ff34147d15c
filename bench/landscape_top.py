#!/usr/bin/env python3
"""How many points of a measured landscape lie near its optimum, what they share, and how
many evaluations `gp` takes to reach one: a needle (GEMM RTX 3060: 8 of 10,000 within 5%)
asks more of a search than a flat top (dedispersion A4000: 32 within 0.5%).

    OPENBLAS_NUM_THREADS=1 python bench/landscape_top.py ../shared/landscapes/gemm_RTX_3060_laptop.json.gz \
        --seeds 90000-90039 --budget 100

Prints the counts within 0.5%, 5% and 10%, each knob's values among the points within
`--within`, the fastest `--top` points, and per seed the evaluations `gp` took to get within
`--within` (sorted; "-" where it did not within `--budget`), with the share reached by 30, 50,
70 and 100 evaluations.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.replay import load, replay_once  # noqa: E402
from autotune.search_options import SearchOptions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("landscape")
    parser.add_argument("--seeds", default="", help="first-last; none: the landscape only")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--within", type=float, default=1.05, help="the target, best / optimum")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--gp", default="", help="gp settings, key=value,...")
    args = parser.parse_args()
    landscape = load(args.landscape)
    knobs = landscape.space.knobs
    optimum = landscape.optimum
    measured = []
    for values in itertools.product(*(k.values for k in knobs.values())):
        config = dict(zip(knobs, values, strict=True))
        valid, time = landscape.look_up(config)
        if valid and time is not None:
            measured.append((time / optimum, config))
    measured.sort(key=lambda item: item[0])
    counts = ", ".join(
        f"{sum(r <= 1 + share for r, _ in measured)} within {share:.1%}" for share in (0.005, 0.05, 0.1)
    )
    print(f"{landscape.name}: {len(measured)} points that ran; {counts}\n")
    near = [config for ratio, config in measured if ratio <= args.within]
    print(f"| knob | values within {args.within:g} (count) |\n|---|---|")
    for name in knobs:
        shown = collections.Counter(config[name] for config in near)
        print(f"| {name} | {', '.join(f'{v} ({n})' for v, n in sorted(shown.items(), key=str))} |")
    print(f"\n| best / optimum | {' | '.join(knobs)} |\n|---|{'---|' * len(knobs)}")
    for ratio, config in measured[: args.top]:
        print(f"| {ratio:.4f} | {' | '.join(str(config[name]) for name in knobs)} |")
    if not args.seeds:
        return
    first, _, last = args.seeds.partition("-")
    options = SearchOptions.parse(args.gp)
    reached = []
    for seed in range(int(first), int(last or first) + 1):
        trace = replay_once(landscape, "gp", args.budget, seed, options=options)
        reached.append(trace.evaluations_to(optimum * args.within))
    hits = sorted(n for n in reached if n is not None)
    print(
        f"\nevaluations to {args.within:g}, {len(reached)} seeds: {hits} and {len(reached) - len(hits)} x -"
    )
    for budget in (30, 50, 70, 100):
        if budget <= args.budget:
            print(f"by {budget}: {sum(n <= budget for n in hits) / len(reached):.2f}")


if __name__ == "__main__":
    main()
