"""The `gp` sampler's `failures` setting: failed points told as the worst time (the
default) or kept apart, in a model of where points fail."""

import numpy as np
import pytest

from autotune import surrogate
from autotune.errors import UsageError
from autotune.search import Search, SearchOptions
from autotune.space import SearchSpace

SIZES = [3 + 2 * i for i in range(31)]  # odd: no power-of-two column in the model's view
MEASURED = [*range(0, 21, 2), 24, 26, 28, 30]  # value indices


def _time(index: int) -> float | None:
    """Faster up to index 21, where the points stop running (index 23 and above fail)."""
    return None if index >= 23 else 1.0 + 0.02 * (index - 21) ** 2


def _features(indices: list[int]) -> np.ndarray:
    return np.array([[i / (len(SIZES) - 1)] for i in indices])


def test_failures_setting_reads_from_text_and_checks_its_values():
    options = SearchOptions.parse("failures=kernel")
    assert options.failures == "kernel" and SearchOptions().failures == "worst"
    quantile = SearchOptions.parse("failures=quantile,failure_quantile=0.5")
    assert (quantile.failures, quantile.failure_quantile) == ("quantile", 0.5)
    assert SearchOptions.parse(quantile.describe()) == quantile
    assert SearchOptions.parse("failures=model").describe() == "failures=model"
    for bad in ("failures=ignore", "failure_quantile=1.5", "failure_quantile=x"):
        with pytest.raises(UsageError):
            SearchOptions.parse(bad)


@pytest.mark.parametrize("kind", [surrogate.SuccessModel, surrogate.KernelSuccess])
def test_the_models_of_failures_expect_failures_where_points_failed(kind):
    measured = MEASURED
    failed = np.array([_time(i) is None for i in measured])
    model = kind(_features(measured), failed)
    chance = model.probability(_features([5, 11, 25, 29]))
    assert chance[0] > 0.8 and chance[1] > 0.8  # among points that ran
    assert chance[2] < 0.5 and chance[3] < 0.5  # among points that failed
    assert (chance >= kind.FLOOR).all() and (chance <= 1.0).all()


@pytest.mark.parametrize("acquisition", ["mean", "ei"])
def test_a_model_of_failures_keeps_the_cliff_out_of_the_time_model(acquisition):
    """Told as the worst time, the failures at 24 and above make a cliff the smooth
    model bends toward, so it expects the points just past the best measured one (20)
    to be slower and proposes 19; kept apart, the time model follows the descent to
    21-22 and the model of failures keeps it off 23 and above."""
    candidates = [i for i in range(len(SIZES)) if i not in MEASURED]
    values = [_time(i) for i in MEASURED]

    def proposal(failures: str) -> int:
        index = surrogate.propose(
            _features(MEASURED), values, _features(candidates), acquisition=acquisition, failures=failures
        )
        return candidates[index]

    assert proposal("worst") < 20
    for failures in ("model", "kernel"):
        assert proposal(failures) in (21, 22)


def test_the_sampler_passes_the_failures_setting_to_the_model():
    space = SearchSpace.from_dict({"knobs": {"x": {"values": SIZES}}})
    proposals = {}
    for failures in ("worst", "kernel"):
        search = Search(space, "gp", seed=3, options=SearchOptions(failures=failures))
        for index in MEASURED:
            search.add_history({"x": SIZES[index]}, _time(index))
        assert search.gp is not None
        search.gp.prepare(search.distributions)
        search.gp.observe(search.study)
        assert len(search.gp.visited) % 2 == 1  # a local turn: the best point's neighbours
        proposals[failures] = search.gp._gp_proposal()
    assert proposals["worst"][0] < 20  # type: ignore[index]
    assert proposals["kernel"] in ((21,), (22,))


def test_the_model_of_failures_sees_failures_beyond_the_fastest_points():
    """The time model sees the `model_points` fastest points, which leave every failure
    out once enough ran; the model of failures still gets the latest failures."""
    space = SearchSpace.from_dict({"knobs": {"x": {"values": SIZES}}})
    for failures, seen in (("worst", 0), ("kernel", 2)):
        search = Search(space, "gp", seed=3, options=SearchOptions(failures=failures, model_points=4))
        for index in MEASURED:
            search.add_history({"x": SIZES[index]}, _time(index))
        assert search.gp is not None
        search.gp.prepare(search.distributions)
        search.gp.observe(search.study)
        chosen = search.gp._model_set()
        assert sum(search.gp.visited[p] is None for p in chosen) == seen
        assert sum(search.gp.visited[p] is not None for p in chosen) == 4


@pytest.mark.parametrize("failures", ["kernel", "model"])
def test_a_model_of_failures_with_nothing_that_ran_proposes_as_worst_does(failures):
    """Every measured point failed: no time model can be fitted to what ran, so the
    proposal is the one "worst" makes, not an error."""
    rng = np.random.default_rng(5)
    measured, candidates = rng.random((6, 3)), rng.random((20, 3))
    values = [None] * len(measured)
    want = surrogate.propose(measured, values, candidates, failures="worst")
    assert surrogate.propose(measured, values, candidates, failures=failures) == want
