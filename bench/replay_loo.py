#!/usr/bin/env python3
"""Judge search variants landscape by landscape, by their worst case, and on held-out groups.

    python bench/replay_loo.py [--landscapes ../shared/landscapes/*.json.gz]
                               [--variants gp tpe random "gp:restart_after=12"]
                               [--seeds 1000-1019] [--budgets 50,100]
                               [--hold-out kernel,gpu] [--tune-seeds 500-509]
                               [--jobs 1] [--cache FILE] [--json FILE]

A variant is a sampler name, optionally followed by `:` and `gp` settings
(`autotune.search.SearchOptions`, `key=value,...`). For every variant and landscape it
prints the median and the worst quartile (75th percentile) of best found / optimum
after each budget over the seeds, and P(<= 5%) at the first budget; then per variant the
worst landscape, the worst quartile over all landscapes and the geometric mean of the
medians; then each variant paired with the first, seed by seed: on how many seeds only
one of the two got within 5% at the first budget, and a sign test on those.

`--hold-out kernel` (or `gpu`, or both) adds a leave-one-group-out check. For each
group (landscapes of one kernel, or of one GPU) the variant is chosen on the other
landscapes only, with the `--tune-seeds` (the variant with the lowest worst median;
ties: lowest worst quartile, then geometric mean), and judged on the held-out group
with `--seeds`, both after `--choose-at` evaluations (50). So a setting is never judged
on a landscape or a seed it was chosen on. Landscapes are grouped by their file
names, `<kernel>_<gpu>.json.gz` (an `old_` before the GPU is dropped): any other
measured landscape named that way joins the groups.

`--cache FILE` keeps every replayed run (JSON lines), so a second call with more
variants or other groups replays only what is new. Runs are deterministic per
(variant, landscape, seed).

Run it with `OPENBLAS_NUM_THREADS=1`: the model's matrices are small, and on a busy
2-core machine threaded BLAS made each proposal 10-20 times slower (same results).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import statistics
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

from autotune.replay import Landscape, _quantile, load, replay_once
from autotune.search import SAMPLERS, SearchOptions

# (variant, landscape, seed) -> (budget asked, best found / optimum after each evaluation)
Runs = dict[tuple[str, str, int], tuple[int, list[float]]]


def seeds_of(text: str) -> list[int]:
    """`1000-1019` or `1,2,5-7`."""
    seeds: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        seeds += range(int(low), int(high or low) + 1)
    return seeds


def variant_of(spec: str) -> tuple[str, SearchOptions]:
    sampler, _, settings = spec.partition(":")
    if sampler not in SAMPLERS:
        raise SystemExit(f"unknown sampler {sampler!r} in {spec!r} (samplers: {', '.join(SAMPLERS)})")
    if settings and sampler != "gp":
        raise SystemExit(f"settings apply to gp only: {spec!r}")
    return sampler, SearchOptions.parse(settings)


def groups_of(name: str) -> dict[str, str]:
    stem = name.removesuffix(".gz").removesuffix(".json")
    kernel, _, gpu = stem.partition("_")
    return {"kernel": kernel, "gpu": gpu.removeprefix("old_") or stem}


@cache
def _landscape(path: str) -> Landscape:
    return load(path)


def _replay(spec: str, path: str, seed: int, budget: int) -> tuple[list[float], float]:
    landscape = _landscape(path)
    sampler, options = variant_of(spec)
    start = time.perf_counter()
    trace = replay_once(landscape, sampler, budget, seed, options)
    optimum = landscape.optimum
    ratios = [round(b / optimum, 6) if math.isfinite(b) else math.inf for b in trace.best_after]
    return ratios, time.perf_counter() - start


def gather(
    specs: Iterable[str],
    paths: list[str],
    seeds: Iterable[int],
    budget: int,
    jobs: int,
    cache_path: Path | None,
) -> tuple[Runs, dict[str, float]]:
    """Every (variant, landscape, seed) run, from the cache where it is there; seconds per run."""
    runs: Runs = {}
    if cache_path is not None and cache_path.exists():
        for line in cache_path.read_text().splitlines():
            row = json.loads(line)
            key = (row["variant"], row["landscape"], row["seed"])
            if row["budget"] >= runs.get(key, (0, []))[0]:
                runs[key] = (row["budget"], row["ratios"])
    names = {path: Path(path).name for path in paths}
    todo = [
        (spec, path, seed)
        for spec in specs
        for path in paths
        for seed in seeds
        if runs.get((spec, names[path], seed), (0, []))[0] < budget
    ]
    seconds: dict[str, list[float]] = {}
    if todo:
        out = cache_path.open("a") if cache_path is not None else None
        with ProcessPoolExecutor(jobs) as pool:
            done = pool.map(_replay, *zip(*todo, strict=True), [budget] * len(todo))
            for (spec, path, seed), (ratios, spent) in zip(todo, done, strict=True):
                runs[(spec, names[path], seed)] = (budget, ratios)
                seconds.setdefault(spec, []).append(spent)
                if out is not None:
                    row = {"variant": spec, "landscape": names[path], "seed": seed}
                    row |= {"budget": budget, "ratios": ratios}
                    out.write(json.dumps(row) + "\n")
                    out.flush()
        if out is not None:
            out.close()
    return runs, {spec: statistics.mean(s) for spec, s in seconds.items()}


def at(ratios: list[float], budget: int) -> float:
    return ratios[min(budget, len(ratios)) - 1] if ratios else math.inf


def cell(runs: Runs, spec: str, landscape: str, seeds: list[int], budget: int) -> dict[str, float]:
    values = sorted(at(runs[(spec, landscape, s)][1], budget) for s in seeds)
    return {
        "median": statistics.median(values),
        "q3": _quantile(values, 0.75),
        "p5": sum(v <= 1.05 for v in values) / len(values),
    }


def overall(cells: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Worst landscape by median, worst quartile over landscapes, geometric mean of medians."""
    worst = max(cells, key=lambda name: (cells[name]["median"], cells[name]["q3"]))
    return {
        "worst": worst,
        "worst_median": cells[worst]["median"],
        "worst_q3": max(c["q3"] for c in cells.values()),
        "geomean": math.exp(statistics.mean(math.log(c["median"]) for c in cells.values())),
    }


