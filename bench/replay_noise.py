#!/usr/bin/env python3
"""How much of a sampler's replayed result survives a GPU's measuring noise? Replays each
landscape with every measurement read as a GPU reads it and again exactly, same seeds, and
reports the true best found (each replay keeps the true time of every point it measured).

The noise is what `bench/measure_repeatability.py` measured on an H100 (2026-12-05): the
device runs at one of two speeds `--slow` apart (4.5%), for a few measurements at a time
(a two-state chain: fast -> slow with chance `--to-slow` a measurement, slow -> fast with
`--to-fast`; 0.2 and 0.3 give the 40% of measurements at the slow level seen there), and each
measurement has a jitter of `--jitter` (0.3%, relative, Gaussian).

    OPENBLAS_NUM_THREADS=1 python bench/replay_noise.py --seeds 70000-70019 --budgets 50,100 --jobs 2

`--naming` also reports the kernel each noisy search names under each rule of the final re-time
(the top three readings and any other within a window of the fastest, so many at most, ranked
exactly), at every budget (the smaller budgets' searches are replayed again, stopped there).
"""

from __future__ import annotations

import argparse
import glob
import random
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autotune.replay import Landscape, load, replay_once  # noqa: E402
from autotune.search import SearchOptions  # noqa: E402


class TwoLevels:
    """A measurement's reading: the true time at the device's level of the moment."""

    def __init__(self, seed: int, slow: float, to_slow: float, to_fast: float, jitter: float) -> None:
        self.rng = random.Random(seed)
        self.slow, self.to_slow, self.to_fast, self.jitter = slow, to_slow, to_fast, jitter
        self.is_slow = self.rng.random() < to_slow / (to_slow + to_fast)

    def __call__(self, time_ms: float) -> float:
        switch = self.to_fast if self.is_slow else self.to_slow
        if self.rng.random() < switch:
            self.is_slow = not self.is_slow
        level = 1.0 + self.slow if self.is_slow else 1.0
        return time_ms * level * (1.0 + self.rng.gauss(0.0, self.jitter))


#: (window, most) of the final re-time's rule: before 2026-12-05, and since.
RULES = {"2.5% / 8": (0.025, 8), "6% / 12": (0.06, 12)}


def named(readings: list[float], times: list[float], within: float, most: int, top: int = 3) -> float:
    """The true time of the kernel a search names when its re-time takes the `top` fastest
    readings and any other within `within` of the fastest, `most` in all, and ranks them
    exactly (the re-time in turns agrees with itself within 0.5%)."""
    order = sorted(range(len(readings)), key=readings.__getitem__)
    fastest = readings[order[0]]
    chosen = [i for rank, i in enumerate(order[:most]) if rank < top or readings[i] <= fastest * (1 + within)]
    return min(times[i] for i in chosen)


@cache
def _landscape(path: str) -> Landscape:
    """Each landscape read once a process (a process replays many searches of each)."""
    return load(path)


def _one(job: tuple) -> tuple[str, str, int, list[float], dict[str, float]]:
    path, sampler, seed, budget, noise = job
    landscape = _landscape(path)
    readings: list[float] = []
    observe = None
    if noise:
        device = TwoLevels(seed * 7919 + 1, *noise)

        def observe(time_ms: float) -> float:
            readings.append(device(time_ms))
            return readings[-1]

    trace = replay_once(landscape, sampler, budget, seed, SearchOptions(), observe=observe)
    times = [t for t, _ in trace.measured]
    names: dict[str, float] = {}
    if noise:
        names = {rule: named(readings, times, *a) / landscape.optimum for rule, a in RULES.items()}
        names["fastest measured"] = min(times) / landscape.optimum
    kind = "noisy" if noise else "exact"
    return landscape.name, kind, seed, [b / landscape.optimum for b in trace.best_after], names


