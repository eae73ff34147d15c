"""Fits that start from the same model's previous fit (`warm_fits`): what they keep,
what they ignore, and that searches whose model set never fills are unchanged."""

import math

import numpy as np
import pytest

from autotune.errors import UsageError
from autotune.search import Search, SearchOptions
from autotune.space import SearchSpace
from autotune.surrogate import FIT_SWEEPS, GaussianProcess, WarmStart


def random_points(seed: int, count: int, knobs: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 6, size=(count, knobs)) / 5.0, np.log(rng.lognormal(size=count))


def likelihood(model: GaussianProcess) -> float:
    model._prepare_fit()
    noise, weight = np.ones(1) * model.noise, np.ones(1) * model.offset_weight
    return float(model._likelihoods(model.length_scales[None], noise, weight)[0])


class CountingProcess(GaussianProcess):
    """Counts the likelihood batches its fit scores."""

    def _likelihoods(self, length_scales, noises, weights):
        self.batches = getattr(self, "batches", 0) + 1
        return super()._likelihoods(length_scales, noises, weights)


def test_a_warm_fit_keeps_the_last_fit_and_sweeps_once_from_it():
    x, y = random_points(0, 60, 5)
    warm = WarmStart()
    cold = CountingProcess(x, y, warm=warm)
    assert np.array_equal(warm.length_scales, cold.length_scales)
    assert (warm.noise, warm.offset_weight) == (cold.noise, cold.offset_weight)
    again = CountingProcess(x, y, warm=warm)
    assert again.batches < cold.batches  # one sweep, not FIT_SWEEPS
    assert FIT_SWEEPS > 1
    # Each sweep only takes a value that raises the likelihood: never below where it started.
    assert likelihood(again) >= likelihood(cold) - 1e-9
    # The next set (one point in, one out) starts from there and ends as good as a cold fit
    # of that set, or near it.
    x2, y2 = np.vstack([x[1:], x[:1] * 0.5]), np.concatenate([y[1:], y[:1] - 1.0])
    warm_next, cold_next = GaussianProcess(x2, y2, warm=warm), GaussianProcess(x2, y2)
    assert likelihood(warm_next) >= likelihood(cold_next) - 0.05 * abs(likelihood(cold_next))


def test_a_warm_start_of_another_shape_is_a_cold_fit():
    x, y = random_points(1, 40, 5)
    warm = WarmStart(length_scales=np.full(3, 5.0), noise=0.1)
    fitted, cold = GaussianProcess(x, y, warm=warm), GaussianProcess(x, y)
    assert np.array_equal(fitted.length_scales, cold.length_scales)
    assert fitted.noise == cold.noise
    assert warm.length_scales is not None and warm.length_scales.shape == (5,)


def _time(config: dict) -> float:
    return math.exp(abs(config["a"] - 3) * 0.4 + abs(config["b"] - 1) * 0.3 + (config["c"] != 2) * 0.5)


def _run(warm_fits: str, evaluations: int) -> tuple[list[dict], Search]:
    space = SearchSpace.from_dict({"knobs": {k: {"values": list(range(6))} for k in "abc"}})
    options = SearchOptions(model_points=20, warm_fits=warm_fits)
    search = Search(space, "gp", seed=11, options=options)
    asked = []
    for _ in range(evaluations):
        trial, config = search.ask()
        asked.append(config)
        search.tell(trial, _time(config))
    return asked, search


def test_a_search_whose_model_set_never_fills_is_unchanged():
    """Up to `model_points` measured points every fit is cold: the same search either way.
    Past that, the warm search fits from its earlier fits and still proposes new points."""
    on, search_on = _run("all", 40)
    off, search_off = _run("off", 40)
    assert on[:21] == off[:21]  # the 21st ask sees 20 points: the first fit of a full set
    assert search_on.gp is not None and search_off.gp is not None
    assert search_on.gp._warm and not search_off.gp._warm
    assert all(w.length_scales is not None for w in search_on.gp._warm.values())
    assert len({tuple(sorted(c.items())) for c in on}) == len(on)
    _, search_choice = _run("choice", 40)
    assert search_choice.gp is not None and search_choice.gp._warm
    assert {role for role, _ in search_choice.gp._warm} == {"choice"}


def test_the_setting_reads_from_text_and_refuses_other_values():
    assert SearchOptions.parse("warm_fits=off").warm_fits == "off"
    assert SearchOptions().warm_fits == "choice"
    with pytest.raises(UsageError, match="warm_fits must be off, choice or all"):
        SearchOptions.parse("warm_fits=maybe")
