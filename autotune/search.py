"""The search engine: Optuna's ask/tell loop over any declared SearchSpace.

It knows nothing about kernels: an objective is whatever the caller measures, so the
same engine tunes kernels on a device and replays measured landscapes. Knobs are
encoded as the index of their value (ordinal), which every Optuna sampler, CMA-ES
included, understands.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import optuna

from autotune.errors import UsageError
from autotune.space import Config, SearchSpace

SAMPLERS = ("tpe", "random", "cmaes", "grid")

optuna.logging.set_verbosity(logging.ERROR)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", message=".*warn_independent_sampling.*", category=FutureWarning)


def make_sampler(name: str, seed: int, space: SearchSpace) -> optuna.samplers.BaseSampler:
    if name == "tpe":
        return optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=10, multivariate=True, warn_independent_sampling=False
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

    def __init__(self, space: SearchSpace, sampler: str = "tpe", seed: int = 0) -> None:
        self.space = space
        self.distributions = {
            k.name: optuna.distributions.IntDistribution(0, len(k.values) - 1) for k in space.knobs.values()
        }
        self.study = optuna.create_study(direction="minimize", sampler=make_sampler(sampler, seed, space))

    def encode(self, config: Config) -> dict[str, int]:
        return {name: self.space.knobs[name].values.index(value) for name, value in config.items()}

    def decode(self, params: dict[str, Any]) -> Config:
        return {name: self.space.knobs[name].values[int(params[name])] for name in self.space.knobs}

    def add_history(self, config: Config, value: float | None) -> None:
        """A point measured before (another run, a resumed run): the sampler learns from it."""
        state = optuna.trial.TrialState.COMPLETE if value is not None else optuna.trial.TrialState.FAIL
        self.study.add_trial(
            optuna.trial.create_trial(
                params=self.encode(config),
                distributions=self.distributions,
                value=value,
                state=state,
            )
        )

    def enqueue(self, config: Config) -> None:
        self.study.enqueue_trial(self.encode(config), skip_if_exists=False)

    def ask(self) -> tuple[optuna.trial.Trial, Config]:
        trial = self.study.ask(self.distributions)
        return trial, self.decode(trial.params)

    def tell(self, trial: optuna.trial.Trial, value: float | None) -> None:
        if value is None:
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, value)

    @property
    def exhausted(self) -> bool:
        """Grid search has visited every point."""
        sampler = self.study.sampler
        return isinstance(sampler, optuna.samplers.GridSampler) and sampler.is_exhausted(self.study)
