"""`gp` as an Optuna sampler: `GPSampler(search_space, valid=..., options=SearchOptions(...))`
works in any Optuna study (in memory or any RDB storage) and with several workers on
one study; `Search` uses it for `--sampler gp`, so there is one gp.

It proposes whole points of a discrete space (categorical knobs, as `autotune search
--shared` declares them, and integer knobs), each valid (given a validity test) and
neither measured nor being measured: trials another worker is running (RUNNING) count
as in flight, and the model takes them at its own prediction, so workers spread out.
What it knows it reads from the study each time: finished trials in the order they
finished, failed ones as failures; a FAIL trial with a `skipped` attribute (a proposal
given up: taken, invalid, budget spent) is no measurement and is ignored.

It starts with `startup_trials` random points (powers of two favoured, each switch on in
half of them, each the draw most knobs apart from the points measured: `start_spread`),
then fits a Gaussian process to the `model_points` fastest points measured
(autotune/surrogate.py) and alternates two steps. The local step takes the best point's
one-knob neighbour (or diagonal neighbour: one value up or down in both knobs of a pair
the rules tie, `diagonal_moves`) of highest expected improvement, trying its switch moves
(two-valued knobs flipped, two of them at once, others moved to a power of two:
`switch_pairs`), its reshape moves (one size doubled and another halved: a 4x2 tile to
2x4, `reshape_moves`) and its repaired moves (a one-knob move that breaks a rule, with a
switch the rules tie to the moved knob flipped: `neighbour_repair`) before anything else,
where no point within `switch_scope` knobs with its other switches as the best point's
(`switch_context`) has the move's value(s). The global step takes the point of the whole
space with the lowest predicted time, or, once `stall_after` evaluations have gone by
without a `stall_gain` gain, the point of highest expected improvement (a stalled search
explores until it gains again). Genetic steps (a child of two of the best points, moving
several knobs at once) can replace some of them (`genetic_every`). Failed points are told
to the model as the worst time seen, or, with `failures=model`, kept out of the time model
and given to a second model of where points fail, whose chance to run weights every step's
choice. Settings measured and not made the default: a trust region around the best point
for the global step (`trust_region`) and log ratios of the knob pairs the rules tie as
features (`tied_ratios`; bench/results/gp_study_2026-12-04.md); local steps that leave out
neighbours predicted far slower (`local_reach`) or order them by predicted time
(`local_step`); pairs of switches flipped only once every single flip is known
(`switch_pairs=after`); local steps from the points tied with the best (`local_ties`) and
invalid diagonal moves repaired by a third knob (`diagonal_repair`). BENCHMARKS.md has the
replays behind each setting.

Values to minimise must be positive (times: the model works on their logarithm).
"""

from __future__ import annotations

import itertools
import math
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from autotune import surrogate
from autotune.search_options import SearchOptions

ENUMERATE_LIMIT = 50_000  # spaces up to this size score every point; larger ones a sample
CANDIDATE_SAMPLE = 4_000
# Random draws for one start point: spaces whose rules leave few points valid (the
# separable space on a GPU: 1 in 400) still get theirs (about 25 ms of rule checks).
START_DRAWS = 1_000

# `tied_ratios`, `diagonal_moves`: random draws whose valid points show which knobs the rules
# tie, and the count a pair of values must be expected at to be told missing. 16,000 draws
# (0.04-0.2 s once a search, bench/tie_draws.py) see a GPU's work-group limit tie local_x to
# local_y in the conv2d space, where 4,000 did not; a pair expected 8 times goes unseen by
# chance once in 3,000. A space none of whose first 4,000 draws is valid is given up.
TIE_DRAWS = 16_000
TIE_EXPECTED = 8.0
CHOICE_POINTS = 8  # `choose_offsets`: the latest points that ran, on which the two models are compared

Point = tuple[int, ...]  # each knob's value index


def knob_values(distribution: BaseDistribution) -> list[Any] | None:
    """The values a discrete distribution allows, in order; None for continuous ones."""
    if isinstance(distribution, CategoricalDistribution):
        return list(distribution.choices)
    if isinstance(distribution, IntDistribution):
        return list(range(distribution.low, distribution.high + 1, distribution.step))
    return None


def knobs_away(centre: Point, sizes: Sequence[int], count: int) -> list[Point]:
    """Every point that differs from `centre` in exactly `count` knobs."""
    points = []
    for knobs in itertools.combinations(range(len(sizes)), count):
        others = [[v for v in range(sizes[k]) if v != centre[k]] for k in knobs]
        for values in itertools.product(*others):
            point = list(centre)
            for knob, value in zip(knobs, values, strict=True):
                point[knob] = value
            points.append(tuple(point))
    return points


def knobs_apart(a: Point, b: Point) -> int:
    """How many knobs two points differ in."""
    return sum(x != y for x, y in zip(a, b, strict=True))


