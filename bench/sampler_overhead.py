#!/usr/bin/env python3
"""What one proposal of a sampler costs, against how many points are measured already.

    python bench/sampler_overhead.py [--landscapes ../shared/landscapes/*.json.gz]
                                     [--samplers gp] [--points 50,200,1000] [--asks 10]
                                     [--seed 0] [--gp SETTINGS] [--spaces [--families conv2d,separable]]

With `--spaces`, the family spaces a real search asks in instead of the landscapes:
conv2d at F = 3, 9 and 33 and separable rank 1 at F = 9 (4096x4096 'valid' float32), with
the H200's limits (no GPU needed). There a point is valid when the space's rules hold
(`KernelFamily.violations`, as in `autotune search`), which costs far more than a
landscape's look-up; the measured points are valid ones with random times (20 random, then
one- and two-knob moves of known ones, as a search's later steps).

For each landscape and count N, the search is given N measured points of the landscape
(random valid points, as history), then asked for `--asks` points in turn, each told its
measured time before the next ask. Reported: the median and the largest seconds per
ask (CPU time of this process, so other load on the machine counts little). The `gp`
steps alternate (local, global), so the median covers both. The first ask also lists
the valid points of the space (once per search), so the largest is often that one.
Threaded BLAS on a busy machine costs far more than the arithmetic: compare with
`OPENBLAS_NUM_THREADS=1`.
"""

from __future__ import annotations

import argparse
import glob
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autotune.replay import load
from autotune.search import Search, SearchOptions


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--landscapes", nargs="*", default=sorted(glob.glob(str(here.parent / "shared/landscapes/*.json.gz")))
    )
    parser.add_argument("--samplers", default="gp")
    parser.add_argument("--points", default="50,200,1000")
    parser.add_argument("--asks", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gp", default="", help="gp settings, key=value,... (autotune.search.SearchOptions)")
    parser.add_argument("--spaces", action="store_true", help="the family spaces a real search asks in")
    parser.add_argument("--families", default="conv2d,separable", help="with --spaces: which families")
    args = parser.parse_args()
    if args.spaces:
        return spaces(args)
    options = SearchOptions.parse(args.gp)
    counts = [int(n) for n in args.points.split(",")]
    print(f"seconds per ask (CPU), median / largest of {args.asks} asks after N measured points")
    print(f"{'; gp: ' + options.describe() if options.describe() else ''}\n")
    heads = " | ".join(f"N = {n}" for n in counts)
    print(f"| landscape | valid points | sampler | {heads} |")
    print("|---|---|---|" + "---|" * len(counts))
    worst = 0.0
    for path in args.landscapes:
        landscape = load(path)
        names = list(landscape.space.knobs)
        valid = sorted(landscape.values, key=str)
        for sampler in args.samplers.split(","):
            cells = []
            for n in counts:
                rng = random.Random(args.seed)
                search = Search(
                    landscape.space,
                    sampler,
                    args.seed,
                    valid=lambda c, landscape=landscape: landscape.look_up(c)[0],
                    options=options,
                )
                for point in rng.sample(valid, min(n, len(valid))):
                    search.add_history(dict(zip(names, point, strict=True)), landscape.values[point])
                spent = time_asks(
                    search, args.asks, lambda config, landscape=landscape: landscape.look_up(config)[1]
                )
                worst = max(worst, max(spent))
                cells.append(f"{statistics.median(spent):.3f} / {max(spent):.3f}")
            print(f"| {Path(path).name} | {len(valid)} | {sampler} | {' | '.join(cells)} |", flush=True)
    print(f"\nlargest: {worst:.3f} s")
    return 0


def time_asks(
    search: Search,
    asks: int,
    value_of: Callable[[dict], float | None],
    clock: Callable[[], float] = time.process_time,
) -> list[float]:
    """Seconds of each of `asks` asks (CPU seconds by default), each point told `value_of`
    it before the next."""
    spent = []
    for _ in range(asks):
        start = clock()
        asked = search.ask()
        spent.append(clock() - start)
        if asked is None:
            break
        trial, config = asked
        search.tell(trial, value_of(config))
    return spent


# Random valid points before the rest of a family space's history moves known ones: 4 in
# 20,000 points of the separable space are valid on the H200, so 1000 random valid points
# took longer than the measurement they set up.
RANDOM_HISTORY = 20


def family_search(
    family: Any, problem: Any, device: Any, history: int, seed: int, options: SearchOptions | None = None
) -> tuple[Search, random.Random]:
    """A `gp` search in a family's space whose validity is the space's rules on `device`
    and whose knobs keep their live values (as in `autotune search`), told `history`
    valid points with random times (`RANDOM_HISTORY` random ones, then one- and two-knob
    moves of known ones); and the generator that drew them, for the times of later points."""

    def valid(config: dict) -> bool:
        return not family.violations(config, problem, device)

    def violations(config: dict) -> int:
        return len(family.violations(config, problem, device))

    rng = random.Random(seed)
    live = family.space.live_values(problem.key(), device)
    search = Search(
        family.space, "gp", seed, valid=valid, violations=violations, options=options, live_values=live
    )
    names = sorted(live)
    known: set[str] = set()
    told: list[dict] = []
    while len(told) < history:
        if len(told) < RANDOM_HISTORY:  # from the live values, as a search draws its start points
            config = {name: rng.choice(values) for name, values in live.items()}
        else:  # one or two knobs of a known point moved, as a search's later steps go
            config = dict(rng.choice(told))
            for name in rng.sample(names, rng.choice((1, 2))):
                config[name] = rng.choice(live[name])
        if str(config) not in known and valid(config):
            known.add(str(config))
            told.append(config)
            search.add_history(config, rng.lognormvariate(0.0, 0.5))
    return search, rng


def spaces(args: argparse.Namespace) -> int:
    import dataclasses

    from autotune.devices import device_info
    from autotune.families.conv2d import CONV2D, Conv2DProblem
    from autotune.families.separable import SEPARABLE, SeparableProblem

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from repair_rare_points import H200_LIMITS

    options = SearchOptions.parse(args.gp)
    counts = [int(n) for n in args.points.split(",")]
    device = dataclasses.replace(device_info(0), **H200_LIMITS)
    cases = [(CONV2D, Conv2DProblem(width, 4096, 4096), f"F = {width}") for width in (3, 9, 33)]
    cases.append((SEPARABLE, SeparableProblem(9, 1, 4096, 4096, "float32"), "F = 9, rank 1"))
    cases = [case for case in cases if case[0].name in args.families.split(",")]
    if not cases:
        print(f"--families: none of {args.families!r} (conv2d, separable)", file=sys.stderr)
        return 2
    print(f"seconds per ask (CPU), median / largest of {args.asks} asks after N measured points, H200 limits")
    print(f"{'; gp: ' + options.describe() if options.describe() else ''}\n")
    print(f"| space | problem | {' | '.join(f'N = {n}' for n in counts)} |")
    print("|---|---|" + "---|" * len(counts))
    worst = 0.0
    for family, problem, label in cases:
        cells = []
        for n in counts:
            search, rng = family_search(family, problem, device, n, args.seed, options)
            spent = time_asks(search, args.asks, lambda _config, rng=rng: rng.lognormvariate(0.0, 0.5))
            worst = max(worst, max(spent))
            cells.append(f"{statistics.median(spent):.3f} / {max(spent):.3f}")
        print(f"| {family.name} | {label} | {' | '.join(cells)} |", flush=True)
    print(f"\nlargest: {worst:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
