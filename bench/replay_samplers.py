#!/usr/bin/env python3
"""Compare samplers by replay on measured landscapes (no hardware needed).

    python bench/replay_samplers.py [--landscapes ../shared/landscapes/*.json.gz]
                                    [--samplers gp,tpe-local,tpe,random] [--repeats 20] [--budget 100]
                                    [--seed 0] [--jobs 2] [--global-step mean|ei]
                                    [--switches-first on|off] [--genetic-every N] [--gp SETTINGS]

Prints, per landscape and sampler, the median of best found / optimum after 20, 50
and 100 evaluations, P(within 5%) at 50, and the median evaluations to reach 5%.
The gp options select the variants compared in BENCHMARKS.md; their defaults are the
defaults of `autotune search`. `--gp` takes any `SearchOptions` settings as
`key=value,...` (the three flags above override it). `bench/replay_loo.py` judges
variants landscape by landscape and across held-out groups.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path

from autotune.replay import Landscape, Trace, load, replay_once, summarise
from autotune.search import SearchOptions


@cache
def _landscape(path: str) -> Landscape:
    return load(path)


def _replay(path: str, sampler: str, budget: int, seed: int, options: SearchOptions) -> Trace:
    return replay_once(_landscape(path), sampler, budget, seed, options)


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--landscapes", nargs="*", default=sorted(glob.glob(str(here.parent / "shared/landscapes/*.json.gz")))
    )
    parser.add_argument("--samplers", default="gp,tpe-local,tpe,random")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="replays run in this many processes")
    parser.add_argument("--gp", default="", help="gp settings, key=value,... (autotune.search.SearchOptions)")
    parser.add_argument("--global-step", choices=("mean", "ei"), default=None)
    parser.add_argument("--switches-first", choices=("on", "off"), default=None)
    parser.add_argument(
        "--genetic-every",
        type=int,
        default=None,
        help="gp: every Nth step is a genetic one; 0 (the default) turns them off",
    )
    args = parser.parse_args()
    options = SearchOptions.parse(args.gp)
    flags = {
        "global_step": args.global_step,
        "switches_first": None if args.switches_first is None else args.switches_first == "on",
        "genetic_every": args.genetic_every,
    }
    options = dataclasses.replace(options, **{k: v for k, v in flags.items() if v is not None})
    budgets = tuple(b for b in (20, 50, 100, 200) if b <= args.budget)
    genetic = f"1 in {options.genetic_every}" if options.genetic_every else "off"
    switches = "on" if options.switches_first else "off"
    print(
        f"{args.repeats} repeats per cell, seeds {args.seed}..{args.seed + args.repeats - 1}; "
        f"gp: global step {options.global_step}, switches first {switches}, genetic steps {genetic}"
        f"{'; ' + options.describe() if options.describe() else ''}\n"
    )
    header = " | ".join(f"median @{b}" for b in budgets)
    print(f"| landscape | sampler | {header} | P(<=5%) @50 | evals to 5% | s/repeat |")
    print("|---|---|" + "---|" * (len(budgets) + 3))
    with ProcessPoolExecutor(args.jobs) as pool:
        for path in args.landscapes:
            landscape = _landscape(path)
            for sampler in args.samplers.split(","):
                start = time.perf_counter()
                seeds = range(args.seed, args.seed + args.repeats)
                n = len(seeds)
                traces = list(
                    pool.map(_replay, [path] * n, [sampler] * n, [args.budget] * n, seeds, [options] * n)
                )
                seconds = (time.perf_counter() - start) * args.jobs / args.repeats
                summary = summarise(landscape, traces, budgets)
                cells = " | ".join(f"{row['median']:.3f}" for row in summary["budgets"])
                at50 = next((row for row in summary["budgets"] if row["budget"] == 50), None)
                p5 = f"{at50['p_within_5']:.2f}" if at50 else "-"
                reach = summary["evaluations_to_5"]
                evals = (
                    reach["median"]
                    if reach["median"] is not None
                    else f">{args.budget} ({reach['reached']}/{reach['of']})"
                )
                row = f"| {Path(path).name} | {sampler} | {cells} | {p5} | {evals} | {seconds:.1f} |"
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