def main() -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--landscapes",
        nargs="*",
        default=sorted(glob.glob(str(here.parent.parent / "shared/landscapes/*.json.gz"))),
    )
    parser.add_argument("--sampler", default="gp")
    parser.add_argument("--seeds", default="70000-70019")
    parser.add_argument("--budgets", default="50,100")
    parser.add_argument("--slow", type=float, default=0.045)
    parser.add_argument("--to-slow", type=float, default=0.2)
    parser.add_argument("--to-fast", type=float, default=0.3)
    parser.add_argument("--jitter", type=float, default=0.003)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument(
        "--naming", action="store_true", help="also what the noisy searches name, by each re-time rule"
    )
    args = parser.parse_args()
    if not args.landscapes:
        parser.error("no landscapes (--landscapes)")
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    budgets = [int(b) for b in args.budgets.split(",")]
    noise = (args.slow, args.to_slow, args.to_fast, args.jitter)
    jobs = [
        (p, args.sampler, s, budgets[-1], n) for p in args.landscapes for s in seeds for n in (None, noise)
    ]
    if args.naming:  # the same noisy searches stopped at each smaller budget: what each names there
        jobs += [(p, args.sampler, s, b, noise) for b in budgets[:-1] for p in args.landscapes for s in seeds]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(_one, jobs, chunksize=4))
    runs: dict[tuple[str, str], list[list[float]]] = {}
    names: dict[tuple[str, int, str], list[float]] = {}
    for (_, _, _, budget, _), (name, kind, _, ratios, named_by) in zip(jobs, results, strict=True):
        if budget == budgets[-1]:
            runs.setdefault((name, kind), []).append(ratios)
        for rule, ratio in named_by.items():
            names.setdefault((name, budget, rule), []).append(ratio)
    print(
        f"{args.sampler}, seeds {args.seeds}; noise: slow level +{args.slow:.1%}, fast->slow {args.to_slow}, "
        f"slow->fast {args.to_fast}, jitter {args.jitter:.1%}\n"
    )
    header = " | ".join(f"@{b} exact | @{b} noisy" for b in budgets)
    print(f"| landscape | {header} | P(<= 5%) @{budgets[0]} exact / noisy |")
    print("|---|" + "---|" * (2 * len(budgets) + 1))
    for name in sorted({n for n, _ in runs}):
        cells = []
        for budget in budgets:
            for kind in ("exact", "noisy"):
                at = [r[min(budget, len(r)) - 1] for r in runs[(name, kind)]]
                cells.append(f"{statistics.median(at):.3f}")
        share = [
            statistics.fmean(r[min(budgets[0], len(r)) - 1] <= 1.05 for r in runs[(name, kind)])
            for kind in ("exact", "noisy")
        ]
        print(f"| {name} | {' | '.join(cells)} | {share[0]:.2f} / {share[1]:.2f} |")
    if args.naming:
        _print_naming(names, budgets, sorted({n for n, _ in runs}))
    return 0


def _print_naming(names: dict[tuple[str, int, str], list[float]], budgets: list[int], landscapes) -> None:
    """What the noisy searches name, by re-time rule: true time / optimum (median over seeds)
    and the share of searches that name a kernel slower than the fastest they measured."""
    print(
        "\nThe kernel a noisy search names, by the re-time's rule: true time / optimum (median over "
        "seeds); in brackets the share of searches naming a kernel slower than the fastest they measured\n"
    )
    header = " | ".join(f"@{b} {rule}" for b in budgets for rule in ("fastest measured", *RULES))
    print(f"| landscape | {header} |")
    print("|---|" + "---|" * (len(budgets) * (len(RULES) + 1)))
    missed_all: dict[tuple[int, str], list[bool]] = {}
    for name in landscapes:
        cells = []
        for budget in budgets:
            best = names.get((name, budget, "fastest measured"), [])
            cells.append(f"{statistics.median(best):.3f}" if best else "-")
            for rule in RULES:
                at = names.get((name, budget, rule), [])
                missed = [a > b * (1 + 1e-9) for a, b in zip(at, best, strict=True)]
                missed_all.setdefault((budget, rule), []).extend(missed)
                cells.append(f"{statistics.median(at):.3f} ({statistics.fmean(missed):.0%})" if at else "-")
        print(f"| {name} | {' | '.join(cells)} |")
    shares = ", ".join(
        f"@{budget} {rule}: {statistics.fmean(m):.1%}" for (budget, rule), m in missed_all.items() if m
    )
    print(f"\nSearches naming a kernel slower than the fastest they measured, all landscapes: {shares}")


if __name__ == "__main__":
    sys.exit(main())
