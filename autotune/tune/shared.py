"""Many workers, one search: every `autotune search --shared` process pointed at one
database server asks the same Optuna study (one per device model and problem, the one
that `studies` keeps) for its next point, through Optuna's own distributed ask/tell
over the RDB storage. The sampler counts the points other workers are measuring
(the study's RUNNING trials) as taken while it proposes: `gp` (the default, as for a
search of one) leaves them out and takes them at its model's prediction, TPE's
constant liar counts them as bad.

A point is measured by one worker only: after asking, a worker claims the point under
a PostgreSQL advisory lock of the study, and gives it up when any trial of the study
already holds it (measured by a worker, being measured, or measured before and added
to the study from our tables). Points given up, and points the device cannot run, are
told as FAIL with a `skipped` attribute saying why; the sampler learns nothing from
them and no budget counts them. `--trials` counts the points the workers claimed,
all of them together.

A claim names the worker's run. Points a worker asked but will not measure (its budget
or time spent, Ctrl-C, an error) are given back as it stops (`release`); the claims of a
worker that died without giving them back (killed, its machine gone) are given back by
the next worker to ask, once that worker's run lease is gone (`LEASE_STALE_S`, at once
for a process of the same host). Neither holds a point nor counts in the budget."""

from __future__ import annotations

import contextlib
import functools
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import optuna

from autotune.errors import UsageError
from autotune.outcomes import Status
from autotune.samplers import GPSampler, given_up
from autotune.search import DEFAULT_SAMPLER, STARTUP_TRIALS, repair_point
from autotune.search_options import SearchOptions
from autotune.space import Config, SearchSpace
from autotune.store import Store, config_key
from autotune.store.locks import advisory_lock
from autotune.tune.control import LEASE_STALE_S
from autotune.tune.studies import MAX_SKIPS, database_errors, distributions, measured_attributes

SHARED_SAMPLERS = ("gp", "tpe", "random")
CLAIMED_BY = "claimed_by_run"  # the user attribute naming the run whose worker claimed a point
T = TypeVar("T")


def check_shared(sampler: str | None, fresh: bool, url: str | None) -> str:
    """The sampler of a shared search, or bad usage: shared searches need a database
    server (their claims take PostgreSQL's advisory locks) and a sampler that reads
    everything from the study (not the engine's tpe-local walk, CMA-ES or grid)."""
    from autotune.store import default_url
    from autotune.store.engine import parse

    if fresh:
        raise UsageError("--shared joins the shared search; --fresh does not go with it")
    if parse(url or default_url()).get_backend_name() != "postgresql":
        raise UsageError(
            "--shared needs a PostgreSQL database (--db postgresql+psycopg://...), which every worker reaches"
        )
    if sampler is not None and sampler not in SHARED_SAMPLERS:
        raise UsageError(
            f"--shared asks a sampler that reads the shared study: {', '.join(SHARED_SAMPLERS[:-1])} "
            f"or {SHARED_SAMPLERS[-1]}, not {sampler!r}"
        )
    return sampler or DEFAULT_SAMPLER


def shared_sampler(
    name: str,
    seed: int,
    space: SearchSpace,
    valid: Callable[[Config], bool],
    options: SearchOptions | None,
    live_values: Mapping[str, Sequence[Any]] | None = None,
) -> optuna.samplers.BaseSampler:
    """This worker's sampler of the shared study; gp proposes only valid points and models
    the values each knob can take for the problem (`SearchSpace.live_values`)."""
    if name == "gp":
        return GPSampler(
            distributions(space),
            live_values=live_values,
            valid=lambda params: valid(space.complete(params)),
            options=options,
            seed=seed,
        )
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(
        seed=seed, multivariate=True, constant_liar=True, n_startup_trials=STARTUP_TRIALS
    )


def _database_errors(method: Callable[..., T]) -> Callable[..., T]:
    """A method of `SharedSearch` whose storage failures are our one-line failure."""

    @functools.wraps(method)
    def wrapped(self: SharedSearch, *args: Any, **kwargs: Any) -> T:
        with database_errors(self.store.url):
            return method(self, *args, **kwargs)

    return wrapped


