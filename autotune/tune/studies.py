"""Each (device, problem) searched is also an Optuna study in the same database:
Optuna's RDB storage, its tables (`studies`, `trials`, ...) beside ours. Every point
measured becomes a trial of the study with the knobs' real values as its parameters,
the median time in ms as its value (failures: state FAIL) and the status, kernel
fingerprint, origin, run and our trial id as attributes, so `optuna studies --storage
URL`, `optuna-dashboard URL` and Optuna's parameter importances read our searches.

The study mirrors what our tables hold (they stay the record): opening it adds the
trials it lacks (older runs, another process's), so it never holds one twice. Cached
answers, re-timings and points rejected before compiling are not measurements of a
point and are left out."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import optuna
from sqlalchemy.exc import SQLAlchemyError

from autotune.devices import DeviceInfo
from autotune.errors import UsageError
from autotune.families import KernelFamily, Problem
from autotune.outcomes import Status, first_measurement, known_status
from autotune.samplers import given_up
from autotune.store import Store, Trial
from autotune.store.engine import failure
from autotune.store.locks import OPTUNA_TABLES_LOCK, advisory_lock
from autotune.tune.ledger import Ledger

OPENING_TRIES = 5  # SQLite: processes creating Optuna's tables at once may collide; try again
MAX_SKIPS = 500  # a shared search gives up after this many asks in a row it could not use


def study_name(family: KernelFamily, problem: Problem, device: DeviceInfo) -> str:
    """One study per (device, problem) and version of the space: what `optuna studies`
    lists. Optuna refuses a parameter whose choices changed (a knob given more values),
    so a changed space starts a new study, filled from our tables like any other."""
    size = "x".join(str(n) for n in problem.size)
    label = family.describe_kind(problem.kind())
    space = family.space.fingerprint[:8]
    return f"autotune {family.name} {label} {size} on {device.name} [{device.driver_version}] space {space}"


def open_storage(store: Store) -> optuna.storages.RDBStorage:
    """Optuna's storage in the store's database, its tables made if need be (one
    process at a time: PostgreSQL's advisory lock; SQLite: tries again)."""
    options: dict[str, Any] = {}
    if store.engine.dialect.name == "sqlite":
        options["connect_args"] = {"timeout": 60}
    for attempt in range(OPENING_TRIES):
        try:
            with advisory_lock(store.engine, OPTUNA_TABLES_LOCK):
                return optuna.storages.RDBStorage(store.url, engine_kwargs=options)
        except SQLAlchemyError as exc:
            if attempt == OPENING_TRIES - 1:
                raise failure(store.url, exc) from None
            time.sleep(0.2 * (attempt + 1))
        except RuntimeError as exc:  # Optuna tables of another Optuna version
            raise UsageError(
                f"cannot use the Optuna tables in the database: {' '.join(str(exc).split())}"
            ) from None
    raise AssertionError("unreachable")


@contextmanager
def database_errors(url: str) -> Iterator[None]:
    """Optuna's storage failing (the server gone, the database dropped) as our one-line
    database failure, its password masked."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise failure(url, exc) from None
    except optuna.exceptions.StorageInternalError as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        raise failure(url, cause) from None


def distributions(space: Any) -> dict[str, optuna.distributions.BaseDistribution]:
    """Each knob as Optuna sees it: a choice among its real values."""
    return {name: optuna.distributions.CategoricalDistribution(k.values) for name, k in space.knobs.items()}


def measured_attributes(trial: Trial) -> dict[str, Any]:
    """What a study's trial says of our trial row."""
    return {
        "trial_id": trial.id,
        "run_id": trial.run_id,
        "status": trial.status,
        "origin": trial.origin,
        "kernel_sha": trial.kernel_sha,
        "error": (trial.error or "")[:500],
    }


def _mirrored(trial: Trial) -> bool:
    """A first measurement of a status this release knows (another's status answers for
    nothing here: the point is to be measured again)."""
    return first_measurement(trial.origin) and known_status(trial.status) and trial.status != Status.INVALID


class StudyMirror:
    """The Optuna study of one (device, problem), kept equal to its measured trials."""

    def __init__(
        self,
        store: Store,
        storage: optuna.storages.RDBStorage,
        family: KernelFamily,
        problem: Problem,
        device: DeviceInfo,
        trials: list[Trial],
    ) -> None:
        self.store, self.family = store, family
        self.distributions = distributions(family.space)
        with database_errors(store.url):
            self.study = optuna.create_study(
                storage=storage,
                study_name=study_name(family, problem, device),
                direction="minimize",
                load_if_exists=True,
            )
            if not self.study.user_attrs:
                self.study.set_user_attr("family", family.name)
                self.study.set_user_attr("problem", problem.key())
                self.study.set_user_attr("device", device.fingerprint)
            # One process at a time adds what the study lacks (PostgreSQL: an advisory lock).
            with advisory_lock(store.engine, f"shared study {self.study.study_name}"):
                held = self.study.get_trials(deepcopy=False)
                known = {t.user_attrs.get("trial_id") for t in held}
                claimed = [t.params for t in held if t.user_attrs.get("claimed") and not given_up(t)]
                for trial in trials:
                    if trial.id not in known and self.family.read_config(trial.config) not in claimed:
                        self.add(trial)

    def add(self, trial: Trial) -> None:
        """A trial as the study's, if it measured a point."""
        config = self.family.read_config(trial.config)
        if config is None or not _mirrored(trial):
            return
        if any(value not in self.distributions[name].choices for name, value in config.items()):
            return  # a value today's space lacks: in our tables only
        ok = trial.status == Status.OK and trial.time_ms is not None
        attributes = {**measured_attributes(trial), "config": json.dumps(config, sort_keys=True)}
        frozen = optuna.trial.create_trial(
            params=config,
            distributions=self.distributions,
            value=trial.time_ms if ok else None,
            state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL,
            user_attrs=attributes,
        )
        with database_errors(self.store.url):
            self.study.add_trial(frozen)


class Studies:
    """The Optuna studies of one search: the storage, opened once, and one mirror per
    problem. `mirror_records`: each trial recorded is added to its study (a shared
    search tells the study's own trial instead)."""

    def __init__(self, store: Store, family: KernelFamily, device: DeviceInfo, mirror_records: bool) -> None:
        self.store, self.family, self.device = store, family, device
        self.mirror_records = mirror_records
        self.storage = open_storage(store)
        self.mirrors: dict[int, StudyMirror] = {}  # problem id -> its study

    def attach(self, ledger: Ledger, problem: Problem) -> StudyMirror:
        """The problem's study, holding every trial of `ledger` (added once)."""
        if ledger.problem_id not in self.mirrors:
            self.mirrors[ledger.problem_id] = StudyMirror(
                self.store, self.storage, self.family, problem, self.device, ledger.trials
            )
        mirror = self.mirrors[ledger.problem_id]
        if self.mirror_records:
            ledger.on_record = mirror.add
        return mirror

    def shared(self, ledger: Ledger, problem: Problem, sampler: optuna.samplers.BaseSampler) -> optuna.Study:
        """The problem's study as a shared search asks it, with this worker's sampler."""
        name = self.attach(ledger, problem).study.study_name
        with database_errors(self.store.url):
            return optuna.load_study(study_name=name, storage=self.storage, sampler=sampler)
