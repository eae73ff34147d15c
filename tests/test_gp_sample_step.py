"""`global_step = sample`: the global step takes the fastest point of one random draw of the
time model (Thompson sampling) instead of the lowest predicted time."""

import numpy as np
import pytest

from autotune import surrogate
from autotune.errors import UsageError
from autotune.search_options import SearchOptions
from autotune.surrogate import GaussianProcess


def _model(seed: int = 0) -> tuple[GaussianProcess, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, size=(30, 3)) / 5.0
    y = np.sin(3 * x[:, 0]) + x[:, 1] ** 2 + 0.01 * rng.standard_normal(30)
    return GaussianProcess(x, y), rng.integers(0, 6, size=(12, 3)) / 5.0


def test_draws_spread_as_the_model_predicts():
    model, points = _model()
    rng = np.random.default_rng(1)
    draws = np.array([model.sample(points, rng) for _ in range(4000)])
    mean, std = model.predict(points)
    assert np.allclose(draws.mean(0), mean, atol=4 * std.max() / np.sqrt(4000) + 1e-3)
    assert np.allclose(draws.std(0), std, rtol=0.1, atol=1e-3)
    # Jointly, not each alone: a point drawn twice takes the same value in one draw.
    twice = model.sample(np.vstack([points[:1], points[:1]]), rng)
    assert twice[0] == pytest.approx(twice[1], abs=1e-3)


def test_the_sample_order_puts_its_shortlist_first_and_follows_its_draw():
    model, _ = _model()
    rng = np.random.default_rng(2)
    measured = model.x
    times = list(np.exp(model.y * model.scale + model.mean))
    candidates = rng.integers(0, 6, size=(400, 3)) / 5.0

    def order(seed: int) -> np.ndarray:
        return surrogate.ranking(
            measured, times, candidates, acquisition="sample", rng=np.random.default_rng(seed)
        )

    first = order(3)
    assert sorted(first) == list(range(len(candidates)))  # every candidate, once
    assert np.array_equal(first, order(3))  # one seed, one order
    firsts = {int(order(seed)[0]) for seed in range(20)}
    assert len(firsts) > 1  # draws differ where the model is unsure
    mean, std = GaussianProcess(measured, np.log(times)).predict(candidates)
    shortlist = set(np.argsort(mean - 2.0 * std, kind="stable")[: surrogate.SAMPLED].tolist())
    assert set(first[: surrogate.SAMPLED].tolist()) == shortlist
    rest = first[surrogate.SAMPLED :]
    assert np.all(np.diff(mean[rest]) >= 0)  # after the shortlist: by the predicted time


def test_the_option_is_read_and_checked():
    assert SearchOptions.parse("global_step=sample").global_step == "sample"
    with pytest.raises(UsageError, match="global_step"):
        SearchOptions.parse("global_step=thompson")


def _proposals(settings: str, seed: int, count: int = 40) -> list[dict]:
    """A search of a 6-knob space (a third of it invalid) on a smooth bowl: what it asks."""
    from autotune.replay import _space
    from autotune.search import Search

    space = _space("large", {f"k{i}": list(range(8)) for i in range(6)})

    def valid(config):
        return (config["k0"] + config["k1"] + config["k2"]) % 3 != 0

    search = Search(space, "gp", seed, valid=valid, options=SearchOptions.parse(settings))
    proposed = []
    for _ in range(count):
        trial, config = search.ask()
        assert valid(config)
        proposed.append(config)
        search.tell(trial, 1.0 + sum((v - 2) ** 2 for v in config.values()) / 10)
    return proposed


@pytest.mark.parametrize(
    "settings", ["global_step=sample", "stall_after=4,stall_step=sample", "sample_after=20"]
)
def test_a_search_that_samples_its_global_steps_repeats_with_its_seed(settings):
    """Draws come from the search's own random stream: one seed, one trajectory; another
    seed, another; every point valid, and the search still closes on the optimum."""
    first = _proposals(settings, 5)
    assert _proposals(settings, 5) == first
    assert _proposals(settings, 6) != first
    best = min(sum((v - 2) ** 2 for v in c.values()) for c in first)
    assert best <= 2  # within two steps of the optimum (all knobs at 2) after 40 points


def test_sampling_after_n_evaluations_leaves_the_first_n_as_they_were():
    plain, late = _proposals("", 7), _proposals("sample_after=20", 7)
    assert late[:20] == plain[:20]
    assert late[20:] != plain[20:]
    with pytest.raises(UsageError, match="sample_after"):
        SearchOptions.parse("sample_after=-1")