def wilson(share: float, count: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson interval of a share of `count` searches: with P(<= 5%) near one half,
    20 seeds leave it about +-0.2 wide, so a median over them flips between seed sets."""
    centre = (share + z * z / (2 * count)) / (1 + z * z / count)
    half = z * math.sqrt(share * (1 - share) / count + z * z / (4 * count * count)) / (1 + z * z / count)
    return max(0.0, centre - half), min(1.0, centre + half)


def paired(
    runs: Runs, base: str, spec: str, landscape: str, seeds: list[int], budget: int
) -> tuple[int, int]:
    """(seeds within 5% at `budget` with `spec` and not with `base`, the reverse). Both
    searches of a seed share their start points and often their first steps, so most seeds
    end alike; the seeds where they differ carry the comparison, with far less noise than
    two shares of 20-40 seeds each."""
    gained = lost = 0
    for seed in seeds:
        mine = at(runs[(spec, landscape, seed)][1], budget)
        theirs = at(runs[(base, landscape, seed)][1], budget)
        gained += mine <= 1.05 < theirs
        lost += theirs <= 1.05 < mine
    return gained, lost


def sign_test(gained: int, lost: int) -> float:
    """Two-sided exact sign test on the seeds where two variants differ: how often a split
    at least this uneven comes by chance when neither variant is better."""
    count = gained + lost
    if not count:
        return 1.0
    tail = sum(math.comb(count, k) for k in range(min(gained, lost) + 1)) / 2**count
    return min(1.0, 2 * tail)


def _short(name: str) -> str:
    return name.removesuffix(".gz").removesuffix(".json")


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--landscapes", nargs="*", default=sorted(glob.glob(str(here.parent / "shared/landscapes/*.json.gz")))
    )
    parser.add_argument("--variants", nargs="*", default=["gp", "tpe", "random"])
    parser.add_argument("--seeds", default="1000-1019", help="judging seeds, e.g. 1000-1019")
    parser.add_argument("--budgets", default="50,100")
    parser.add_argument("--hold-out", default="", help="kernel, gpu or kernel,gpu: leave-one-group-out")
    parser.add_argument("--tune-seeds", default="", help="seeds the held-out choice is made on")
    parser.add_argument("--choose-at", type=int, default=50, help="budget the held-out choice looks at")
    parser.add_argument("--jobs", type=int, default=1, help="replays run in this many processes")
    parser.add_argument("--cache", type=Path, default=None, help="JSON-lines file of replayed runs")
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    args = parser.parse_args()
    if not args.landscapes:
        parser.error("no landscapes (--landscapes)")
    for spec in args.variants:
        variant_of(spec)
    budgets = sorted(int(b) for b in args.budgets.split(","))
    seeds = seeds_of(args.seeds)
    tune_seeds = seeds_of(args.tune_seeds) if args.tune_seeds else seeds
    hold_out = [g for g in args.hold_out.split(",") if g]
    for group in hold_out:
        if group not in ("kernel", "gpu"):
            parser.error(f"--hold-out takes kernel and/or gpu, not {group!r}")
    names = [Path(p).name for p in args.landscapes]
    all_seeds = sorted(set(seeds) | (set(tune_seeds) if hold_out else set()))
    runs, seconds = gather(args.variants, args.landscapes, all_seeds, budgets[-1], args.jobs, args.cache)

    report: dict[str, Any] = {"seeds": seeds, "budgets": budgets, "variants": {}}
    print(f"judging seeds {args.seeds} ({len(seeds)} per cell); cells: median / worst quartile (q3)")
    print("of best found / optimum; P(<=5%) at the first budget (95% interval)\n")
    heads = " | ".join(f"@{b} median / q3" for b in budgets)
    print(f"| landscape | variant | {heads} | P(<=5%) @{budgets[0]} |")
    print("|---|---|" + "---|" * (len(budgets) + 1))
    table: dict[str, dict[int, dict[str, dict[str, float]]]] = {}
    for spec in args.variants:
        table[spec] = {b: {n: cell(runs, spec, n, seeds, b) for n in names} for b in budgets}
    for name in names:
        for spec in args.variants:
            cells = " | ".join(
                f"{table[spec][b][name]['median']:.3f} / {table[spec][b][name]['q3']:.3f}" for b in budgets
            )
            share = table[spec][budgets[0]][name]["p5"]
            low, high = wilson(share, len(seeds))
            print(f"| {_short(name)} | {spec} | {cells} | {share:.2f} ({low:.2f}-{high:.2f}) |")
    print()
    print("| variant | budget | worst median (landscape) | worst q3 | geometric mean of medians | s/run |")
    print("|---|---|---|---|---|---|")
    for spec in args.variants:
        report["variants"][spec] = {"cells": table[spec], "overall": {}}
        for b in budgets:
            summary = overall(table[spec][b])
            report["variants"][spec]["overall"][b] = summary
            spent = f"{seconds[spec]:.2f}" if spec in seconds else "-"
            print(
                f"| {spec} | {b} | {summary['worst_median']:.3f} ({_short(summary['worst'])}) | "
                f"{summary['worst_q3']:.3f} | {summary['geomean']:.3f} | {spent} |"
            )

    if len(args.variants) > 1:
        base, first = args.variants[0], budgets[0]
        print(
            f"\nPaired by seed against {base} @{first}: seeds within 5% with the variant only / with "
            f"{base} only, and the two-sided sign test's p on them\n"
        )
        print(f"| landscape | variant | variant only | {base} only | p |")
        print("|---|---|---|---|---|")
        for spec in args.variants[1:]:
            totals = [0, 0]
            report["variants"][spec]["paired"] = {}
            for name in names:
                gained, lost = paired(runs, base, spec, name, seeds, first)
                totals[0], totals[1] = totals[0] + gained, totals[1] + lost
                report["variants"][spec]["paired"][name] = {"gained": gained, "lost": lost}
                print(f"| {_short(name)} | {spec} | {gained} | {lost} | {sign_test(gained, lost):.2f} |")
            print(f"| all | {spec} | {totals[0]} | {totals[1]} | {sign_test(*totals):.2f} |")

    for kind in hold_out:
        first = args.choose_at if args.choose_at in budgets else budgets[0]
        groups = sorted({groups_of(n)[kind] for n in names})
        print(
            f"\nHeld out by {kind}: the variant is chosen on the other landscapes with seeds "
            f"{args.tune_seeds or args.seeds}, judged on the group with seeds {args.seeds} (@{first})\n"
        )
        print(
            f"| held out | landscapes | chosen | worst median / q3 | {args.variants[0]}: worst median / q3 |"
        )
        print("|---|---|---|---|---|")
        folds = []
        for group in groups:
            inside = [n for n in names if groups_of(n)[kind] == group]
            outside = [n for n in names if n not in inside]
            if not outside:
                continue

            def score(spec: str, outside: list[str] = outside, first: int = first) -> tuple[float, ...]:
                cells = {n: cell(runs, spec, n, tune_seeds, first) for n in outside}
                summary = overall(cells)
                return summary["worst_median"], summary["worst_q3"], summary["geomean"]

            chosen = min(args.variants, key=score)
            judged = overall({n: table[chosen][first][n] for n in inside})
            base = overall({n: table[args.variants[0]][first][n] for n in inside})
            folds.append({"group": group, "landscapes": inside, "chosen": chosen, "judged": judged})
            print(
                f"| {group} | {len(inside)} | {chosen} | "
                f"{judged['worst_median']:.3f} / {judged['worst_q3']:.3f} | "
                f"{base['worst_median']:.3f} / {base['worst_q3']:.3f} |"
            )
        report[f"hold_out_{kind}"] = folds
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
