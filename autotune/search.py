"""The search engine: Optuna's ask/tell loop over any declared SearchSpace.

It knows nothing about kernels: an objective is whatever the caller measures, so the
same engine tunes kernels on a device and replays measured landscapes. Knobs are
encoded as the index of their value (ordinal), which every Optuna sampler, CMA-ES
included, understands.

Given a validity test, `ask` only returns valid points: an invalid proposal is told to
the sampler as failed and repaired to a valid, unvisited point that differs from it in
as few knobs as possible.

`gp` (the default) starts with 10 random points (powers of two favoured, each switch
on in half of them), then fits a Gaussian process to the 100 fastest points measured
(autotune/surrogate.py) and alternates two steps. The local step takes the best point's
one-knob neighbour of highest expected improvement, trying its switch moves (two-valued
knobs flipped, others moved to a power of two) before anything else. The global step
takes the point of the whole space with the lowest predicted time, or, once 12
evaluations have gone by without a 1% gain, the point of highest expected improvement
(a stalled search explores until it gains again). Genetic steps
(a child of two of the best points, moving several knobs at once) can replace some of
them (`SearchOptions.genetic_every`); they are off because 80 replayed seeds showed no gain.
Every setting of `gp` is a field of `SearchOptions`, passed to `Search` (and to the
tuner and the replay engine) rather than set module-wide.
`tpe-local` is TPE followed by a random walk over one-knob neighbours of the best
point. BENCHMARKS.md has the replay comparison behind the choice.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optuna

from autotune import surrogate
from autotune.errors import UsageError
from autotune.search_options import SearchOptions
from autotune.space import Config, SearchSpace

SAMPLERS = ("gp", "tpe-local", "tpe", "random", "cmaes", "grid")
DEFAULT_SAMPLER = "gp"
STARTUP_TRIALS = 10  # TPE's random start (tpe, tpe-local)
ENUMERATE_LIMIT = 50_000  # spaces up to this size score every point; larger ones a sample
CANDIDATE_SAMPLE = 4_000
MAX_ASKS = 10_000


optuna.logging.set_verbosity(logging.ERROR)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", message=".*warn_independent_sampling.*", category=FutureWarning)


def make_sampler(name: str, seed: int, space: SearchSpace) -> optuna.samplers.BaseSampler:
    if name in ("tpe", "tpe-local", "gp"):
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
        grid = {k.name: list(range(len(k.values))) for k in space.knobs.values()}
        return optuna.samplers.GridSampler(grid, seed=seed)
    raise UsageError(f"unknown sampler {name!r} (samplers: {', '.join(SAMPLERS)})")


class Search:
    """One search over one space, for one problem; history can be added up front."""

    def __init__(
        self,
        space: SearchSpace,
        sampler: str = DEFAULT_SAMPLER,
        seed: int = 0,
        valid: Callable[[Config], bool] | None = None,
        options: SearchOptions | None = None,
    ) -> None:
        self.space = space
        self.options = options or SearchOptions()
        self.sampler_name = sampler
        self.valid = valid or (lambda config: True)
        self.distributions = {
            k.name: optuna.distributions.IntDistribution(0, len(k.values) - 1) for k in space.knobs.values()
        }
        self.study = optuna.create_study(direction="minimize", sampler=make_sampler(sampler, seed, space))
        self.random = random.Random(seed)
        self.visited: dict[tuple[int, ...], float | None] = {}
        self.in_flight: set[tuple[int, ...]] = set()  # asked, not told yet (compiling ahead)
        self.best: tuple[float, tuple[int, ...]] | None = None
        self._progress_at = 0  # evaluations when the best time last improved by stall_gain
        self.sizes = [len(k.values) for k in space.knobs.values()]
        # Per knob, the indices of its powers of two when it also has other values.
        self.powers_of_two: list[list[int] | None] = []
        categorical = self.options.enumerations == "categorical"
        self.choices = {  # knobs that name choices (SearchOptions.enumerations)
            i for i, k in enumerate(space.knobs.values()) if categorical and _enumeration(k.values)
        }
        for i, knob in enumerate(space.knobs.values()):
            if i in self.choices:
                self.powers_of_two.append(None)
                continue
            flags = [_power_of_two(v) for v in knob.values]
            mixed = any(flags) and not all(flags)
            self.powers_of_two.append([i for i, flag in enumerate(flags) if flag] if mixed else None)
        self._valid_points: list[tuple[int, ...]] | None = None
        self._switch_plan: dict[int, list[int]] | None = None  # start points: each switch's values
        self._starts = 0
        self._feature_table: list[np.ndarray] | None = None

    # -- encoding ------------------------------------------------------------

    def encode(self, config: Config) -> dict[str, int]:
        """Value indices; knobs the config predates take their defaults."""
        config = self.space.complete(config)
        return {name: self.space.knobs[name].values.index(value) for name, value in config.items()}

    def decode(self, params: dict[str, Any]) -> Config:
        return {name: self.space.knobs[name].values[int(params[name])] for name in self.space.knobs}

    def _point(self, params: dict[str, Any]) -> tuple[int, ...]:
        return tuple(int(params[name]) for name in self.space.knobs)

    def _params(self, point: tuple[int, ...]) -> dict[str, int]:
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
        if self.sampler_name == "gp" and not self._waiting():
            proposal = self._model_step() if self._started() else self._start_point()
            if proposal is not None:
                self.study.enqueue_trial(self._params(proposal))
        for _ in range(MAX_ASKS):
            trial = self.study.ask(self.distributions)
            config = self.decode(trial.params)
            point = self._point(trial.params)
            if point in self.visited:
                # Measured already: the sampler hears the known answer, nothing is spent.
                self._tell_study(trial, self.visited[point])
            elif point in self.in_flight:
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            elif self.valid(config):
                self.in_flight.add(point)
                return trial, config
            else:
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
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
            if self.best is None or value < self.best[0] * (1.0 - self.options.stall_gain):
                self._progress_at = len(self.visited)
            self.best = (value, point)

    def _waiting(self) -> bool:
        """Points queued already (presets, warm starts) go first."""
        return bool(self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)))

    def _start_point(self) -> tuple[int, ...] | None:
        """A random valid, unvisited point; knobs that mix powers of two with other
        values draw from their powers of two half of the time (GPU work sizes favour
        them: on every replayed landscape the optimum has them). Each switch is on in
        half of the start points and off in the other half, so no switch setting goes
        unseen because of a few unlucky draws."""
        if self._switch_plan is None:
            self._switch_plan = {}
            for i, size in enumerate(self.sizes):
                if size == 2:
                    column = [0, 1] * (self.options.startup_trials // 2)
                    self.random.shuffle(column)
                    self._switch_plan[i] = column
                elif i in self.choices:
                    column = list(range(size)) * (self.options.startup_trials // size)
                    self.random.shuffle(column)
                    self._switch_plan[i] = column
        for _ in range(100):
            point = self._random_start_point()
            if point is None:
                return None
            planned = list(point)
            for i, column in self._switch_plan.items():
                if self._starts < len(column):
                    planned[i] = column[self._starts]
            if self._usable(tuple(planned)):
                self._starts += 1
                return tuple(planned)
        return self._random_start_point()

    def _random_start_point(self) -> tuple[int, ...] | None:
        for _ in range(100):
            point = []
            for size, powers in zip(self.sizes, self.powers_of_two, strict=True):
                pool: Sequence[int] = range(size)
                if powers is not None and self.random.random() < self.options.pow2_share:
                    pool = powers
                point.append(self.random.choice(pool))
            if self._usable(tuple(point)):
                return tuple(point)
        return None

    def _started(self) -> bool:
        return self.best is not None and len(self.visited) >= self.options.startup_trials

    def _usable(self, point: tuple[int, ...]) -> bool:
        usable = point not in self.visited and point not in self.in_flight
        return usable and self.valid(self.decode(self._params(point)))

    def _neighbours(self, centre: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Every point that differs from `centre` in exactly one knob."""
        return [
            centre[:i] + (value,) + centre[i + 1 :]
            for i, size in enumerate(self.sizes)
            for value in range(size)
            if value != centre[i]
        ]

    def _unvisited_neighbour(self) -> tuple[int, ...] | None:
        """A random unvisited valid point that differs from the best in one knob."""
        assert self.best is not None
        candidates = self._neighbours(self.best[1])
        self.random.shuffle(candidates)
        return next((c for c in candidates if self._usable(c)), None)

    def _candidates(self) -> list[tuple[int, ...]]:
        """Unvisited valid points: all of them in small spaces, else a random sample
        plus the one-knob neighbourhoods of the five best points."""
        if math.prod(self.sizes) <= ENUMERATE_LIMIT:
            if self._valid_points is None:
                self._valid_points = [
                    p for p in itertools.product(*(range(n) for n in self.sizes)) if self._usable(p)
                ]
            return [p for p in self._valid_points if p not in self.visited and p not in self.in_flight]
        found = {tuple(self.random.randrange(n) for n in self.sizes) for _ in range(CANDIDATE_SAMPLE)}
        ranked = sorted((v, p) for p, v in self.visited.items() if v is not None)
        for _, centre in ranked[:5]:
            found.update(self._neighbours(centre))
        return [p for p in found if self._usable(p)]

    def _model_step(self) -> tuple[int, ...] | None:
        """After the start: the GP's proposal, or on every `genetic_every`-th step a child."""
        every = self.options.genetic_every
        if every and len(self.visited) % every == 0:
            child = self._genetic_proposal()
            if child is not None:
                return child
        return self._gp_proposal()

    def _genetic_proposal(self) -> tuple[int, ...] | None:
        """A child of two good points (tournaments among the best, two-point crossover,
        each knob mutated with probability 1/knobs). It changes several knobs at once,
        the jump that one-knob neighbourhoods and expected improvement seldom make."""
        ranked = sorted((v, p) for p, v in self.visited.items() if v is not None)[: self.options.genetic_pool]
        if len(ranked) < 2:
            return None
        knobs = len(self.sizes)

        def parent() -> tuple[int, ...]:
            a, b = self.random.sample(range(len(ranked)), 2)
            return ranked[min(a, b)][1]

        for _ in range(200):
            x, y = parent(), parent()
            i, j = sorted(self.random.sample(range(knobs + 1), 2))
            child = list(x[:i] + y[i:j] + x[j:])
            for k, size in enumerate(self.sizes):
                if size > 1 and self.random.random() < 1 / knobs:
                    child[k] = self.random.randrange(size)
            if self._usable(tuple(child)):
                return tuple(child)
        return None

    def _gp_proposal(self) -> tuple[int, ...] | None:
        """The local step on every other call, the global step on the rest."""
        assert self.best is not None
        near = self._local_candidates() if len(self.visited) % 2 else []
        step = self.options.global_step
        if not near and self._stalled():
            if self.options.stall_step == "random":
                return self._random_start_point()
            step = "ei"
        candidates = near or self._candidates()
        if not candidates:
            return None
        measured = sorted(self.visited, key=lambda p: _rank(self.visited[p]))[: self.options.model_points]
        index = surrogate.propose(
            self._features(measured),
            [self.visited[p] for p in measured],
            self._features(candidates),
            self._features(sorted(self.in_flight)),
            acquisition="ei" if near else step,
        )
        return candidates[index]

    def _stalled(self) -> bool:
        after = self.options.stall_after
        return bool(after) and len(self.visited) - self._progress_at >= after

    def _local_candidates(self) -> list[tuple[int, ...]]:
        """The best point's unvisited one-knob neighbours; with `switches_first`, only its
        switch moves while any is left: flips of two-valued knobs, and moves of a knob
        that is not at a power of two to the nearest powers of two. These moves often
        decide which basin a point is in (shared memory on or off, an aligned block),
        and the model, having seen them fail elsewhere, would not try them here. Each
        costs one evaluation per new best point."""
        assert self.best is not None
        centre = self.best[1]
        near = [p for p in self._neighbours(centre) if self._usable(p)]
        if not self.options.switches_first:
            return near
        switch_moves = set()
        for i, (size, powers) in enumerate(zip(self.sizes, self.powers_of_two, strict=True)):
            if size == 2:
                switch_moves.add((i, 1 - centre[i]))
            elif i in self.choices:
                switch_moves.update((i, v) for v in range(size) if v != centre[i])
            elif powers is not None and centre[i] not in powers:
                switch_moves.add((i, max((v for v in powers if v < centre[i]), default=-1)))
                switch_moves.add((i, min((v for v in powers if v > centre[i]), default=-1)))
        first = [p for p in near if _move(centre, p) in switch_moves]
        return first or near

    def _features(self, points: list[tuple[int, ...]]) -> np.ndarray:
        """The surrogate's view of points: each knob's value index scaled to [0, 1], and,
        for numeric knobs that mix powers of two with other values, whether the value is
        one (GPUs often care more about alignment than about magnitude)."""
        if self._feature_table is None:
            table = []
            for knob, (size, powers) in enumerate(zip(self.sizes, self.powers_of_two, strict=True)):
                columns = [[i / max(size - 1, 1) for i in range(size)]]
                if knob in self.choices:
                    columns = [[float(i == j) for i in range(size)] for j in range(size)]
                if powers is not None:
                    columns.append([float(i in powers) for i in range(size)])
                table.append(np.array(columns, dtype=float).T)
            self._feature_table = table
        if not points:
            return np.zeros((0, sum(t.shape[1] for t in self._feature_table)))
        indices = np.array(points, dtype=int)
        return np.hstack([table[indices[:, i]] for i, table in enumerate(self._feature_table)])

    def _repair(self, point: tuple[int, ...]) -> tuple[int, ...] | None:
        """Change one knob, then two, ... until the point is valid and unvisited."""
        current = [point]
        for _ in range(len(self.sizes)):
            changed = [neighbour for base in current for neighbour in self._neighbours(base)]
            self.random.shuffle(changed)
            for candidate in changed:
                if self._usable(candidate):
                    return candidate
            current = self.random.sample(changed, min(len(changed), 20))
        return None


def _move(centre: tuple[int, ...], neighbour: tuple[int, ...]) -> tuple[int, int]:
    """(knob, new value index) of a point that differs from `centre` in one knob."""
    knob = next(i for i, (a, b) in enumerate(zip(centre, neighbour, strict=True)) if a != b)
    return knob, neighbour[knob]


def _power_of_two(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0 or value != int(value):
        return False
    return int(value) & (int(value) - 1) == 0


def _enumeration(values: Sequence[Any]) -> bool:
    """Values 0, 1, ..., k-1 with k >= 3: the knob names one of k choices."""
    plain = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    return plain and len(values) >= 3 and list(values) == list(range(len(values)))


def _rank(value: float | None) -> float:
    return math.inf if value is None else value
