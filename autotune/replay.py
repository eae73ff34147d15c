"""Judge search strategies on fully measured landscapes, with no hardware.

A landscape maps every valid point of a space to its measured time (or a failure).
Replaying runs the same search engine that tunes kernels, but each evaluation is a
look-up: points absent from the landscape break the space's restrictions and are
rejected without counting (as invalid points are on a device); failed points count as
evaluations that failed. Reported per budget: best found / true optimum over repeats.

A search may start from other landscapes of the same kernel (`start_points`): the
fastest points a replayed search found on each, as a search on a new device starts
from what other devices measured (`tune/loop.py`). Those searches are replays too, so
the start points are what a real search there would have left in the database, not the
other landscape's true optimum.
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.errors import UsageError
from autotune.search import Search, SearchOptions, by_rank
from autotune.space import Config, Knob, SearchSpace

BUDGETS = (10, 20, 50, 100, 200)
MAX_REJECTIONS = 100_000


@dataclass
class Landscape:
    name: str
    space: SearchSpace
    values: dict[tuple[Any, ...], float | None]  # None: the point failed (compile or run time)

    @property
    def optimum(self) -> float:
        return min(v for v in self.values.values() if v is not None)

    def key(self, config: Config) -> tuple[Any, ...]:
        return tuple(config[name] for name in self.space.knobs)

    def look_up(self, config: Config) -> tuple[bool, float | None]:
        """(valid, time): invalid points are not in the landscape."""
        key = self.key(config)
        if key not in self.values:
            return False, None
        return True, self.values[key]


def _space(name: str, knobs: dict[str, list[Any]]) -> SearchSpace:
    space = SearchSpace(name, "replayed landscape", [], [], [])
    for knob, values in knobs.items():
        space.knobs[knob] = Knob(knob, tuple(values), values[0])
    return space


def load(path: str | Path) -> Landscape:
    """A Kernel Tuner cache file (gzipped or not) or a T4 results file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        text = gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else raw.decode()
        data = json.loads(text)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError, gzip.BadGzipFile) as exc:
        raise UsageError(f"{path} is not a readable landscape (JSON, optionally gzipped): {exc}") from None
    if isinstance(data, dict) and "cache" in data and "tune_params" in data:
        return _from_kernel_tuner(path.name, data)
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        return _from_t4(path.name, data)
    raise UsageError(f"{path} is neither a Kernel Tuner cache file nor T4 results")