class SharedSearch:
    """The `Search` interface the tuning loop uses, on a study every worker shares."""

    exhausted = False

    def __init__(
        self,
        store: Store,
        study: optuna.Study,
        space: SearchSpace,
        valid: Any,
        budget: int | None,
        seed: int = 0,
        violations: Callable[[Config], int] | None = None,
        run_id: int | None = None,
    ) -> None:
        """`run_id`: this worker's run, which its claims name."""
        self.store, self.study, self.space, self.valid, self.budget = store, study, space, valid, budget
        self.run_id = run_id
        self.violations = violations  # rules a config breaks: steers repairs (see `next_bases`)
        self.distributions = distributions(space)
        self.random = random.Random(
            study.sampler._rng.rng.randint(0, 2**31) if hasattr(study.sampler, "_rng") else seed
        )

    def _lock(self) -> Any:
        return advisory_lock(self.store.engine, f"shared study {self.study.study_name}")

    def add_history(self, config: Config, value: float | None) -> None:
        """Nothing: the study holds what was measured before (added from our tables)."""

    @_database_errors
    def enqueue(self, config: Config) -> None:
        """Queue a point (a preset, a warm start) unless the study has it already."""
        with self._lock():
            if not any(t.params == config for t in self.study.get_trials(deepcopy=False)):
                self.study.enqueue_trial(config, skip_if_exists=False)

    @_database_errors
    def ask(self) -> tuple[optuna.trial.Trial, Config] | None:
        """A point no worker measured or is measuring, claimed for this one; None once the
        workers together have claimed the budget. A proposal that is taken or invalid is
        given up and its nearest free valid point queued instead (as `Search` repairs)."""
        for _ in range(MAX_SKIPS):
            trial = self.study.ask(self.distributions)
            config = self.space.complete(trial.params)
            usable = self.valid(config)
            with self._lock():
                trials = self._release_orphans(self.study.get_trials(deepcopy=False))
                if self.budget is not None and sum(1 for t in trials if _counts(t)) >= self.budget:
                    self._skip(trial, "budget spent")
                    return None
                holding = [t for t in trials if t.number != trial.number and _holds_point(t)]
                held = {config_key(t.params) for t in holding}
                if usable and config_key(config) not in held:
                    if self.run_id is not None:  # first: a claim that names no run is never given back
                        trial.set_user_attr(CLAIMED_BY, self.run_id)
                    trial.set_user_attr("claimed", True)
                    return trial, config
            self._skip(trial, "taken" if usable else "invalid")
            measured_or_claimed = [t.params for t in holding if t.state != optuna.trial.TrialState.FAIL]
            repaired = self._repair(config, held, measured_or_claimed)
            if repaired is None:
                return None
            self.study.enqueue_trial(repaired, skip_if_exists=False)
        return None

    def _repair(self, config: Config, held: set[str], known: Sequence[Config] = ()) -> Config | None:
        """The nearest valid point no trial holds (`repair_point`, as `Search` repairs); the
        `known` valid points: those workers claimed or measured."""
        names, knobs = list(self.space.knobs), list(self.space.knobs.values())

        def as_config(point: tuple[int, ...]) -> Config:
            return {name: knob.values[i] for name, knob, i in zip(names, knobs, point, strict=True)}

        def as_point(values: Config) -> tuple[int, ...]:
            return tuple(knob.values.index(values[name]) for name, knob in zip(names, knobs, strict=True))

        def usable(point: tuple[int, ...]) -> bool:
            candidate = as_config(point)
            return config_key(candidate) not in held and self.valid(candidate)

        count = self.violations
        found = repair_point(
            as_point(config),
            [len(k.values) for k in knobs],
            usable,
            self.random,
            None if count is None else lambda point: count(as_config(point)),
            lambda: [as_point(self.space.complete(c)) for c in known],
        )
        return None if found is None else as_config(found)

    @_database_errors
    def tell(self, trial: optuna.trial.Trial, value: float | None, record: Any = None) -> None:
        """The point's measurement, as the study's trial; nothing where another worker
        gave the claim back meanwhile (it judged this one gone: a clock far off, say):
        the measurement is in our tables, and the point is free to measure again."""
        try:
            if record is not None:
                for key, attribute in measured_attributes(record).items():
                    trial.set_user_attr(key, attribute)
            ok = value is not None and (record is None or record.status == Status.OK)
            if ok:
                self.study.tell(trial, value)
            else:
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:
            pass

    @_database_errors
    def release(self, trial: optuna.trial.Trial) -> None:
        """Give back a point this worker claimed and will not measure: it holds nothing
        and counts in no budget; another worker may take it."""
        self._skip(trial, "released")

    def _skip(self, trial: optuna.trial.Trial, why: str) -> None:
        trial.set_user_attr("skipped", why)
        self.study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def _release_orphans(self, trials: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
        """The study's trials, once the claims of workers that are gone are given back
        (called under the study's lock)."""
        claims = {
            t.number: t.user_attrs[CLAIMED_BY]
            for t in trials
            if t.state == optuna.trial.TrialState.RUNNING
            and _counts(t)
            and t.user_attrs.get(CLAIMED_BY, self.run_id) != self.run_id
        }
        gone = self.store.runs_gone(set(claims.values()), LEASE_STALE_S)
        orphans = [t for t in trials if claims.get(t.number) in gone]
        storage = self.study._storage
        for trial in orphans:
            # Marked first, then failed: a worker judged gone that tells its point in
            # between leaves it COMPLETE, a measurement all the same (`given_up`).
            with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
                storage.set_trial_user_attr(trial._trial_id, "skipped", "its worker stopped")
                storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
        return self.study.get_trials(deepcopy=False) if orphans else trials


def _counts(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether a trial is a point a worker claimed and did not give back: it counts in
    the shared budget."""
    return bool(trial.user_attrs.get("claimed")) and not given_up(trial)


def _holds_point(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether a trial of the study stands for a measurement of its point: claimed by a
    worker, or added from our tables; not one given up."""
    attrs = trial.user_attrs
    return not given_up(trial) and bool(attrs.get("claimed") or "trial_id" in attrs)
