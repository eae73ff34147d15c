"""Kernel Tuner's strategies replayed on the same landscapes as ours, for a like-for-like
comparison (`bench/replay_samplers.py --kernel-tuner`; needs `pip install .[bench]`).

A landscape is written as a Kernel Tuner cache file holding every point of it, failed
points as Kernel Tuner writes its own failures (the string "RuntimeFailedConfig" as the
time). The space's restrictions are "the point is in the landscape", so Kernel Tuner's
space is exactly the landscape, failures included, as our replay's is. Evaluations are
counted alike on both sides: each point of the landscape the first time it is evaluated,
a failed one too (Kernel Tuner's `max_fevals` counts so); points outside the landscape
and repeats cost nothing. Several strategies stop before the budget with their default
settings: a run reports how many evaluations it used, and its best after the budget is
its best when it stopped.

Kernel Tuner's strategies draw from Python's and NumPy's global generators, which are
seeded before each run; its `bayes_opt` also draws its Latin hypercube start from a
fresh, unseeded generator, which is given one derived from the seed, so a run is
repeatable.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from autotune.errors import UsageError
from autotune.replay import Landscape, Trace

# Kernel Tuner 1.5's single-objective strategies that run with what `.[bench]` installs
# (brute_force walks the space in order; skopt and pyatf_strategies need other packages).
STRATEGIES = (
    "random_sample",
    "genetic_algorithm",
    "simulated_annealing",
    "pso",
    "firefly_algorithm",
    "greedy_ils",
    "greedy_mls",
    "ordered_greedy_mls",
    "mls",
    "diff_evo",
    "dual_annealing",
    "basinhopping",
    "minimize",
    "bayes_opt",
    "hybrid_vndx",
    "adaptive_tabu_greywolf",
)
FAILED = "RuntimeFailedConfig"  # how Kernel Tuner's cache marks a point that failed


def _key(point: tuple[Any, ...]) -> str:
    """Kernel Tuner's cache key: the values, as `str` writes them, joined by commas."""
    return ",".join(str(value) for value in point)


def write_cache(landscape: Landscape, folder: Path) -> Path:
    """The landscape as a Kernel Tuner cache file in `folder` (uncompressed, as it reads them)."""
    keys = list(landscape.space.knobs)
    cache = {}
    for point, time in landscape.values.items():
        record: dict[str, Any] = dict(zip(keys, point, strict=True))
        record["time"] = FAILED if time is None else time
        cache[_key(point)] = record
    data = {
        "device_name": "replayed landscape",
        "kernel_name": "replayed",
        "problem_size": [1],
        "tune_params_keys": keys,
        "tune_params": {name: list(knob.values) for name, knob in landscape.space.knobs.items()},
        "objective": "time",
        "cache": cache,  # last: Kernel Tuner checks the file ends with the cache's closing braces
    }
    stem = landscape.name.removesuffix(".gz").removesuffix(".json")
    path = folder / f"{stem}.json"
    path.write_text(json.dumps(data))
    return path


def available_strategies() -> tuple[str, ...]:
    """Every strategy name the installed Kernel Tuner knows."""
    return tuple(_kernel_tuner().interface.strategy_map)


def _kernel_tuner() -> Any:
    try:
        import kernel_tuner
        import kernel_tuner.interface
    except ImportError:
        raise UsageError("Kernel Tuner is not installed: pip install '.[bench]'") from None
    return kernel_tuner


def run_strategy(cache_path: Path, strategy: str, budget: int, seed: int) -> tuple[Trace, int]:
    """One simulated Kernel Tuner search of at most `budget` evaluations: the best time
    after each evaluation (as our replay records it) and the evaluations it used."""
    kernel_tuner = _kernel_tuner()
    from constraint import FunctionConstraint  # Kernel Tuner's constraint solver
    from kernel_tuner.strategies import bayes_opt
    from kernel_tuner.util import infer_args_from_cache, read_cache

    if strategy not in kernel_tuner.interface.strategy_map:
        known = ", ".join(kernel_tuner.interface.strategy_map)
        raise UsageError(f"Kernel Tuner has no strategy {strategy!r} (strategies: {known})")
    cached = read_cache(str(cache_path), open_cache=False)
    keys = cached["tune_params_keys"]
    in_landscape = {tuple(record[k] for k in keys) for record in cached["cache"].values()}
    random.seed(seed)
    np.random.seed(seed)
    latin = bayes_opt.LatinHypercube
    bayes_opt.LatinHypercube = functools.partial(latin, rng=np.random.default_rng(seed))
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            results, _ = kernel_tuner.tune_kernel(
                **infer_args_from_cache(cached),
                restrictions=[FunctionConstraint(lambda *values: values in in_landscape)],
                cache=str(cache_path),
                simulation_mode=True,
                strategy=strategy,
                strategy_options={"max_fevals": budget},
                quiet=True,
                seed=seed,
            )
    finally:
        bayes_opt.LatinHypercube = latin
    trace = Trace()
    seen: set[tuple[Any, ...]] = set()
    best = math.inf
    for result in results:
        point = tuple(result[k] for k in keys)
        if point in seen or point not in in_landscape:
            continue
        seen.add(point)
        time = result.get("time")
        if "__error__" not in result and isinstance(time, int | float) and math.isfinite(time):
            best = min(best, float(time))
        trace.best_after.append(best)
    return trace, len(trace.best_after)