def _from_kernel_tuner(name: str, data: dict[str, Any]) -> Landscape:
    """Kernel Tuner marks a failed point with a string as its time; any time that is not a
    finite number is taken as a failure too."""
    try:
        keys = list(data.get("tune_params_keys") or data["tune_params"])
        knobs = {k: data["tune_params"][k] for k in keys}
        for knob, knob_values in knobs.items():
            if not isinstance(knob_values, list):
                raise UsageError(f"{name}: the values of knob {knob!r} are not a list: {knob_values!r}")
        values: dict[tuple[Any, ...], float | None] = {}
        for record in data["cache"].values():
            point = tuple(record[k] for k in keys)
            time = record.get("time")
            values[point] = float(time) if _is_number(time) and math.isfinite(time) else None
    except (KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{name}: malformed Kernel Tuner cache ({exc!r})") from None
    return _checked(name, knobs, values)


def _from_t4(name: str, data: dict[str, Any]) -> Landscape:
    """A point's time is the median of its runtimes; a point that is not "correct", has no
    runtimes or has one that is not finite failed (as in Kernel Tuner caches)."""
    try:
        configs = [r["configuration"] for r in data["results"]]
        keys = list(configs[0]) if configs else []
        knobs = {k: sorted({c[k] for c in configs}, key=lambda v: (str(type(v)), v)) for k in keys}
        values: dict[tuple[Any, ...], float | None] = {}
        for record in data["results"]:
            point = tuple(record["configuration"][k] for k in keys)
            runtimes = record.get("times", {}).get("runtimes") or []
            if not isinstance(runtimes, list) or not all(_is_number(t) for t in runtimes):
                shown = dict(zip(keys, point, strict=True))
                raise UsageError(f"{name}: the runtimes of {shown} are not a list of numbers: {runtimes!r}")
            ok = record.get("invalidity") == "correct" and runtimes and all(map(math.isfinite, runtimes))
            if ok and min(runtimes) <= 0:  # a median above zero would hide it
                shown = dict(zip(keys, point, strict=True))
                raise UsageError(
                    f"{name}: {shown} has a runtime of {min(runtimes):g}: times must be positive"
                )
            values[point] = float(statistics.median(runtimes)) if ok else None
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise UsageError(f"{name}: malformed T4 results ({exc!r})") from None
    return _checked(name, knobs, values)


def _is_number(value: Any) -> bool:
    """JSON numbers only: `true` is no time."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _checked(
    name: str, knobs: dict[str, list[Any]], values: dict[tuple[Any, ...], float | None]
) -> Landscape:
    """Refuses a landscape no search can replay. Points with a value outside their knob's
    values can never be asked, so they are left out: an optimum among them would be one
    no search reaches."""
    if not values:
        raise UsageError(f"{name}: the landscape holds no successful measurement")
    if not knobs:
        raise UsageError(f"{name}: the landscape has no knobs")
    for knob, knob_values in knobs.items():
        if not knob_values:
            raise UsageError(f"{name}: knob {knob!r} has no values")
    for point, time in values.items():
        if time is not None and time <= 0:
            shown = dict(zip(knobs, point, strict=True))
            raise UsageError(f"{name}: {shown} has time {time:g}: times must be positive")
    inside = {
        point: time
        for point, time in values.items()
        if all(value in knob_values for value, knob_values in zip(point, knobs.values(), strict=True))
    }
    if not inside:
        raise UsageError(f"{name}: no measured point lies in the landscape's space (its knobs' values)")
    if all(time is None for time in inside.values()):
        raise UsageError(f"{name}: the landscape holds no successful measurement")
    return Landscape(name, _space(name, knobs), inside)


@dataclass
class Trace:
    """One replayed search: the best time after each evaluation."""

    best_after: list[float] = field(default_factory=list)
    measured: list[tuple[float, Config]] = field(default_factory=list)  # (time, point) of each that ran

    def best_at(self, budget: int) -> float:
        if not self.best_after:
            return math.inf
        return self.best_after[min(budget, len(self.best_after)) - 1]

    def evaluations_to(self, target: float) -> int | None:
        for i, best in enumerate(self.best_after, start=1):
            if best <= target:
                return i
        return None


def replay_once(
    landscape: Landscape,
    sampler: str,
    budget: int,
    seed: int,
    options: SearchOptions | None = None,
    first: Sequence[Config] = (),
    observe: Callable[[float], float] | None = None,
) -> Trace:
    """One search; `first` points are asked before the sampler's own (a warm start:
    those outside the landscape cost nothing, as invalid points do; those with a knob
    value the landscape does not have are left out). `observe`: what a measurement of a
    time reads (a device's noise); the sampler is told that, the trace keeps true times."""
    search = Search(landscape.space, sampler, seed, valid=lambda c: landscape.look_up(c)[0], options=options)
    knobs = landscape.space.knobs
    for config in first:  # a value this landscape never measured makes no point of it
        if all(config.get(name) in knob.values for name, knob in knobs.items()):
            search.enqueue(config)
    seen: dict[tuple[Any, ...], float | None] = {}
    trace = Trace()
    best = math.inf
    rejections = 0
    while len(trace.best_after) < budget and rejections < MAX_REJECTIONS and not search.exhausted:
        asked = search.ask()
        if asked is None:  # every valid point visited
            break
        trial, config = asked
        valid, value = landscape.look_up(config)
        if not valid:
            search.tell(trial, None)
            rejections += 1
            continue
        key = landscape.key(config)
        if key in seen:  # answered from what is already measured: no evaluation spent
            search.tell(trial, seen[key])
            rejections += 1
            continue
        told = value if value is None or observe is None else observe(value)
        seen[key] = told
        search.tell(trial, told)
        if value is not None:
            best = min(best, value)
            trace.measured.append((value, dict(config)))
        trace.best_after.append(best)
    return trace


def same_kernel(landscape: Landscape, other: Landscape) -> bool:
    """Whether `other` measured the same kernel's knobs (another device, or another
    sample of the same space): its points mean the same here."""
    return list(other.space.knobs) == list(landscape.space.knobs)


def fastest(trace: Trace, count: int) -> list[Config]:
    """The `count` fastest distinct points a replayed search measured."""
    return [config for _, config in sorted(trace.measured, key=lambda m: m[0])[:count]]


START_SEED = 1_000_000  # searches on other landscapes are seeded from here, apart from the repeats'
START_ROUNDS = 5  # rounds of searches on the other landscapes; repeat r starts from round r % 5
START_POINTS = 5  # fastest points taken from each search there
START_BUDGET = 100  # evaluations of each search there


def round_elsewhere(
    others: list[Landscape],
    sampler: str,
    budget: int,
    seed: int,
    index: int,
    options: SearchOptions | None = None,
) -> list[Trace]:
    """Round `index` of searches on the other landscapes: one replayed search of `budget`
    evaluations on each, seeded START_SEED + seed + index. Rounds are fewer than repeats
    (START_ROUNDS serve them all) to keep the cost of the other landscapes down."""
    return [replay_once(other, sampler, budget, START_SEED + seed + index, options) for other in others]


def start_points(searches: list[Trace], per_search: int) -> list[Config]:
    """The `per_search` fastest points of each search on another landscape, by rank."""
    return by_rank([fastest(trace, per_search) for trace in searches])


def starts_per_repeat(rounds: list[list[Trace]], repeats: int, per_search: int) -> list[list[Config]]:
    """Repeat r's start points: those of round r % len(rounds) (none without rounds)."""
    if not rounds:
        return [[] for _ in range(repeats)]
    return [start_points(rounds[r % len(rounds)], per_search) for r in range(repeats)]


def summarise(
    landscape: Landscape, traces: list[Trace], budgets: tuple[int, ...] = BUDGETS
) -> dict[str, Any]:
    optimum = landscape.optimum
    rows = []
    for budget in budgets:
        ratios = sorted(t.best_at(budget) / optimum for t in traces)
        rows.append(
            {
                "budget": budget,
                "median": statistics.median(ratios),
                "q1": _quantile(ratios, 0.25),
                "q3": _quantile(ratios, 0.75),
                "p_within_5": sum(r <= 1.05 for r in ratios) / len(ratios),
                "p_within_10": sum(r <= 1.10 for r in ratios) / len(ratios),
            }
        )
    reach = {}
    for label, factor in (("evaluations_to_5", 1.05), ("evaluations_to_10", 1.10)):
        counts = [t.evaluations_to(optimum * factor) for t in traces]
        found = sorted(c for c in counts if c is not None)
        reach[label] = {
            "median": statistics.median(found) if len(found) * 2 > len(counts) else None,
            "reached": len(found),
            "of": len(counts),
        }
    return {
        "landscape": landscape.name,
        "points": len(landscape.values),
        "optimum": optimum,
        "budgets": rows,
        **reach,
    }


def _quantile(sorted_values: list[float], q: float) -> float:
    position = q * (len(sorted_values) - 1)
    low, high = math.floor(position), math.ceil(position)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def replay(
    landscape: Landscape,
    sampler: str,
    budget: int,
    repeats: int,
    seed: int = 0,
    options: SearchOptions | None = None,
) -> list[Trace]:
    return [replay_once(landscape, sampler, budget, seed + r, options) for r in range(repeats)]
