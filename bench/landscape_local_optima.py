#!/usr/bin/env python3
"""How many traps does a measured landscape hold for a local search? For each landscape,
the points no valid neighbour beats: neighbours one knob away (radius 1), then, among
those, the ones no point two knobs away beats (radius 2). Failed points count as
infinitely slow; points outside the landscape break its rules and are not neighbours.

With `--repaired`, also the traps of repaired moves: a move sets one knob to another
value and changes as few other knobs as the landscape's rules need (every valid point
with that value at the least distance), the step a search makes where rules tie knobs
together. It takes about a minute per landscape.

A search whose local step moves one knob at a time can end on any radius-1 trap; a
radius-2 trap needs a jump of three knobs or more, which only a global step makes. So
the counts say which change can help where: widening the local step helps a landscape
whose radius-1 traps are not radius-2 traps, and nothing local helps one with slow
radius-2 traps.

    python bench/landscape_local_optima.py [--show 8] [--repaired]
    python bench/landscape_local_optima.py --basins [--show 6]   (how many points descend to each trap)
    python bench/landscape_local_optima.py --landscapes their/*.json.gz   (default: ../shared/landscapes)
"""

from __future__ import annotations

import argparse
import glob
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autotune.replay import load  # noqa: E402
from autotune.samplers import one_knob_neighbours  # noqa: E402

Point = tuple[int, ...]


def traps(times: dict[Point, float], sizes: list[int]) -> tuple[list[Point], list[Point]]:
    """(radius-1 traps, radius-2 traps) of a landscape given as value indices -> time."""

    def beaten(point: Point, candidates: set[Point]) -> bool:
        return any(times.get(other, math.inf) < times[point] for other in candidates)

    radius_1 = [p for p in times if not beaten(p, set(one_knob_neighbours(p, sizes)))]
    radius_2 = []
    for point in radius_1:
        ring = {far for near in one_knob_neighbours(point, sizes) for far in one_knob_neighbours(near, sizes)}
        if not beaten(point, ring):
            radius_2.append(point)
    return radius_1, radius_2


def repaired_traps(times: dict[Point, float]) -> list[Point]:
    """Points that no repaired move (module docstring) improves on."""
    points = list(times)
    table = np.array(points)
    seconds = np.array([times[p] for p in points])
    found = []
    for index, centre in enumerate(table):
        better = False
        for knob in range(table.shape[1]):
            for value in np.unique(table[:, knob]):
                if value == centre[knob]:
                    continue
                rows = np.nonzero(table[:, knob] == value)[0]
                distance = (table[rows] != centre).sum(1)
                if (seconds[rows[distance == distance.min()]] < seconds[index]).any():
                    better = True
                    break
            if better:
                break
        if not better:
            found.append(points[index])
    return found


def basins(times: dict[Point, float], sizes: list[int]) -> dict[Point, int]:
    """How many points steepest descent (to the fastest valid one-knob neighbour, while it
    is faster) carries to each radius-1 trap: its basin."""
    attractor: dict[Point, Point] = {}
    for start in times:
        path, point = [], start
        while point not in attractor:
            path.append(point)
            near = [q for q in one_knob_neighbours(point, sizes) if q in times]
            best = min(near, key=times.__getitem__, default=None)
            if best is None or times[best] >= times[point]:
                attractor[point] = point
                break
            point = best
        for passed in path:
            attractor[passed] = attractor[point]
    counts: dict[Point, int] = {}
    for trap in attractor.values():
        counts[trap] = counts.get(trap, 0) + 1
    return counts


def ratios(times: dict[Point, float], points: list[Point], optimum: float, count: int) -> str:
    """The `count` fastest of `points`, as time / optimum."""
    return ", ".join(f"{t / optimum:.3f}" for t in sorted(times[p] for p in points)[:count])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = str(Path(__file__).resolve().parents[2] / "shared" / "landscapes" / "*.json.gz")
    parser.add_argument("--landscapes", nargs="+", default=[default])
    parser.add_argument("--repaired", action="store_true", help="also count the traps of repaired moves")
    parser.add_argument("--show", type=int, default=8, help="how many traps to list, fastest first")
    parser.add_argument(
        "--basins", action="store_true", help="instead: each fastest trap's basin under steepest descent"
    )
    args = parser.parse_args()
    paths = sorted({p for pattern in args.landscapes for p in glob.glob(pattern)})
    if not paths:
        print(f"no landscape matches {' '.join(args.landscapes)}", file=sys.stderr)
        return 2
    if args.basins:
        return print_basins(paths, args.show)
    heads = ["radius-1 traps", "best / optimum", "radius-2 traps", "best / optimum"]
    heads += ["repaired-move traps", "best / optimum"] if args.repaired else []
    print("| landscape | valid points | " + " | ".join(heads) + " |")
    print("|---|---|" + "---|" * len(heads))
    for path in paths:
        times, sizes, optimum = indexed_times(path)
        kinds = list(traps(times, sizes))
        if args.repaired:
            kinds.append(repaired_traps(times))
        cells = [f"{len(points)} | {ratios(times, points, optimum, args.show)}" for points in kinds]
        name = Path(path).name.removesuffix(".json.gz")
        print(f"| {name} | {len(times)} | " + " | ".join(cells) + " |", flush=True)
    return 0


def indexed_times(path: str) -> tuple[dict[Point, float], list[int], float]:
    """A landscape's points as value indices -> time (failed: infinite), its knobs' sizes
    and its optimum."""
    landscape = load(path)
    knobs = list(landscape.space.knobs.values())
    times = {
        tuple(knob.values.index(v) for knob, v in zip(knobs, key, strict=True)): math.inf if t is None else t
        for key, t in landscape.values.items()
    }
    return times, [len(k.values) for k in knobs], landscape.optimum


def print_basins(paths: list[str], count: int) -> int:
    print("| landscape | valid points | radius-1 traps | fastest traps: time / optimum (basin, share) |")
    print("|---|---|---|---|")
    for path in paths:
        times, sizes, optimum = indexed_times(path)
        counts = basins(times, sizes)
        fastest = sorted(counts, key=times.__getitem__)[:count]
        cells = ", ".join(
            f"{times[t] / optimum:.3f} ({counts[t]}, {counts[t] / len(times):.1%})" for t in fastest
        )
        name = Path(path).name.removesuffix(".json.gz")
        print(f"| {name} | {len(times)} | {len(counts)} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
