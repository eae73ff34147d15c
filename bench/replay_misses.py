#!/usr/bin/env python3
"""Where replayed `gp` searches that miss 5% end, and what lies around such a point.

    OPENBLAS_NUM_THREADS=1 python bench/replay_misses.py ../shared/landscapes/gemm_RTX_3060_laptop.json.gz \
        --seeds 119000-119019 [--budget 50] [--gp local_ties=0.01]
    python bench/replay_misses.py ../shared/landscapes/gemm_RTX_3060_laptop.json.gz \
        --point MWG=128,NWG=128,MDIMC=32,NDIMC=8,MDIMA=32,NDIMB=32,VWM=4,VWN=1,SA=1,SB=1

Per seed: best found / optimum after the budget and, for a miss, the knobs that part it from
the nearest point within 5% (a trap three knobs away holds against one- and two-knob steps);
with `--full`, also the point itself, in the form `--point` reads.
With `--point` (knobs not named take their first value): the point's one-knob neighbours
(time / optimum, "-" where the rules or a failure leave none) and every two-knob neighbour
faster than it: none means no local step of one or two knobs leads out.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.replay import Landscape, load, replay_once  # noqa: E402
from autotune.search_options import SearchOptions  # noqa: E402


def misses(landscape: Landscape, seeds: range, budget: int, options: SearchOptions, full: bool) -> None:
    optimum, knobs = landscape.optimum, list(landscape.space.knobs)
    near = [key for key, value in landscape.values.items() if value is not None and value <= 1.05 * optimum]
    for seed in seeds:
        trace = replay_once(landscape, "gp", budget, seed, options)
        value, config = min(((v, c) for v, c in trace.measured if v is not None), key=lambda vc: vc[0])
        key = tuple(config[k] for k in knobs)
        if value <= 1.05 * optimum:
            print(seed, f"{value / optimum:.3f}", flush=True)
            continue
        closest = min(near, key=lambda n: sum(a != b for a, b in zip(n, key, strict=True)))
        moves = [f"{k}:{a}->{b}" for k, a, b in zip(knobs, key, closest, strict=True) if a != b]
        print(seed, f"{value / optimum:.3f}", len(moves), " ".join(moves), flush=True)
        if full:
            movable = [k for k in knobs if len(landscape.space.knobs[k].values) > 1]
            print("   ", ",".join(f"{k}={config[k]}" for k in movable))


def around(landscape: Landscape, text: str) -> None:
    optimum, knobs = landscape.optimum, list(landscape.space.knobs)
    values = [list(landscape.space.knobs[k].values) for k in knobs]
    given = dict(part.split("=") for part in text.split(","))
    unknown = set(given) - set(knobs)
    if unknown:
        sys.exit(f"no knob {sorted(unknown)[0]!r} (knobs: {', '.join(knobs)})")
    point = tuple(type(v[0])(given[k]) if k in given else v[0] for k, v in zip(knobs, values, strict=True))

    def ratio(key: tuple) -> float | None:
        value = landscape.values.get(key)
        return None if value is None else value / optimum

    centre = ratio(point)
    print("point:", "-" if centre is None else f"{centre:.3f}")
    movable = [i for i, v in enumerate(values) if len(v) > 1]
    for i in movable:
        cells = []
        for value in values[i]:
            if value != point[i]:
                r = ratio(point[:i] + (value,) + point[i + 1 :])
                cells.append(f"{value}:{'-' if r is None else f'{r:.3f}'}")
        print(f"  {knobs[i]}", " ".join(cells))
    if centre is None:
        return
    print("two-knob neighbours faster:")
    for i, j in itertools.combinations(movable, 2):
        for a, b in itertools.product(values[i], values[j]):
            if a != point[i] and b != point[j]:
                key = list(point)
                key[i], key[j] = a, b
                r = ratio(tuple(key))
                if r is not None and r < centre:
                    print(f"  {knobs[i]}={a} {knobs[j]}={b}: {r:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("landscape")
    parser.add_argument("--seeds", default="0-9")
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--gp", default="", help="gp settings, key=value,...")
    parser.add_argument("--full", action="store_true", help="print each miss's point (for --point)")
    parser.add_argument("--point", default="", help="knob=value,...: what lies around this point")
    args = parser.parse_args()
    landscape = load(args.landscape)
    if args.point:
        around(landscape, args.point)
        return
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    misses(landscape, seeds, args.budget, SearchOptions.parse(args.gp), args.full)


if __name__ == "__main__":
    main()
