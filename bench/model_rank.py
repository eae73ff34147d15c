#!/usr/bin/env python3
"""Where `gp`'s time model ranks a landscape's near-optimal points while a search runs: is
the global step blind to them, or are they simply not among its candidates? A space too
large to list (GEMM: 82,944 points, 10,000 valid) gives the global step a random sample.

    OPENBLAS_NUM_THREADS=1 python bench/model_rank.py ../shared/landscapes/gemm_RTX_3060_laptop.json.gz \
        --seeds 90000-90011 --at 20,30,40

At each global step of a default search (seeds as given) it records whether the step's
candidates held a point within `--within` of the optimum; at the evaluation counts of `--at` it
also ranks every valid unmeasured point of the landscape by the model's mean (plain, with
value offsets, each fitted to the points the search measured) and prints the median and lower
quartile of the first near point's rank, and the median best true time (/ optimum) among the
model's 10 fastest-predicted points.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune import samplers, surrogate  # noqa: E402
from autotune.replay import load, replay_once  # noqa: E402

MODELS = {"plain": {"value_offsets": False}, "value offsets": {"value_offsets": True}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("landscape")
    parser.add_argument("--seeds", default="90000-90011", help="first-last")
    parser.add_argument("--at", default="20,30,40", help="evaluation counts to rank the whole space at")
    parser.add_argument("--within", type=float, default=1.05)
    args = parser.parse_args()
    landscape = load(args.landscape)
    knobs = landscape.space.knobs
    optimum = landscape.optimum
    at = {int(n) for n in args.at.split(",")}
    points, times = [], {}
    for values in itertools.product(*(k.values for k in knobs.values())):
        valid, time = landscape.look_up(dict(zip(knobs, values, strict=True)))
        if valid:
            point = tuple(list(k.values).index(v) for k, v in zip(knobs.values(), values, strict=True))
            points.append(point)
            times[point] = time
    near = {p for p, t in times.items() if t is not None and t <= optimum * args.within}
    ranks: dict[tuple[int, str], list[tuple[int | None, float]]] = defaultdict(list)
    sampled: list[bool] = []
    original = samplers.GPSampler._candidates

    def candidates_of_global_step(self: samplers.GPSampler) -> list[tuple[int, ...]]:
        candidates = original(self)
        sampled.append(any(p in near for p in candidates))
        count = len(self.visited)
        if count in at:
            unmeasured = [p for p in points if p not in self.visited]
            saved = self.options
            for label, settings in MODELS.items():
                self.options = dataclasses.replace(saved, choose_offsets=False, **settings)
                measured = self._model_set()
                order = surrogate.ranking(
                    self._features(measured),
                    self._targets(measured),
                    self._features(unmeasured),
                    acquisition="mean",
                    offset_columns=len(self._offset_knobs()),
                )
                first = next((r for r, i in enumerate(order) if unmeasured[i] in near), None)
                top = [times[unmeasured[i]] for i in order[:10] if times[unmeasured[i]] is not None]
                ranks[(count, label)].append((first, min(top) / optimum if top else float("inf")))
            self.options = saved
        return candidates

    samplers.GPSampler._candidates = candidates_of_global_step  # the global step's candidates
    first, _, last = args.seeds.partition("-")
    for seed in range(int(first), int(last or first) + 1):
        replay_once(landscape, "gp", max(at) + 1, seed)
    print(
        f"{landscape.name}: {len(points)} valid points, {len(near)} within {args.within:g}; "
        f"global steps whose candidates held one: {sum(sampled)} of {len(sampled)}\n"
    )
    print("| evaluations | model | first near point's rank: median (q1) | best of its top 10 (median) |")
    print("|---|---|---|---|")
    for (count, label), rows in sorted(ranks.items()):
        found = sorted(len(points) if r is None else r for r, _ in rows)
        best = statistics.median(t for _, t in rows)
        rank = f"{statistics.median(found):.0f} ({found[len(found) // 4]})"
        print(f"| {count} | {label} | {rank} | {best:.3f} |")


if __name__ == "__main__":
    main()
