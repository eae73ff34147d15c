#!/usr/bin/env python3
"""Where a replayed `gp` search goes: for each seed, the best found / optimum after the
budget, then each measured point after the start as time / optimum and how many knobs
it differs from the optimum ("1.19/7"). With `--profile KNOB`, also the optimum's times
with that one knob set to each of its values (a slice through the landscape).

    OPENBLAS_NUM_THREADS=1 python bench/replay_trajectories.py \
        ../shared/landscapes/gemm_RTX_3060_laptop.json.gz --seeds 8000-8009
    python bench/replay_trajectories.py ../shared/landscapes/convolution_W7800.json.gz --seeds 0-0 \
        --profile block_size_x
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.replay import load, replay_once  # noqa: E402
from autotune.search_options import SearchOptions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("landscape")
    parser.add_argument("--seeds", default="8000-8009")
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--gp", default="", help="gp settings, key=value,...")
    parser.add_argument("--profile", default="", help="a knob: the optimum's times along it")
    args = parser.parse_args()
    landscape = load(args.landscape)
    options = SearchOptions.parse(args.gp)
    optimum = landscape.optimum
    knobs = list(landscape.space.knobs)
    best_key = min((v, k) for k, v in landscape.values.items() if v is not None)[1]
    first, _, last = args.seeds.partition("-")
    for seed in range(int(first), int(last or first) + 1):
        trace = replay_once(landscape, "gp", args.budget, seed, options)
        steps = [
            f"{value / optimum:.2f}/{sum(config[k] != b for k, b in zip(knobs, best_key, strict=True))}"
            for value, config in trace.measured[options.startup_trials :]
        ]
        print(seed, f"{trace.best_at(args.budget) / optimum:.3f}", " ".join(steps), flush=True)
    if args.profile:
        if args.profile not in knobs:
            parser.error(f"no knob {args.profile!r} (knobs: {', '.join(knobs)})")
        at = knobs.index(args.profile)
        cells = []
        for value in landscape.space.knobs[args.profile].values:
            time = landscape.values.get(best_key[:at] + (value,) + best_key[at + 1 :])
            cells.append(f"{value}:{time / optimum:.2f}" if time is not None else f"{value}:-")
        print(f"{args.profile} at the optimum's other knobs:", " ".join(cells))


if __name__ == "__main__":
    main()
