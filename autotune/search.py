"""The search engine: Optuna's ask/tell loop over any declared SearchSpace.

It knows nothing about kernels: an objective is whatever the caller measures, so the
same engine tunes kernels on a device and replays measured landscapes. Knobs are
encoded as the index of their value (ordinal), which every Optuna sampler, CMA-ES
included, understands; for `gp` they are the values themselves (categorical), as a
shared study declares them, and `gp`'s own model orders them.

Given a validity test, `ask` only returns valid points: an invalid proposal is told to
the sampler as failed (marked `skipped`) and repaired to a valid, unvisited point that
differs from it in as few knobs as possible. Points asked and not told yet are in
flight: they are never asked again, and a point measured already is answered from
what is known, with nothing spent.

`gp` (the default) is `autotune.samplers.GPSampler`, an Optuna sampler whose settings
are a `SearchOptions`, passed to `Search` (and to the tuner and the replay engine)
rather than set module-wide. `tpe-local` is TPE followed by a random walk over
one-knob neighbours of the best point. BENCHMARKS.md has the replay comparison behind
the choice.
"""

from __future__ import annotations

import logging
import math
import random
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna

from autotune.errors import UsageError
from autotune.samplers import GPSampler, knobs_apart, one_knob_neighbours
from autotune.search_options import SearchOptions
from autotune.space import Config, SearchSpace

SAMPLERS = ("gp", "tpe-local", "tpe", "random", "cmaes", "grid")
DEFAULT_SAMPLER = "gp"
STARTUP_TRIALS = 10  # TPE's random start (tpe, tpe-local)
MAX_ASKS = 10_000
# Random draws a repair makes when stepping one knob at a time found nothing (about
# 1.2 s of rule checks for the separable space). 4 in 20,000 points are valid there on a
# GPU (`bench/repair_rare_points.py`), so 20,000 draws missed about one repair in 55;
# 60,000 miss about one in 160,000.
REPAIR_DRAWS = 60_000


optuna.logging.set_verbosity(logging.ERROR)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", message=".*warn_independent_sampling.*", category=FutureWarning)


def by_rank(lists: list[list[Config]], limit: int | None = None) -> list[Config]:
    """Start points from several sources (other devices, other landscapes), each list
    fastest first: every list's first, then every list's second, ...; a point twice
    only once; at most `limit`. No source's slow points come before another's fast ones."""
    points: list[Config] = []
    for rank in range(max(map(len, lists), default=0)):
        for found in lists:
            if rank < len(found) and found[rank] not in points:
                points.append(found[rank])
    return points[:limit]


# Optuna's grid sampler lists every point of the grid up front: beyond this many, memory
# runs out long before a search could visit them (the convolution space has ~850 million).
GRID_LIMIT = 1_000_000


def check_grid(space: SearchSpace) -> None:
    """Refuse a grid search of a space too large to list."""
    points = math.prod(len(k.values) for k in space.knobs.values())
    if points > GRID_LIMIT:
        raise UsageError(
            f"the grid of {space.name} has {points:,} points, more than a grid search can list "
            f"({GRID_LIMIT:,}): use --sampler gp, tpe or random"
        )


class SpentGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler without its stop once the grid is spent: `study.stop()` works
    inside `Study.optimize` only, and here the search loop asks and tells itself and ends a
    spent grid by `Search.exhausted` (the stop raised instead, ending the search in an error)."""

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        return None


def make_sampler(name: str, seed: int, space: SearchSpace) -> optuna.samplers.BaseSampler:
    """Optuna's samplers by name (`gp` is built by `Search`, which knows its validity test)."""
    if name in ("tpe", "tpe-local"):
        # constant_liar: points still being compiled/timed count as taken, so a
        # pipeline of asks does not propose the same point several times.
        return optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=STARTUP_TRIALS, multivariate=True, constant_liar=True
        )
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    if name == "grid":
        check_grid(space)
        grid = {k.name: list(range(len(k.values))) for k in space.knobs.values()}
        return SpentGridSampler(grid, seed=seed)
    raise UsageError(f"unknown sampler {name!r} (samplers: {', '.join(SAMPLERS)})")


