#!/usr/bin/env python3
"""Compare samplers by replay on measured landscapes (no hardware needed).

    python bench/replay_samplers.py [--landscapes ../shared/landscapes/*.json.gz]
                                    [--samplers gp,tpe-local,tpe,random] [--repeats 20] [--budget 100]
                                    [--genetic-every N]

Prints, per landscape and sampler, the median of best found / optimum after 20, 50
and 100 evaluations, P(within 5%) at 50, and the median evaluations to reach 5%.
"""

from __future__ import annotations

import argparse
import glob
import sys
import time
from pathlib import Path

from autotune import search
from autotune.replay import load, replay, summarise


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
    parser.add_argument(
        "--genetic-every",
        type=int,
        default=search.GENETIC_EVERY,
        help="gp: every Nth step is a genetic one; 0 (the default) turns them off",
    )
    args = parser.parse_args()
    search.GENETIC_EVERY = args.genetic_every
    budgets = tuple(b for b in (20, 50, 100, 200) if b <= args.budget)
    print(
        f"{args.repeats} repeats per cell, seeds {args.seed}..{args.seed + args.repeats - 1}, "
        f"gp's genetic steps: {f'1 in {args.genetic_every}' if args.genetic_every else 'off'}\n"
    )
    header = " | ".join(f"median @{b}" for b in budgets)
    print(f"| landscape | sampler | {header} | P(<=5%) @50 | evals to 5% | s/repeat |")
    print("|---|---|" + "---|" * (len(budgets) + 3))
    for path in args.landscapes:
        landscape = load(path)
        for sampler in args.samplers.split(","):
            start = time.perf_counter()
            traces = replay(landscape, sampler, args.budget, args.repeats, args.seed)
            seconds = (time.perf_counter() - start) / args.repeats
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
            print(f"| {Path(path).name} | {sampler} | {cells} | {p5} | {evals} | {seconds:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
