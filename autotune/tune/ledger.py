"""What is known about one (device, problem): every trial, loaded once from the store
and updated on each record, with the reading of each stored config under today's
space and template."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

from autotune.errors import UsageError
from autotune.families import KernelFamily, Problem
from autotune.outcomes import (
    Measurement,
    Origin,
    Status,
    counts_as_trial,
    first_measurement,
    known_status,
)
from autotune.space import Config
from autotune.store import Store, Trial, config_key


class Ledger:
    def __init__(
        self,
        store: Store,
        family: KernelFamily,
        problem: Problem,
        device_id: int,
        problem_id: int,
        run_id: int,
    ) -> None:
        self.store = store
        self.family = family
        self.problem = problem
        self.device_id = device_id
        self.problem_id = problem_id
        self.run_id = run_id
        self.on_record: Callable[[Trial], None] | None = None  # told of each trial recorded
        self.trials: list[Trial] = []
        self.first: dict[str, Trial] = {}  # config key -> its first measurement of today's kernel
        self._keys: dict[int, str | None] = {}  # trial id -> config key under today's space
        self._fingerprints: dict[str, str | None] = {}  # config key -> today's kernel fingerprint
        for trial in store.trials(device_id=device_id, problem_id=problem_id):
            self._add(trial)

    # -- reading stored rows ---------------------------------------------------

    def key_of(self, trial: Trial) -> str | None:
        """The trial's config key if what it measured is the kernel this release renders
        for that config (invalid points: always), else None: a time measured on another
        template's kernel says nothing about today's."""
        if trial.id not in self._keys:
            config = self.family.read_config(trial.config)
            key = None if config is None else config_key(config)
            if key is not None and trial.status != Status.INVALID:
                fingerprint = self._fingerprint(key)
                if fingerprint is None or trial.kernel_sha != fingerprint:
                    key = None
            self._keys[trial.id] = key
        return self._keys[trial.id]

    def _fingerprint(self, key: str) -> str | None:
        if key not in self._fingerprints:
            try:
                self._fingerprints[key] = self.family.render(json.loads(key), self.problem).fingerprint
            except UsageError:
                self._fingerprints[key] = None
        return self._fingerprints[key]

    def _add(self, trial: Trial) -> None:
        self.trials.append(trial)
        key = self.key_of(trial)
        if key is not None and first_measurement(trial.origin) and known_status(trial.status):
            self.first.setdefault(key, trial)

    # -- questions -------------------------------------------------------------

    def measurements(self) -> list[tuple[str, Trial]]:
        """(key, trial) of every trial that measured today's kernel of its config."""
        return [(key, t) for t in self.trials if (key := self.key_of(t)) is not None]

    def ok_first(self) -> list[Trial]:
        """Verified first measurements of today's kernels: what re-timing chooses among."""
        return [
            t
            for t in self.trials
            if t.status == Status.OK and first_measurement(t.origin) and self.key_of(t) is not None
        ]

    def best_ms(self) -> float:
        times = [t.time_ms for _, t in self.measurements() if t.status == Status.OK and t.time_ms is not None]
        return min(times, default=float("inf"))

    def counted(self, run_id: int | None = None) -> tuple[int, Counter[str]]:
        """Trials that count toward a run's budget (not re-timings, not rejected points),
        and their failures by status."""
        run_id = self.run_id if run_id is None else run_id
        count, failures = 0, Counter[str]()
        for t in self.trials:
            if t.run_id == run_id and counts_as_trial(t.origin, t.status):
                count += 1
                if t.status != Status.OK:
                    failures[t.status] += 1
        return count, failures

    def keys_in_run(self) -> set[str]:
        return {t.config_key for t in self.trials if t.run_id == self.run_id}

    def numbered(self) -> int:
        """The next trial number after every first measurement that ran."""
        return sum(1 for t in self.trials if first_measurement(t.origin) and t.status != Status.INVALID)

    # -- writes ----------------------------------------------------------------

    def record(
        self,
        m: Measurement,
        config: Config,
        key: str,
        origin: Origin,
        number: int,
        kernel_sha: str | None = None,
    ) -> Trial:
        trial = self.store.add_trial(
            run_id=self.run_id,
            device_id=self.device_id,
            problem_id=self.problem_id,
            number=number,
            origin=origin.value,
            config=json.dumps(config),
            config_key=key,
            status=m.status.value,
            time_ms=m.time_ms,
            min_ms=m.min_ms,
            max_ms=m.max_ms,
            runs=m.runs,
            compile_ms=m.compile_ms,
            max_error=m.max_error,
            error=m.error,
            kernel_sha=kernel_sha if m.status is not Status.INVALID else None,
        )
        self._add(trial)
        if self.on_record is not None:
            self.on_record(trial)
        return trial

    def record_cached(self, earlier: Trial, number: int) -> Trial:
        """A point measured before on this device and problem: answered, not re-run."""
        answer = Measurement(
            Status(earlier.status),
            error=earlier.error,
            time_ms=earlier.time_ms,
            min_ms=earlier.min_ms,
            max_ms=earlier.max_ms,
            max_error=earlier.max_error,
        )
        config = json.loads(earlier.config)
        return self.record(answer, config, earlier.config_key, Origin.CACHED, number, earlier.kernel_sha)