# Points a repair steered by rule counts carries to its next step. With 20, repairs of the
# CPU streaming layout on a GPU's separable space found nothing by steps or draws in 5-11 of
# 40 (ties in the count crowd the right points out); with 200, none (bench/repair_rare_points.py).
REPAIR_BEAM = 200


def next_bases(changed: list, rng: random.Random, counts: list[int] | None) -> list:
    """Where a repair looks next, one knob further: `REPAIR_BEAM` of the points it just
    tried, those breaking the fewest rules (`counts`, each point's), where that is known
    (ties in `changed`'s shuffled order), so a point several knobs from every valid one (a
    CPU layout proposed on a GPU) is still repaired; else 20 at random (replays, whose
    spaces have no rules)."""
    if counts is None:
        return rng.sample(changed, min(len(changed), 20))
    fewest = sorted(range(len(changed)), key=counts.__getitem__)[:REPAIR_BEAM]
    return [changed[i] for i in fewest]


def nearest_by_draws(
    point: tuple[int, ...], sizes: list[int], usable: Callable[[tuple[int, ...]], bool], rng: random.Random
) -> tuple[int, ...] | None:
    """The usable point, among `REPAIR_DRAWS` random ones, that differs from `point` in
    the fewest knobs. A repair's step after the one-knob steps: where the rules tie knobs
    together (the streaming form and `x_vector`, say) the points breaking the fewest rules
    can form a plateau that one-knob steps do not leave, while a random draw lands on a
    valid point often enough (4 in 20,000 for the separable space on the H200 at F = 9:
    `bench/repair_rare_points.py`)."""
    best: tuple[int, tuple[int, ...]] | None = None
    for _ in range(REPAIR_DRAWS):
        candidate = tuple(rng.randrange(n) for n in sizes)
        distance = knobs_apart(candidate, point)
        if (best is None or distance < best[0]) and usable(candidate):
            best = (distance, candidate)
    return None if best is None else best[1]


def nearest_next_to_known(
    point: tuple[int, ...],
    known: list[tuple[int, ...]],
    sizes: list[int],
    usable: Callable[[tuple[int, ...]], bool],
) -> tuple[int, ...] | None:
    """The usable point nearest `point` among the one-knob neighbours of points known
    to be valid (measured, or asked and in flight). The repair's last resort: where
    valid points are rare (about 1 in 20,000 of the separable space at F = 33, rank 2 on
    the H200) its steps and draws can all miss, and real searches there ended after 8 or
    9 of 30-40 trials, while a valid point's neighbours often are valid."""
    candidates = {c for base in known for c in one_knob_neighbours(base, sizes)}
    ordered = sorted(candidates, key=lambda c: (knobs_apart(c, point), c))
    return next((c for c in ordered if usable(c)), None)


def repair_point(
    point: tuple[int, ...],
    sizes: list[int],
    usable: Callable[[tuple[int, ...]], bool],
    rng: random.Random,
    violations: Callable[[tuple[int, ...]], int] | None,
    known: Callable[[], list[tuple[int, ...]]],
) -> tuple[int, ...] | None:
    """The usable point nearest `point`: one knob changed, then two, ... (`next_bases`);
    else the nearest among random draws; else the nearest free neighbour of a `known`
    valid point. What `Search` and the shared search both do with a point they cannot use."""
    current, tried = [point], {point}
    for _ in range(len(sizes)):
        changed = [neighbour for base in current for neighbour in one_knob_neighbours(base, sizes)]
        if violations is not None:  # each point checked once: the rules cost ~20 us a point
            changed = [c for c in dict.fromkeys(changed) if c not in tried]
            tried.update(changed)
        rng.shuffle(changed)
        if violations is None:
            found = next((c for c in changed if usable(c)), None)
            counts = None
        else:
            found, counts = None, []
            for candidate in changed:
                counts.append(violations(candidate))
                if counts[-1] == 0 and usable(candidate):
                    found = candidate
                    break
        if found is not None:
            return found
        current = next_bases(changed, rng, counts)
    drawn = nearest_by_draws(point, sizes, usable, rng)
    return drawn if drawn is not None else nearest_next_to_known(point, known(), sizes, usable)


