#!/usr/bin/env python3
"""Which of `gp`'s steps spend a replayed search's evaluations, and which step first puts it
within 5% of the optimum: the start, a local step (the best point's one- or two-knob
neighbours, on the local turn), a global step, or a global step of a stalled search
(`stall_after`). Each row gives the step and how many knobs its point lay from the best
point of the time ("global/1": a global step that took a neighbour of the best). With
`--moves`, a second table: the local step's evaluations by the kind of move (a switch flip,
another one-knob move, a diagonal move, a reshape move, another two-knob move such as a
switch pair or a repaired move), how many were taken while the search had stalled, and how
many gained 1% or more on the best.

    OPENBLAS_NUM_THREADS=1 python bench/replay_steps.py ../shared/landscapes/gemm_RTX_3060_laptop.json.gz \
        --seeds 97000-97019
    OPENBLAS_NUM_THREADS=1 python bench/replay_steps.py ../shared/landscapes/*.json.gz \
        --seeds 120000-120019 --moves
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.replay import load, replay_once  # noqa: E402
from autotune.samplers import GPSampler, knobs_apart  # noqa: E402
from autotune.search_options import SearchOptions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("landscapes", nargs="+")
    parser.add_argument("--seeds", default="97000-97019")
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--within", type=float, default=1.05, help="the target, best / optimum")
    parser.add_argument("--gp", default="", help="gp settings, key=value,...")
    parser.add_argument("--moves", action="store_true", help="also the local step's moves by kind")
    args = parser.parse_args()
    options = SearchOptions.parse(args.gp)
    # (point, step, knobs from the best, kind of local move, stalled when proposed)
    steps: list[tuple[tuple[int, ...], str, int, str, bool]] = []
    propose = GPSampler._gp_proposal

    def labelled(self: GPSampler) -> tuple[int, ...] | None:
        point = propose(self)
        if point is not None and self.best is not None:
            apart = knobs_apart(point, self.best[1])
            local = len(self.visited) % 2 and apart <= 2
            step = "local" if local else "stalled" if self._stalled() else "global"
            kind = _move_kind(self, point) if local else ""
            steps.append((point, step, apart, kind, self._stalled()))
        return point

    GPSampler._gp_proposal = labelled  # type: ignore[method-assign]
    first, _, last = args.seeds.partition("-")
    print(
        "| landscape | within target @budget | evaluations: start / local / global / stalled "
        "| first within the target: by step/knobs |"
    )
    print("|---|---|---|---|")
    moves: dict[str, collections.Counter[tuple[str, str]]] = {}
    for path in args.landscapes:
        landscape = load(path)
        names = list(landscape.space.knobs)
        spent: collections.Counter[str] = collections.Counter()
        entries: collections.Counter[str] = collections.Counter()
        reached = 0
        moves[landscape.name] = kinds = collections.Counter()
        for seed in range(int(first), int(last or first) + 1):
            steps.clear()
            trace = replay_once(landscape, "gp", args.budget, seed, options)
            # The sampler's points are value indices in the knobs' order, as `key` below.
            step_of = {point: rest for point, *rest in steps}
            best = float("inf")
            entry = None
            for value, config in trace.measured:
                key = tuple(landscape.space.knobs[n].values.index(config[n]) for n in names)
                step, apart, kind, stalled = step_of.get(key, ("start", 0, "", False))
                spent[step] += 1
                if kind:
                    kinds[kind, "evaluations"] += 1
                    kinds[kind, "stalled"] += stalled
                    kinds[kind, "gains"] += value < best * 0.99
                if value < best:
                    best = value
                    if entry is None and value <= landscape.optimum * args.within:
                        entry = f"{step}/{apart}"
            if entry is not None:
                reached += 1
                entries[entry] += 1
        seeds = int(last or first) - int(first) + 1
        spent_cells = " / ".join(str(spent[s]) for s in ("start", "local", "global", "stalled"))
        entry_cells = ", ".join(f"{k} {v}" for k, v in entries.most_common())
        print(f"| {landscape.name} | {reached} of {seeds} | {spent_cells} | {entry_cells} |")
    if args.moves:
        print("\nThe local step's moves, each cell: evaluations / while stalled / gains of 1% or more\n")
        print("| landscape | " + " | ".join(MOVE_KINDS) + " |")
        print("|---|" + "---|" * len(MOVE_KINDS))
        for name, kinds in moves.items():
            counts = ("evaluations", "stalled", "gains")
            cells = [" / ".join(str(kinds[k, c]) for c in counts) for k in MOVE_KINDS]
            print(f"| {name} | " + " | ".join(cells) + " |")


MOVE_KINDS = ("switch", "one knob", "diagonal", "reshape", "other two-knob")


def _move_kind(sampler: GPSampler, point: tuple[int, ...]) -> str:
    """Which kind of move of the local step `point` is from the best point."""
    assert sampler.best is not None
    centre = sampler.best[1]
    changed = [k for k, (a, b) in enumerate(zip(centre, point, strict=True)) if a != b]
    if len(changed) == 1:
        return "switch" if sampler.sizes[changed[0]] == 2 else "one knob"
    if point in sampler._diagonal_neighbours(centre):
        return "diagonal"
    return "reshape" if point in sampler._reshaped(centre) else "other two-knob"


if __name__ == "__main__":
    main()
