#!/usr/bin/env python3
"""How many of a replayed search's evaluations are failed points, per landscape and variant.

    python bench/failed_evaluations.py [--landscapes ../shared/landscapes/*.json.gz]
                                       [--variants gp "gp:failures=kernel"]
                                       [--seeds 12000-12019] [--budget 50]

Per landscape: its share of failed points, then per variant the mean and the largest
number of failed evaluations in `--budget` evaluations over the seeds (the same searches
`bench/replay_loo.py` replays: deterministic per variant, landscape and seed). Landscapes
without failed points are listed and skipped: the `failures` setting cannot change a
search there. Run it with `OPENBLAS_NUM_THREADS=1`.
"""

from __future__ import annotations

import argparse
import glob
import statistics
import sys
from pathlib import Path

from replay_loo import seeds_of, variant_of

from autotune.replay import MAX_REJECTIONS, Landscape, load
from autotune.search import Search


def failed_in(landscape: Landscape, spec: str, seed: int, budget: int) -> int:
    """Failed evaluations among the first `budget` of one search (as `replay_once` counts them)."""
    sampler, options = variant_of(spec)
    search = Search(landscape.space, sampler, seed, valid=lambda c: landscape.look_up(c)[0], options=options)
    seen: set[tuple[object, ...]] = set()
    failed = rejections = 0
    while len(seen) < budget and rejections < MAX_REJECTIONS and not search.exhausted:
        asked = search.ask()
        if asked is None:
            break
        trial, config = asked
        valid, value = landscape.look_up(config)
        search.tell(trial, value if valid else None)
        key = landscape.key(config)
        if valid and key not in seen:
            seen.add(key)
            failed += value is None
        else:
            rejections += 1
    return failed


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--landscapes", nargs="*", default=sorted(glob.glob(str(here.parent / "shared/landscapes/*.json.gz")))
    )
    parser.add_argument("--variants", nargs="*", default=["gp", "gp:failures=kernel"])
    parser.add_argument("--seeds", default="12000-12019")
    parser.add_argument("--budget", type=int, default=50)
    args = parser.parse_args()
    seeds = seeds_of(args.seeds)
    print(f"failed evaluations in {args.budget}, mean / largest over seeds {args.seeds}\n")
    print(f"| landscape | failed points | {' | '.join(args.variants)} |")
    print("|---|---|" + "---|" * len(args.variants))
    for path in args.landscapes:
        landscape = load(path)
        share = sum(v is None for v in landscape.values.values()) / len(landscape.values)
        name = Path(path).name.removesuffix(".json.gz")
        if not share:
            print(f"| {name} | none | " + " | ".join("-" for _ in args.variants) + " |", flush=True)
            continue
        cells = []
        for spec in args.variants:
            counts = [failed_in(landscape, spec, seed, args.budget) for seed in seeds]
            cells.append(f"{statistics.mean(counts):.1f} / {max(counts)}")
        print(f"| {name} | {share:.1%} | {' | '.join(cells)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