class Search:
    """One search over one space, for one problem; history can be added up front."""

    def __init__(
        self,
        space: SearchSpace,
        sampler: str = DEFAULT_SAMPLER,
        seed: int = 0,
        valid: Callable[[Config], bool] | None = None,
        options: SearchOptions | None = None,
        violations: Callable[[Config], int] | None = None,
        live_values: Mapping[str, Sequence[Any]] | None = None,
    ) -> None:
        """`violations` (optional): how many rules a point breaks, which steers repairs
        toward valid points when they lie several knobs away. `live_values` (optional,
        `SearchSpace.live_values`): the values each knob can take for the problem; `gp`
        models those only (a knob no valid point can switch is no switch to it, and its
        random candidates are not spent on values no rule allows)."""
        self.space = space
        self.violations = violations
        self.options = options or SearchOptions()
        self.sampler_name = sampler
        self.valid = valid or (lambda config: True)
        self.by_value = sampler == "gp"  # gp's trials hold the knobs' values, not their indices
        self.distributions: dict[str, optuna.distributions.BaseDistribution] = {
            k.name: optuna.distributions.CategoricalDistribution(k.values)
            if self.by_value
            else optuna.distributions.IntDistribution(0, len(k.values) - 1)
            for k in space.knobs.values()
        }
        if sampler == "gp":
            self.gp: GPSampler | None = GPSampler(
                self.distributions,
                live_values=live_values,
                valid=lambda params: self.valid(self.decode(params)),
                options=self.options,
                seed=seed,
            )
            chosen: optuna.samplers.BaseSampler = self.gp
        else:
            self.gp = None
            chosen = make_sampler(sampler, seed, space)
        self.study = optuna.create_study(direction="minimize", sampler=chosen)
        self.random = random.Random(seed)
        self.visited: dict[tuple[int, ...], float | None] = {}
        self.in_flight: set[tuple[int, ...]] = set()  # asked, not told yet (compiling ahead)
        self.best: tuple[float, tuple[int, ...]] | None = None
        self.sizes = [len(k.values) for k in space.knobs.values()]
        self._names = list(space.knobs)
        self._values = [k.values for k in space.knobs.values()]

    # -- encoding ------------------------------------------------------------

    def encode(self, config: Config) -> dict[str, Any]:
        """The study's parameters (value indices, or values for gp); knobs the config
        predates take their defaults."""
        return self._params(self._point(self.space.complete(config), by_value=True))

    def decode(self, params: dict[str, Any]) -> Config:
        if self.by_value:  # the study's distributions hold only the knobs' values
            return {name: params[name] for name in self.space.knobs}
        point = self._point(params)
        return {name: knob.values[i] for (name, knob), i in zip(self.space.knobs.items(), point, strict=True)}

    def _point(self, params: dict[str, Any], by_value: bool | None = None) -> tuple[int, ...]:
        """Each knob's value index."""
        if by_value if by_value is not None else self.by_value:
            return tuple(knob.values.index(params[name]) for name, knob in self.space.knobs.items())
        return tuple(int(params[name]) for name in self.space.knobs)

    def _params(self, point: tuple[int, ...]) -> dict[str, Any]:
        if self.by_value:
            return {
                name: knob.values[i] for (name, knob), i in zip(self.space.knobs.items(), point, strict=True)
            }
        return dict(zip(self.space.knobs, point, strict=True))

    # -- the loop ------------------------------------------------------------

    def add_history(self, config: Config, value: float | None) -> None:
        """A point measured before (another run, a resumed run): the sampler learns from it."""
        params = self.encode(config)
        state = optuna.trial.TrialState.COMPLETE if value is not None else optuna.trial.TrialState.FAIL
        self.study.add_trial(
            optuna.trial.create_trial(
                params=params, distributions=self.distributions, value=value, state=state
            )
        )
        self._note(self._point(params), value)

    def enqueue(self, config: Config) -> None:
        self.study.enqueue_trial(self.encode(config), skip_if_exists=False)

    def ask(self) -> tuple[optuna.trial.Trial, Config] | None:
        """The next point to measure: valid and not measured yet; None when none is left."""
        if self.sampler_name == "tpe-local" and self._started():
            neighbour = self._unvisited_neighbour()
            if neighbour is not None:
                self.study.enqueue_trial(self._params(neighbour))
        for _ in range(MAX_ASKS):
            trial = self.study.ask(self.distributions)
            config = self.decode(trial.params)
            point = self._point(trial.params)
            if point in self.visited:
                # Measured already: the sampler hears the known answer, nothing is spent.
                self._tell_study(trial, self.visited[point])
            elif point in self.in_flight:
                self._skip(trial, "taken")
            elif self.valid(config):
                self.in_flight.add(point)
                return trial, config
            else:
                self._skip(trial, "invalid")
            # Repair: the nearest valid point not yet visited.
            repaired = self._repair(point)
            if repaired is None or self.exhausted:
                return None
            self.study.enqueue_trial(self._params(repaired))
        return None

    def tell(self, trial: optuna.trial.Trial, value: float | None, record: Any = None) -> None:
        """`value`: the point's time, None for a failure (`record`, the stored trial, is
        for searches that keep it; this one needs only the time)."""
        self._tell_study(trial, value)
        self._note(self._point(trial.params), value)

    def release(self, trial: optuna.trial.Trial) -> None:
        """A point asked and not to be measured (a stop, an error): no longer in flight,
        nothing learnt."""
        self.in_flight.discard(self._point(trial.params))
        self._skip(trial, "released")

    def _skip(self, trial: optuna.trial.Trial, why: str) -> None:
        """A proposal given up, no measurement: samplers that read `skipped` ignore it."""
        trial.set_user_attr("skipped", why)
        self.study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def _tell_study(self, trial: optuna.trial.Trial, value: float | None) -> None:
        if value is None:
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, value)

    @property
    def exhausted(self) -> bool:
        """Grid search has visited every point."""
        sampler = self.study.sampler
        return isinstance(sampler, optuna.samplers.GridSampler) and sampler.is_exhausted(self.study)

    # -- helpers -------------------------------------------------------------

    def _note(self, point: tuple[int, ...], value: float | None) -> None:
        self.in_flight.discard(point)
        self.visited[point] = value
        if value is not None and (self.best is None or value < self.best[0]):
            self.best = (value, point)

    def _started(self) -> bool:
        return self.best is not None and len(self.visited) >= STARTUP_TRIALS

    def _config_of(self, point: tuple[int, ...]) -> Config:
        """A point's config, straight from its value indices: a repair checks some 10,000
        points a start point where valid ones are rare (the separable space on a GPU)."""
        return {name: values[i] for name, values, i in zip(self._names, self._values, point, strict=True)}

    def _usable(self, point: tuple[int, ...]) -> bool:
        usable = point not in self.visited and point not in self.in_flight
        return usable and self.valid(self._config_of(point))

    @property
    def _point_violations(self) -> Callable[[tuple[int, ...]], int] | None:
        count = self.violations
        return None if count is None else lambda point: count(self._config_of(point))

    def _neighbours(self, centre: tuple[int, ...]) -> list[tuple[int, ...]]:
        return one_knob_neighbours(centre, self.sizes)

    def _unvisited_neighbour(self) -> tuple[int, ...] | None:
        """A random unvisited valid point that differs from the best in one knob."""
        assert self.best is not None
        candidates = self._neighbours(self.best[1])
        self.random.shuffle(candidates)
        return next((c for c in candidates if self._usable(c)), None)

    def _repair(self, point: tuple[int, ...]) -> tuple[int, ...] | None:
        """The nearest valid unvisited point (`repair_point`); the known valid points are
        those measured and those in flight."""

        def known() -> list[tuple[int, ...]]:
            return [p for p, value in self.visited.items() if value is not None] + sorted(self.in_flight)

        return repair_point(point, self.sizes, self._usable, self.random, self._point_violations, known)
