#!/usr/bin/env python3
"""Compare samplers by replay on measured landscapes (no hardware needed), ours and,
with `--kernel-tuner`, Kernel Tuner's strategies on the same landscapes and seeds.

    python bench/replay_samplers.py [--landscapes ../shared/landscapes/*.json.gz]
                                    [--samplers gp,tpe-local,tpe,random] [--repeats 20] [--budget 100]
                                    [--budgets 20,50,100] [--seed 0] [--jobs 2] [--global-step mean|ei]
                                    [--switches-first on|off] [--genetic-every N] [--gp SETTINGS]
                                    [--kernel-tuner] [--kt-strategies a,b,...] [--json FILE]
                                    [--start-from-others [--start-points 5]]

Prints, per landscape and sampler, the median and the worst quartile (75th percentile)
of best found / optimum after each budget (20, 50 and 100 evaluations up to `--budget`
unless `--budgets` names them), P(within 5%) at 50, the median evaluations to reach 5%,
and the median evaluations a search used by the largest budget.
The gp options select the variants compared in BENCHMARKS.md; their defaults are the
defaults of `autotune search`. `--gp` takes any `SearchOptions` settings as
`key=value,...` (the three flags above override it). `bench/replay_loo.py` judges
variants landscape by landscape and across held-out groups.

`--kernel-tuner` (needs `pip install .[bench]`) adds Kernel Tuner's strategies
(`--kt-strategies`, default: every single-objective one that runs with what `.[bench]`
installs), run in its simulation mode on the same landscapes with the same seeds, and
ends with a table of each of our samplers against Kernel Tuner's best strategy per
landscape and budget. Evaluations are counted alike (autotune/replay_kernel_tuner.py
says how). Our samplers do not know the budget, so one run up to the largest budget
gives every budget; Kernel Tuner's strategies scale their schedules to `max_fevals`, so
they run once per budget. Run with `OPENBLAS_NUM_THREADS=1` on a busy machine.

`--start-from-others` adds, for each of our samplers, a row `<sampler>+others`: every
repeat starts from the fastest points of searches replayed on the other landscapes of
the same kernel in the list (other devices; never the landscape itself), as a search on
a new device starts from other devices' results in the database
(`autotune.replay.round_elsewhere`, `start_points`). A landscape with no such sibling
gets no such row.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

from autotune.replay import (
    START_BUDGET,
    START_POINTS,
    START_ROUNDS,
    Landscape,
    Trace,
    load,
    replay_once,
    round_elsewhere,
    same_kernel,
    starts_per_repeat,
    summarise,
)
from autotune.search import SearchOptions
from autotune.space import Config

KT = "kt:"  # prefix of Kernel Tuner's strategies in the tables


@cache
def _landscape(path: str) -> Landscape:
    return load(path)


def _replay(
    path: str, sampler: str, budget: int, seed: int, options: SearchOptions, first: Sequence[Config] = ()
) -> Trace:
    return replay_once(_landscape(path), sampler, budget, seed, options, first)


def _round_elsewhere(
    paths: list[str], sampler: str, seed: int, index: int, options: SearchOptions
) -> list[Trace]:
    return round_elsewhere([_landscape(p) for p in paths], sampler, START_BUDGET, seed, index, options)


def _kernel_tuner_replay(cache_path: str, strategy: str, budget: int, seed: int) -> tuple[Trace, float]:
    from autotune.replay_kernel_tuner import run_strategy

    start = time.perf_counter()
    trace, _ = run_strategy(Path(cache_path), strategy, budget, seed)
    return trace, time.perf_counter() - start


def _timed_replay(
    path: str, sampler: str, budget: int, seed: int, options: SearchOptions, first: Sequence[Config] = ()
) -> tuple[Trace, float]:
    start = time.perf_counter()
    trace = _replay(path, sampler, budget, seed, options, first)
    return trace, time.perf_counter() - start


def _row(
    landscape: Landscape, name: str, runs: dict[int, list[Trace]], budgets: tuple[int, ...]
) -> dict[str, Any]:
    """Figures of one sampler on one landscape; `runs` maps a budget to the runs judged at it."""
    cells = {b: summarise(landscape, runs[b], (b,))["budgets"][0] for b in budgets}
    last = runs[budgets[-1]]
    reach = summarise(landscape, last, (budgets[-1],))["evaluations_to_5"]
    return {
        "landscape": landscape.name,
        "sampler": name,
        "cells": {b: {"median": c["median"], "q3": c["q3"], "p5": c["p_within_5"]} for b, c in cells.items()},
        "evaluations_to_5": reach,
        "evaluations_used": statistics.median(len(t.best_after) for t in last),
    }


def _print_row(row: dict[str, Any], budgets: tuple[int, ...], seconds: float, largest: int) -> None:
    cells = " | ".join(f"{row['cells'][b]['median']:.3f} / {row['cells'][b]['q3']:.3f}" for b in budgets)
    p5 = f"{row['cells'][50]['p5']:.2f}" if 50 in row["cells"] else "-"
    reach = row["evaluations_to_5"]
    evals = reach["median"]
    if evals is None:
        evals = f">{largest} ({reach['reached']}/{reach['of']})"
    name = Path(row["landscape"]).name
    print(
        f"| {name} | {row['sampler']} | {cells} | {p5} | {evals} | {row['evaluations_used']:g} | "
        f"{seconds:.1f} |",
        flush=True,
    )


def _print_against_kernel_tuner(rows: list[dict[str, Any]], budgets: tuple[int, ...]) -> None:
    """Each of our samplers against Kernel Tuner's best strategy (lowest median, then
    lowest worst quartile) per landscape and budget."""
    ours = sorted({r["sampler"] for r in rows if not r["sampler"].startswith(KT)}, key=str)
    print("\nAgainst Kernel Tuner's best strategy per landscape (median / q3 of best found / optimum)\n")
    print("| landscape | budget | " + " | ".join(ours) + " | best Kernel Tuner strategy | its median / q3 |")
    print("|---|---|" + "---|" * (len(ours) + 2))
    for name in dict.fromkeys(r["landscape"] for r in rows):
        here = [r for r in rows if r["landscape"] == name]
        for b in budgets:
            theirs = [r for r in here if r["sampler"].startswith(KT)]
            best = min(theirs, key=lambda r: (r["cells"][b]["median"], r["cells"][b]["q3"]))
            mine = {r["sampler"]: r["cells"][b] for r in here if not r["sampler"].startswith(KT)}
            cells = " | ".join(f"{mine[s]['median']:.3f} / {mine[s]['q3']:.3f}" for s in ours)
            short = Path(name).name.removesuffix(".gz").removesuffix(".json")
            print(
                f"| {short} | {b} | {cells} | {best['sampler'][len(KT) :]} | "
                f"{best['cells'][b]['median']:.3f} / {best['cells'][b]['q3']:.3f} |",
                flush=True,
            )


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--landscapes", nargs="*", default=sorted(glob.glob(str(here.parent / "shared/landscapes/*.json.gz")))
    )
    parser.add_argument("--samplers", default="gp,tpe-local,tpe,random")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--budgets", default="", help="budgets reported, e.g. 50,100 (at most --budget)")
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
    parser.add_argument("--kernel-tuner", action="store_true", help="add Kernel Tuner's strategies")
    parser.add_argument("--kt-strategies", default="", help="Kernel Tuner strategies, a,b,... (default: all)")
    parser.add_argument(
        "--start-from-others",
        action="store_true",
        help="also run each sampler started from searches on the same kernel's other landscapes",
    )
    parser.add_argument(
        "--start-points", type=int, default=START_POINTS, help="fastest points from each search elsewhere"
    )
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    args = parser.parse_args()
    options = SearchOptions.parse(args.gp)
    flags = {
        "global_step": args.global_step,
        "switches_first": None if args.switches_first is None else args.switches_first == "on",
        "genetic_every": args.genetic_every,
    }
    options = dataclasses.replace(options, **{k: v for k, v in flags.items() if v is not None})
    if args.budgets:
        budgets = tuple(sorted(int(b) for b in args.budgets.split(",")))
        if budgets[-1] > args.budget:
            parser.error("--budgets must not exceed --budget")
    else:
        budgets = tuple(b for b in (20, 50, 100, 200) if b <= args.budget)
    strategies: list[str] = []
    if args.kernel_tuner:
        from autotune.replay_kernel_tuner import STRATEGIES, available_strategies

        strategies = args.kt_strategies.split(",") if args.kt_strategies else list(STRATEGIES)
        unknown = sorted(set(strategies) - set(available_strategies()))
        if unknown:
            parser.error(f"Kernel Tuner has no strategy {', '.join(unknown)}")
    samplers = [s for s in args.samplers.split(",") if s]
    genetic = f"1 in {options.genetic_every}" if options.genetic_every else "off"
    switches = "on" if options.switches_first else "off"
    seeds = list(range(args.seed, args.seed + args.repeats))
    print(
        f"{args.repeats} repeats per cell, seeds {seeds[0]}..{seeds[-1]}; "
        f"gp: global step {options.global_step}, switches first {switches}, genetic steps {genetic}"
        f"{'; ' + options.describe() if options.describe() else ''}"
    )
    print("cells: median / worst quartile (q3) of best found / optimum; kt: Kernel Tuner 1.5's strategies\n")
    header = " | ".join(f"@{b} median / q3" for b in budgets)
    print(f"| landscape | sampler | {header} | P(<=5%) @50 | evals to 5% | evals used | s/repeat |")
    print("|---|---|" + "---|" * (len(budgets) + 4))
    rows: list[dict[str, Any]] = []
    n = len(seeds)
    with ProcessPoolExecutor(args.jobs) as pool, tempfile.TemporaryDirectory() as folder:
        for path in args.landscapes:
            landscape = _landscape(path)
            others = []  # other devices' landscapes of the same kernel
            if args.start_from_others:
                others = [p for p in args.landscapes if p != path and same_kernel(landscape, _landscape(p))]
            for sampler in samplers:
                firsts: dict[str, list[list[Config]]] = {sampler: [[]] * n}
                if others:
                    k = min(n, START_ROUNDS)
                    rounds = [others] * k, [sampler] * k, [args.seed] * k, range(k), [options] * k
                    elsewhere = list(pool.map(_round_elsewhere, *rounds))
                    firsts[sampler + "+others"] = starts_per_repeat(elsewhere, n, args.start_points)
                for label, first in firsts.items():
                    started = [path] * n, [sampler] * n, [budgets[-1]] * n, seeds, [options] * n, first
                    done = list(pool.map(_timed_replay, *started))
                    traces = [trace for trace, _ in done]
                    row = _row(landscape, label, dict.fromkeys(budgets, traces), budgets)
                    rows.append(row)
                    _print_row(row, budgets, statistics.mean(s for _, s in done), budgets[-1])
            if strategies:
                from autotune.replay_kernel_tuner import write_cache

                cache_path = str(write_cache(landscape, Path(folder)))
                for strategy in strategies:
                    runs: dict[int, list[Trace]] = {}
                    spent: list[float] = []
                    for b in budgets:
                        done = list(
                            pool.map(_kernel_tuner_replay, [cache_path] * n, [strategy] * n, [b] * n, seeds)
                        )
                        runs[b] = [trace for trace, _ in done]
                        spent += [s for _, s in done]
                    row = _row(landscape, KT + strategy, runs, budgets)
                    rows.append(row)
                    _print_row(row, budgets, statistics.mean(spent), budgets[-1])
    if strategies and samplers:
        _print_against_kernel_tuner(rows, budgets)
    if args.json is not None:
        report = {"seeds": seeds, "budgets": budgets, "gp": options.describe(), "rows": rows}
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
