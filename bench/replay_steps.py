#!/usr/bin/env python3
"""Which of `gp`'s steps spend a replayed search's evaluations, and which step first puts it
within 5% of the optimum: the start, a local step (the best point's one- or two-knob
neighbours, on the local turn), a global step, or a global step of a stalled search
(`stall_after`). Each row gives the step and how many knobs its point lay from the best
point of the time ("global/1": a global step that took a neighbour of the best).

    OPENBLAS_NUM_THREADS=1 python bench/replay_steps.py ../shared/landscapes/gemm_RTX_3060_laptop.json.gz \
        --seeds 97000-97019
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
    args = parser.parse_args()
    options = SearchOptions.parse(args.gp)
    steps: list[tuple[tuple[int, ...], str, int]] = []  # (point, step, knobs from the best)
    propose = GPSampler._gp_proposal

    def labelled(self: GPSampler) -> tuple[int, ...] | None:
        point = propose(self)
        if point is not None and self.best is not None:
            apart = knobs_apart(point, self.best[1])
            local = len(self.visited) % 2 and apart <= 2
            steps.append((point, "local" if local else "stalled" if self._stalled() else "global", apart))
        return point

    GPSampler._gp_proposal = labelled  # type: ignore[method-assign]
    first, _, last = args.seeds.partition("-")
    print(
        "| landscape | within target @budget | evaluations: start / local / global / stalled "
        "| first within the target: by step/knobs |"
    )
    print("|---|---|---|---|")
    for path in args.landscapes:
        landscape = load(path)
        names = list(landscape.space.knobs)
        spent: collections.Counter[str] = collections.Counter()
        entries: collections.Counter[str] = collections.Counter()
        reached = 0
        for seed in range(int(first), int(last or first) + 1):
            steps.clear()
            trace = replay_once(landscape, "gp", args.budget, seed, options)
            # The sampler's points are value indices in the knobs' order, as `key` below.
            step_of = {point: (step, apart) for point, step, apart in steps}
            best = float("inf")
            entry = None
            for value, config in trace.measured:
                key = tuple(landscape.space.knobs[n].values.index(config[n]) for n in names)
                step, apart = step_of.get(key, ("start", 0))
                spent[step] += 1
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


if __name__ == "__main__":
    main()