def one_knob_neighbours(centre: Point, sizes: Sequence[int]) -> list[Point]:
    """Every point that differs from `centre` in exactly one knob."""
    return [
        centre[:i] + (value,) + centre[i + 1 :]
        for i, size in enumerate(sizes)
        for value in range(size)
        if value != centre[i]
    ]


def given_up(trial: optuna.trial.FrozenTrial) -> bool:
    """A proposal given up without a measurement (FAIL, marked `skipped`). A COMPLETE
    trial is always a measurement, whatever marks it: a shared search's worker judged gone
    may still finish the point it claimed."""
    return trial.state != TrialState.COMPLETE and bool(trial.user_attrs.get("skipped"))


class GPSampler(optuna.samplers.BaseSampler):
    """The `gp` search as an Optuna sampler (module docstring).

    `search_space`: the knobs, each a CategoricalDistribution or IntDistribution, in the
    order the model's features take them; without it the sampler works on the knobs
    every finished trial has (Optuna's intersection search space) and draws the first
    trial at random. `valid(params)`: whether a whole point may be proposed.
    `live_values` (optional): per knob, the values it can take for the problem
    (`SearchSpace.live_values`); the model, its start points and its moves use those only."""

    def __init__(
        self,
        search_space: dict[str, BaseDistribution] | None = None,
        *,
        valid: Callable[[dict[str, Any]], bool] | None = None,
        options: SearchOptions | None = None,
        seed: int | None = None,
        live_values: Mapping[str, Sequence[Any]] | None = None,
    ) -> None:
        self.options = options or SearchOptions()
        self.live_values = live_values
        self.valid = valid or (lambda params: True)
        self.random = random.Random(seed)
        self._lock = threading.Lock()  # study.optimize(n_jobs=N) asks from N threads
        # Trial number -> the point proposed for it: in flight before its parameters reach
        # the storage (another thread may ask in between).
        self._proposed: dict[int, Point] = {}
        self._fixed_space: dict[str, BaseDistribution] | None = None
        if search_space is not None:
            self._fixed_space = {k: d for k, d in search_space.items() if knob_values(d) is not None}
        self._intersection = optuna.search_space.IntersectionSearchSpace()
        self._space_key: tuple[tuple[str, tuple[Any, ...]], ...] | None = None
        self.names: list[str] = []  # the modelled knobs (`prepare`)
        # What the study says, read again at each proposal (`_observe`).
        self.visited: dict[Point, float | None] = {}  # in the order measured
        self.in_flight: set[Point] = set()
        self.best: tuple[float, Point] | None = None
        self._progress_at = 0  # evaluations when the best time last improved by stall_gain

    # -- Optuna's sampler interface ------------------------------------------

    def reseed_rng(self) -> None:
        self.random.seed()

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        if self._fixed_space is not None:
            return self._fixed_space
        space = self._intersection.calculate(study)
        return {k: d for k, d in space.items() if knob_values(d) is not None}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space or trial.system_attrs.get("fixed_params"):
            return {}  # nothing to model yet, or a queued point (a preset, a warm start)
        if study._is_multi_objective() or study.direction != optuna.study.StudyDirection.MINIMIZE:
            raise ValueError("GPSampler minimises one objective (a time)")
        with self._lock:
            self.prepare(search_space)
            self.observe(study, trial.number)
            proposal = self._model_step() if self._started() else self._start_point()
            if proposal is None:
                proposal = self._random_start_point()
            if proposal is None:
                return {}
            self._proposed[trial.number] = proposal
            return self.params_of(proposal)

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        """Knobs outside the modelled space (a first trial, a continuous knob): at random."""
        values = knob_values(param_distribution)
        if values is not None:
            return self.random.choice(values)
        low, high = param_distribution.low, param_distribution.high  # type: ignore[attr-defined]
        return self.random.uniform(low, high)

    # -- the space and what the study says -----------------------------------

    def prepare(self, search_space: dict[str, BaseDistribution]) -> None:
        """Per-knob tables, built once per search space."""
        values = {name: knob_values(d) or [] for name, d in search_space.items()}
        if self.live_values is not None:
            live = self.live_values
            values = {n: [v for v in vs if n not in live or v in live[n]] or vs for n, vs in values.items()}
        key = tuple((name, tuple(v)) for name, v in values.items())
        if key == self._space_key:
            return
        self._space_key = key
        self.names = list(values)
        self.values = [values[name] for name in self.names]
        self.sizes = [len(v) for v in self.values]
        categorical = self.options.enumerations == "categorical"
        self.choices = {i for i, v in enumerate(self.values) if categorical and _enumeration(v)}
        # Per knob, the indices of its powers of two when it also has other values.
        self.powers_of_two: list[list[int] | None] = []
        for i, knob in enumerate(self.values):
            flags = [_power_of_two(v) for v in knob]
            mixed = i not in self.choices and any(flags) and not all(flags)
            self.powers_of_two.append([j for j, flag in enumerate(flags) if flag] if mixed else None)
        self._valid_points: list[Point] | None = None
        self._switch_plan: dict[int, list[int]] | None = None  # start points: each switch's values
        self._starts = 0
        self._feature_table: list[np.ndarray] | None = None
        self._ratio_tables: list[tuple[int, int, np.ndarray]] = []
        self._tied: set[tuple[int, int]] | None = None  # `_tied_pairs`, found once a space
        self._halves: dict[int, list[tuple[int | None, int | None]]] | None = None  # `_reshaped`
        self._warm: dict[tuple[str, int], surrogate.WarmStart] = {}  # `_warm_start`

    def observe(self, study: optuna.Study, current: int | None = None) -> None:
        """Measured points (in the order they finished), points in flight, the best."""
        self.visited, self.in_flight, self.best, self._progress_at = {}, set(), None, 0
        trials = study.get_trials(deepcopy=False)
        finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.FAIL)]
        finished.sort(key=lambda t: (t.datetime_complete or t.datetime_start or _NEVER, t.number))
        for trial in finished:
            point = self.point_of(trial.params)
            if point is None or given_up(trial):
                continue
            value = trial.value if trial.state == TrialState.COMPLETE else None
            if value is not None and not value > 0:
                raise ValueError(f"GPSampler models positive values (times), not {value!r}")
            self._note(point, value)
        running = {t.number: t for t in trials if t.state == TrialState.RUNNING and t.number != current}
        self._proposed = {n: p for n, p in self._proposed.items() if n in running}
        for number, trial in running.items():
            point = self.point_of(trial.params) or self._proposed.get(number)
            if point is not None:
                self.in_flight.add(point)

    def point_of(self, params: dict[str, Any]) -> Point | None:
        """A trial's parameters as value indices; None if it lacks a knob or a value."""
        point = []
        for name, values in zip(self.names, self.values, strict=True):
            if name not in params or params[name] not in values:
                return None
            point.append(values.index(params[name]))
        return tuple(point)

    def params_of(self, point: Point) -> dict[str, Any]:
        return {name: values[i] for name, values, i in zip(self.names, self.values, point, strict=True)}

    def _note(self, point: Point, value: float | None) -> None:
        self.visited[point] = value
        if value is not None and (self.best is None or value < self.best[0]):
            if self.best is None or value < self.best[0] * (1.0 - self.options.stall_gain):
                self._progress_at = len(self.visited)
            self.best = (value, point)

    # -- proposals -----------------------------------------------------------

    def _started(self) -> bool:
        return self.best is not None and len(self.visited) >= self.options.startup_trials

    def _unclaimed(self, point: Point) -> bool:
        return point not in self.visited and point not in self.in_flight

    def _usable(self, point: Point) -> bool:
        return self._unclaimed(point) and self.valid(self.params_of(point))

    def _start_point(self) -> Point | None:
        """A random valid, unvisited point; knobs that mix powers of two with other
        values draw from their powers of two half of the time (GPU work sizes favour
        them: on every replayed landscape the optimum has them). Each switch is on in
        half of the start points and off in the other half, so no switch setting goes
        unseen because of a few unlucky draws. Of `start_spread` such draws, the one
        most knobs apart from every point measured or in flight: ten start points that
        cover more of the space give the model more to go on (BENCHMARKS.md)."""
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
        taken = [*self.visited, *self.in_flight] if self.options.start_spread else []
        chosen: Point | None = None
        farthest, draws = -1, 0
        for _ in range(100):
            point = self._random_start_point()
            if point is None:
                if chosen is None:
                    return None
                break
            planned = list(point)
            for i, column in self._switch_plan.items():
                if self._starts < len(column):
                    planned[i] = column[self._starts]
            candidate = tuple(planned)
            if not self._usable(candidate):
                continue
            if not taken:
                chosen = candidate
                break
            apart = min(knobs_apart(candidate, other) for other in taken)
            if apart > farthest:
                chosen, farthest = candidate, apart
            draws += 1
            if draws >= self.options.start_spread:
                break
        if chosen is not None:
            self._starts += 1
            return chosen
        return self._random_start_point()

    def _random_start_point(self) -> Point | None:
        for _ in range(START_DRAWS):
            point = []
            for size, powers in zip(self.sizes, self.powers_of_two, strict=True):
                pool: Sequence[int] = range(size)
                if powers is not None and self.random.random() < self.options.pow2_share:
                    pool = powers
                point.append(self.random.choice(pool))
            if self._usable(tuple(point)):
                return tuple(point)
        return None

    def _candidates(self) -> list[Point]:
        """Unvisited points: every valid one in small spaces, else a random sample plus
        the one-knob neighbourhoods of the five best points, not yet checked for validity
        (in a real search a check evaluates the space's rules; the proposal checks them
        in the model's order until one holds)."""
        if math.prod(self.sizes) <= ENUMERATE_LIMIT:
            if self._valid_points is None:  # every valid point: one in flight now may be given up
                self._valid_points = [
                    p
                    for p in itertools.product(*(range(n) for n in self.sizes))
                    if self.valid(self.params_of(p))
                ]
            return [p for p in self._valid_points if p not in self.visited and p not in self.in_flight]
        draws = np.random.default_rng(self.random.getrandbits(64)).integers(  # one draw, not 300,000
            0, self.sizes, size=(CANDIDATE_SAMPLE, len(self.sizes))
        )
        found = set(map(tuple, draws.tolist()))
        ranked = sorted((v, p) for p, v in self.visited.items() if v is not None)
        for _, centre in ranked[:5]:
            found.update(one_knob_neighbours(centre, self.sizes))
        return [p for p in found if self._unclaimed(p)]

    def _model_step(self) -> Point | None:
        """After the start: the GP's proposal, or on every `genetic_every`-th step a child."""
        every = self.options.genetic_every
        if every and len(self.visited) % every == 0:
            child = self._genetic_proposal()
            if child is not None:
                return child
        return self._gp_proposal()

    def _genetic_proposal(self) -> Point | None:
        """A child of two good points (tournaments among the best, two-point crossover,
        each knob mutated with probability 1/knobs). It changes several knobs at once,
        the jump that one-knob neighbourhoods and expected improvement seldom make."""
        ranked = sorted((v, p) for p, v in self.visited.items() if v is not None)[: self.options.genetic_pool]
        if len(ranked) < 2:
            return None
        knobs = len(self.sizes)

        def parent() -> Point:
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

    def _gp_proposal(self) -> Point | None:
        """The local step on every other call, the global step on the rest."""
        assert self.best is not None
        near = self._local_candidates() if len(self.visited) % 2 and not self._local_spent() else []
        if near and self.options.local_reach:
            chosen = self._ranked_first(near, "ei", math.log(self.best[0] * self.options.local_reach))
            if chosen is not None:
                return chosen
            near = []  # every neighbour predicted past the reach: the global step's turn
        step = self.options.global_step
        if self.options.sample_after and len(self.visited) >= self.options.sample_after:
            step = "sample"
        far = False
        if not near and self._stalled():
            if self.options.stall_step == "random":
                return self._random_start_point()
            far = self.options.stall_step == "far"
            step = "mean" if far else "sample" if self.options.stall_step == "sample" else "ei"
        candidates = near or self._candidates()
        if not near and not self._stalled() and self.options.trust_region:
            candidates = self._in_trust_region(candidates)
        if far:  # the fastest-predicted point three knobs or more from the best
            candidates = [p for p in candidates if self._usable(p)]
            candidates = [p for p in candidates if knobs_apart(p, self.best[1]) >= 3] or candidates
        if not candidates:
            return None
        return self._ranked_first(candidates, self.options.local_step if near else step)

    def _ranked_first(
        self, candidates: list[Point], acquisition: str, beyond: float | None = None
    ) -> Point | None:
        """The first candidate in the model's order that keeps the rules (near and enumerated
        points keep them already: one check; a sample's are checked here until one does);
        none predicted slower than exp(`beyond`)."""
        measured = self._model_set()
        offsets = len(self._offset_knobs())
        keep = None
        if offsets and self.options.choose_offsets and not self._offsets_pay():
            keep, offsets = -offsets, 0  # the plain model: the value-index columns dropped
        order = surrogate.ranking(
            self._features(measured)[:, :keep],
            self._targets(measured),
            self._features(candidates)[:, :keep],
            self._features(sorted(self.in_flight))[:, :keep],
            acquisition=acquisition,
            failures=self.options.failures,
            failure_quantile=self.options.failure_quantile,
            targets=self.options.targets,
            offset_columns=offsets,
            beyond=beyond,
            rng=np.random.default_rng(self.random.getrandbits(32)) if acquisition == "sample" else None,
            warm=self._warm_start("step", offsets, len(measured)),
        )
        return next((candidates[i] for i in order if self.valid(self.params_of(candidates[i]))), None)

    def _offsets_pay(self) -> bool:
        """Whether the model with value offsets ordered the latest CHOICE_POINTS points that
        ran better than the plain model, each fitted to the points measured before them."""
        order = list(self.visited)
        ran = [i for i, p in enumerate(order) if self.visited[p] is not None]
        if len(ran) < 2 * CHOICE_POINTS:
            return False
        first = ran[-CHOICE_POINTS]
        recent = [order[i] for i in ran[-CHOICE_POINTS:]]
        earlier = self._model_set(order[:first])
        times = np.array([self.visited[p] for p in recent])
        earlier_features, recent_features = self._features(earlier), self._features(recent)
        targets = self._targets(earlier)
        m = len(self._offset_knobs())
        scores = []
        for keep, offsets in ((-m, 0), (None, m)):
            ranked = surrogate.ranking(
                earlier_features[:, :keep],
                targets,
                recent_features[:, :keep],
                acquisition="mean",
                failures=self.options.failures,
                failure_quantile=self.options.failure_quantile,
                targets=self.options.targets,
                offset_columns=offsets,
                warm=self._warm_start("choice", offsets, len(earlier)),
            )
            predicted = np.empty(len(recent))
            predicted[ranked] = np.arange(len(recent))
            predicted_order = np.sign(predicted[:, None] - predicted[None, :])
            scores.append(int((predicted_order == np.sign(times[:, None] - times[None, :])).sum()))
        return scores[1] > scores[0]

    def _warm_start(self, role: str, offsets: int, points: int) -> surrogate.WarmStart | None:
        """Where the fit of one of the step's models starts (`warm_fits`): its previous fit,
        once its set of `points` is full. Per role ("step", "choice") and with or without
        value offsets, as each is a model of its own."""
        warm = self.options.warm_fits
        if warm == "off" or (warm == "choice" and role != "choice") or points < self.options.model_points:
            return None
        return self._warm.setdefault((role, offsets), surrogate.WarmStart())

    def _targets(self, measured: list[Point]) -> list[float | None]:
        """The times the model sees (`envelope`)."""
        times = [self.visited[p] for p in measured]
        weight = self.options.envelope
        if not weight:
            return times
        ran = [(p, t) for p, t in self.visited.items() if t is not None]
        if not ran:
            return times
        # One pass over every (model point, point that ran) pair: a proposal's hot path.
        ran_points = np.array([p for p, _ in ran])
        ran_times = np.array([t for _, t in ran])
        apart = (np.array(measured)[:, None, :] != ran_points[None, :, :]).sum(2)
        nearest = np.where(apart == 1, ran_times[None, :], np.inf).min(1)
        return [
            None if time is None else time * (min(low, time) / time) ** weight
            for time, low in zip(times, nearest.tolist(), strict=True)
        ]

    def _model_set(self, among: list[Point] | None = None) -> list[Point]:
        """The measured points the surrogate sees (of `among`, in the order measured; all by
        default): the `model_points` fastest, failures last. With `failures=model` failures
        are no times but the model of where points fail needs them: the `model_points`
        fastest that ran, and the latest failures, up to half as many (a bound on the
        second model's cost)."""
        pool = list(self.visited) if among is None else among
        ranked = sorted(pool, key=lambda p: _rank(self.visited[p]))
        limit = self.options.model_points
        if self.options.failures not in ("model", "kernel"):
            return ranked[:limit]
        failed = [p for p in pool if self.visited[p] is None]
        return [p for p in ranked if self.visited[p] is not None][:limit] + failed[-(limit // 2) :]

    def _local_spent(self) -> bool:
        """`local_patience` of the best point's one-knob neighbours are measured: a trap
        for the local step, whose turns then go to the global step."""
        patience = self.options.local_patience
        if not patience or self.best is None:
            return False
        centre = self.best[1]
        return sum(knobs_apart(p, centre) == 1 for p in self.visited) >= patience

    def _trust_radius(self) -> int | None:
        """The trust region's radius in knobs (`trust_region`), from the measured points
        in the order they finished; None where the region has collapsed (the global step
        then takes the whole space until the next gain). It starts at `trust_region` once
        the start points are measured; every 2 gains in a row (a new best by `stall_gain`)
        widen it by a knob, every `trust_failures` evaluations in a row without one narrow
        it by a knob, and narrowed below one knob it collapses; a gain after a collapse
        starts it afresh."""
        widest = sum(size > 1 for size in self.sizes)
        radius: int | None = min(self.options.trust_region, widest)
        best, gains, misses = math.inf, 0, 0
        for count, value in enumerate(self.visited.values(), start=1):
            gain = value is not None and value < best * (1.0 - self.options.stall_gain)
            if value is not None:
                best = min(best, value)
            if count <= self.options.startup_trials:
                continue
            if gain:
                gains, misses = gains + 1, 0
                if radius is None:
                    radius, gains = min(self.options.trust_region, widest), 0
                elif gains >= 2:
                    radius, gains = min(radius + 1, widest), 0
            else:
                gains, misses = 0, misses + 1
                if radius is not None and misses >= self.options.trust_failures:
                    radius, misses = (radius - 1 or None), 0
        return radius

    def _in_trust_region(self, candidates: list[Point]) -> list[Point]:
        """The candidates within `_trust_radius` knobs of the best point; in a space too large
        to list, with every unclaimed point up to three knobs away added (a random sample
        holds few of them). All candidates where the region has collapsed or holds none."""
        assert self.best is not None
        radius = self._trust_radius()
        if radius is None:
            return candidates
        centre = self.best[1]
        if math.prod(self.sizes) > ENUMERATE_LIMIT:
            found = set(candidates)
            for count in range(2, min(radius, 3) + 1):
                found.update(p for p in knobs_away(centre, self.sizes, count) if self._unclaimed(p))
            candidates = sorted(found)
        if not candidates:
            return candidates
        apart = (np.array(candidates, dtype=int) != np.array(centre, dtype=int)).sum(1)
        inside = [p for p, d in zip(candidates, apart.tolist(), strict=True) if d <= radius]
        return inside or candidates

    def _stalled(self) -> bool:
        after = self.options.stall_after
        return bool(after) and len(self.visited) - self._progress_at >= after

    def _local_candidates(self) -> list[Point]:
        """The best point's unvisited one-knob neighbours; with `switches_first`, only its
        switch moves while any is left: flips of two-valued knobs, and moves of a knob
        that is not at a power of two to the nearest powers of two. These moves often
        decide which basin a point is in (shared memory on or off, an aligned block),
        and the model, having seen them fail elsewhere, would not try them here. Each
        costs one evaluation per new best point."""
        assert self.best is not None
        centre = self.best[1]
        if self.options.stall_centre == "explored" and self._stalled():
            since = list(self.visited.items())[self._progress_at :]
            explored = sorted((v, p) for p, v in since if v is not None and knobs_apart(p, centre) > 1)
            if explored:
                centre = explored[0][1]
        if self.options.local_centres > 1:
            centre, near = self._basin_centre()
        else:
            near = [p for p in one_knob_neighbours(centre, self.sizes) if self._usable(p)]
        if self.options.local_radius > 1 and (not near or self._stalled()):
            return near + self._wider_neighbours(centre)
        diagonal = self.options.diagonal_moves
        if diagonal == "always" or (diagonal == "stalled" and (not near or self._stalled())):
            near = near + self._diagonal_neighbours(centre)
        reshaped = self._reshaped(centre) if self.options.reshape_moves != "off" else []
        repair = self.options.neighbour_repair != "off"
        repaired = self._repaired_neighbours(centre, set(near)) if repair else []
        near = list(dict.fromkeys(near + reshaped + repaired))
        ties = self._tie_neighbours(centre, near)
        if not self.options.switches_first:
            return near + ties
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
        if self.options.reshape_moves == "first" and not self._reshapes_spent():
            first += [p for p in reshaped if p not in first]
        if self.options.neighbour_repair == "first":
            first += [p for p in repaired if p not in first]
        mode = self.options.switch_pairs
        if mode == "on":
            return self._unknown_switches(centre, first + self._switch_pairs(centre, near)) or near + ties
        unknown = self._unknown_switches(centre, first)
        if not unknown and mode == "after":  # pairs listed only once every single flip is known
            unknown = self._unknown_switches(centre, self._switch_pairs(centre, near))
        return unknown or near + ties

    def _tie_neighbours(self, centre: Point, near: list[Point]) -> list[Point]:
        """Usable one-knob and diagonal neighbours of the measured points other than `centre`
        within `local_ties` of the best time, not in `near`."""
        if not self.options.local_ties or self.best is None:
            return []
        if self.options.ties_when == "stalled" and near and not self._stalled():
            return []
        limit = self.best[0] * (1.0 + self.options.local_ties)
        tied = [p for p, v in self.visited.items() if v is not None and v <= limit and p != centre]
        found: dict[Point, None] = {}
        diagonal = self.options.diagonal_moves != "off"
        for point in tied:
            ring = [p for p in one_knob_neighbours(point, self.sizes) if self._usable(p)]
            for neighbour in ring + (self._diagonal_neighbours(point) if diagonal else []):
                found.setdefault(neighbour)
        seen = set(near)
        return [p for p in found if p not in seen]

    def _switch_pairs(self, centre: Point, near: list[Point]) -> list[Point]:
        """`centre` with two of its two-valued knobs flipped at once, where usable and not in
        `near` (a diagonal move can flip two switches too): the way
        out of a basin whose single flips are all slow (on the A4000, use_shmem=0 alone is
        22x with read_only=1; with read_only=0 too it is the optimum's side)."""
        flags = [k for k, size in enumerate(self.sizes) if size == 2]
        pairs = []
        for first, second in itertools.combinations(flags, 2):
            point = list(centre)
            point[first], point[second] = 1 - centre[first], 1 - centre[second]
            if tuple(point) not in near and self._usable(tuple(point)):
                pairs.append(tuple(point))
        return pairs

    def _unknown_switches(self, centre: Point, moves: list[Point]) -> list[Point]:
        """The switch moves whose value no point measured or in flight within `switch_scope`
        knobs of `centre` has (all of them with `switch_scope = 0`). Flipping every switch at
        every new best point spends an evaluation a switch each time the best point moves;
        within a few knobs of a point where the flip was tried, its outcome is known. With
        `switch_context = "same"` a point tells the outcome only if its other switches match
        `centre`'s: switches act together (on the A4000, use_shmem=0 is 1.15x with read_only=0
        and 22x with read_only=1)."""
        scope = self.options.switch_scope
        if not scope or not moves:
            return moves
        known = np.array([*self.visited, *self.in_flight], dtype=int)
        differ = known != np.array(centre, dtype=int)
        near = differ.sum(1) <= scope
        switches = [k for k, size in enumerate(self.sizes) if size == 2 or k in self.choices]
        unknown = []
        for point in moves:
            if self.options.switch_pairs != "off":  # every knob the move changes (two for a pair)
                changes = [(k, v) for k, (c, v) in enumerate(zip(centre, point, strict=True)) if c != v]
            else:
                changes = [_move(centre, point)]
            seen = near.copy()
            for knob, value in changes:
                seen &= known[:, knob] == value
            if self.options.switch_context == "same":
                moved = {knob for knob, _ in changes}
                seen &= ~differ[:, [k for k in switches if k not in moved]].any(1)
            if not seen.any():
                unknown.append(point)
        return unknown

    def _basin_centres(self) -> list[Point]:
        """The best point, then up to `local_centres - 1` more: each the best measured
        point three knobs or more from every centre before it. Radius-2 traps (GEMM's at
        1.078-1.212) hold against one- and two-knob steps, so a basin the local steps
        have not reached lies three knobs away."""
        centres: list[Point] = []
        for _, point in sorted((v, p) for p, v in self.visited.items() if v is not None):
            if all(knobs_apart(point, c) >= 3 for c in centres):
                centres.append(point)
                if len(centres) == self.options.local_centres:
                    break
        return centres

    def _basin_centre(self) -> tuple[Point, list[Point]]:
        """The first centre not yet spent and its usable one-knob neighbours; spent: no
        usable neighbour left, or `basin_patience` neighbours measured while it
        stayed a centre. All spent: the best point, as with one centre."""
        assert self.best is not None
        fallback: tuple[Point, list[Point]] | None = None
        for centre in self._basin_centres():
            ring = one_knob_neighbours(centre, self.sizes)
            near = [p for p in ring if self._usable(p)]
            if fallback is None:
                fallback = (centre, near)
            measured = sum(p in self.visited for p in ring)
            if near and measured < self.options.basin_patience:
                return centre, near
        return fallback or (self.best[1], [])

    def _wider_neighbours(self, centre: Point) -> list[Point]:
        """Usable points 2 .. `local_radius` knobs from `centre`: those of the nearest
        distance that has any. Where rules tie knobs together (CLBlast's GEMM: a work-group
        size and the tile it divides) a point's one-knob neighbours are soon spent or
        invalid, and the next better point is two knobs away."""
        for radius in range(2, self.options.local_radius + 1):
            near = [p for p in knobs_away(centre, self.sizes, radius) if self._usable(p)]
            if near:
                return near
        return []

    def _diagonal_neighbours(self, centre: Point) -> list[Point]:
        """Usable points one value up or down in both knobs of a tied pair (`diagonal_moves`)."""
        found: list[Point] = []
        tied = sorted(self._tied_pairs())
        for a, b in tied:
            for step_a, step_b in ((-1, -1), (-1, 1), (1, -1), (1, 1)):
                value_a, value_b = centre[a] + step_a, centre[b] + step_b
                if 0 <= value_a < self.sizes[a] and 0 <= value_b < self.sizes[b]:
                    point = list(centre)
                    point[a], point[b] = value_a, value_b
                    if self._usable(tuple(point)):
                        found.append(tuple(point))
                    elif self.options.diagonal_repair != "off" and self._unclaimed(tuple(point)):
                        switches = self.options.diagonal_repair == "switches"
                        found += self._repaired_moves(tuple(point), (a, b), tied, switches)
        return list(dict.fromkeys(found))

    def _repaired_neighbours(self, centre: Point, usable: set[Point]) -> list[Point]:
        """`centre`'s one-knob neighbours that break a rule, each with a two-valued knob the
        rules tie to the moved knob flipped, where that makes it usable (`neighbour_repair`):
        dedispersion MI250X's trap at 1.35 has tile_size_x = 2 with tile_stride_x = 1; tile 1
        is invalid with a stride, and tile 1 without one is 1.02. `usable` holds every usable
        one-knob neighbour (checked already), so an unclaimed one not in it breaks a rule."""
        tied = sorted(self._tied_pairs())
        found: list[Point] = []
        for point in one_knob_neighbours(centre, self.sizes):
            if point not in usable and self._unclaimed(point):
                found += self._repaired_moves(point, (_move(centre, point)[0],), tied, switches=True)
        return list(dict.fromkeys(found))

    def _repaired_moves(
        self, point: Point, moved: tuple[int, ...], tied: list[tuple[int, int]], switches: bool
    ) -> list[Point]:
        """An invalid move with one more knob tied to a moved knob flipped (`switches`: two-
        valued knobs only) or moved one value up or down: the rule that broke it ties that knob in."""
        thirds = sorted({y if x in moved else x for x, y in tied if (x in moved) != (y in moved)})
        repaired = []
        for knob in thirds:
            if switches and self.sizes[knob] != 2:
                continue
            for value in {point[knob] - 1, point[knob] + 1} if self.sizes[knob] > 2 else {1 - point[knob]}:
                if 0 <= value < self.sizes[knob]:
                    candidate = point[:knob] + (value,) + point[knob + 1 :]
                    if self._usable(candidate):
                        repaired.append(candidate)
        return repaired

    def _reshapes_spent(self) -> bool:
        """`reshape_patience` reshape moves of the best point of their time measured in a row
        without a new best by `stall_gain`: they lose their turn before the model's order."""
        patience = self.options.reshape_patience
        if not patience:
            return False
        best: tuple[float, Point] | None = None
        moves: set[Point] = set()  # the reshape moves of `best`, listed again when it changes
        misses = 0
        for point, value in self.visited.items():
            if point in moves:
                assert best is not None
                gained = value is not None and value < best[0] * (1.0 - self.options.stall_gain)
                misses = 0 if gained else misses + 1
            if value is not None and (best is None or value < best[0]):
                best = (value, point)
                moves = set(self._reshape_moves(point))
        return misses >= patience

    def _reshape_moves(self, centre: Point) -> list[Point]:
        """Points with one numeric knob's value doubled and another's halved, usable or not."""
        if self._halves is None:
            self._halves = {}
            for knob, values in enumerate(self.values):
                numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
                if knob in self.choices or len(values) < 3 or not numeric or min(values) <= 0:
                    continue
                where = {v: i for i, v in enumerate(values)}
                self._halves[knob] = [(where.get(v * 2), where.get(v / 2)) for v in values]
        found = []
        for up, down in itertools.permutations(self._halves, 2):
            doubled, halved = self._halves[up][centre[up]][0], self._halves[down][centre[down]][1]
            if doubled is not None and halved is not None:
                point = list(centre)
                point[up], point[down] = doubled, halved
                found.append(tuple(point))
        return found

    def _reshaped(self, centre: Point) -> list[Point]:
        """Usable reshape moves of `centre` (`reshape_moves`)."""
        return [p for p in self._reshape_moves(centre) if self._usable(p)]

    def _features(self, points: list[Point]) -> np.ndarray:
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
            self._ratio_tables = self._ratio_pairs() if self.options.ratio_features else []
            if self.options.tied_ratios and not self.options.ratio_features:
                tied = self._tied_pairs()
                self._ratio_tables = [t for t in self._ratio_pairs() if (t[0], t[1]) in tied]
        offsets = self._offset_knobs()
        columns_per_point = sum(t.shape[1] for t in self._feature_table) + len(self._ratio_tables)
        columns_per_point += len(offsets)
        if not points:
            return np.zeros((0, columns_per_point))
        indices = np.array(points, dtype=int)
        columns = [table[indices[:, i]] for i, table in enumerate(self._feature_table)]
        columns += [table[indices[:, a], indices[:, b]][:, None] for a, b, table in self._ratio_tables]
        columns += [indices[:, [knob]].astype(float) for knob in offsets]  # value indices, last
        return np.hstack(columns)

    def _offset_knobs(self) -> list[int]:
        """Knobs whose values each get an offset in the model (`value_offsets`)."""
        if not self.options.value_offsets:
            return []
        return [k for k, size in enumerate(self.sizes) if size > 2 and k not in self.choices]

    def _tied_pairs(self) -> set[tuple[int, int]]:
        """Pairs of knobs (a, b), a < b, that the validity test ties together: among valid
        points of TIE_DRAWS random draws, some pair of their values never appears where
        their values' shares predict TIE_EXPECTED or more. Found once a space: both
        `tied_ratios` and `diagonal_moves` ask."""
        if self._tied is None:
            self._tied = self._find_tied_pairs()
        return self._tied

    def _find_tied_pairs(self) -> set[tuple[int, int]]:
        draws = np.random.default_rng(0).integers(0, self.sizes, size=(TIE_DRAWS, len(self.sizes)))
        points = draws.tolist()
        first = TIE_DRAWS // 4
        keep = [self.valid(self.params_of(point)) for point in points[:first]]
        if not any(keep):  # so few points valid that the rest would not show a pair either
            return set()
        keep += [self.valid(self.params_of(point)) for point in points[first:]]
        table = draws[np.array(keep, dtype=bool)]
        tied = set()
        for a, b in itertools.combinations([k for k, n in enumerate(self.sizes) if n > 1], 2):
            counts = np.zeros((self.sizes[a], self.sizes[b]))
            np.add.at(counts, (table[:, a], table[:, b]), 1.0)
            expected = np.outer(counts.sum(1), counts.sum(0)) / len(table)
            if ((counts == 0) & (expected >= TIE_EXPECTED)).any():
                tied.add((a, b))
        return tied

    def _ratio_pairs(self) -> list[tuple[int, int, np.ndarray]]:
        """Per pair (a, b) of size knobs, log2(value of a / value of b) for every pair of
        their value indices, scaled to [0, 1] over the table (`ratio_features`)."""
        logs = {}
        for knob, values in enumerate(self.values):
            numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
            if knob not in self.choices and numeric and len(values) > 1 and min(values) > 0:
                logs[knob] = np.log2(np.array(values, dtype=float))
        pairs = []
        for a, b in itertools.combinations(sorted(logs), 2):
            table = logs[a][:, None] - logs[b][None, :]
            span = table.max() - table.min()
            pairs.append((a, b, (table - table.min()) / (span or 1.0)))
        return pairs


_NEVER = datetime.max  # trials without a finishing time sort last


def _move(centre: Point, neighbour: Point) -> tuple[int, int]:
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
