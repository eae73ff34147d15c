"""A `gp` setting: the time model's kernel adds an offset per value of each knob of three
values or more (`value_offsets`), so one value may be faster than those beside it."""

import numpy as np
import pytest
from optuna.distributions import CategoricalDistribution

from autotune.samplers import GPSampler
from autotune.search import SearchOptions
from autotune.surrogate import GaussianProcess
from tests.test_gp_trust_region import bowl_search

PLAIN = SearchOptions(value_offsets=False, choose_offsets=False)  # the model without offsets


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_offsets_predict_a_knob_whose_values_have_no_order(seed):
    """Knob a's eight values each shift the time by an unordered amount; knob b is smooth.
    From 30 of the 64 points, the model with offsets predicts the other 34 far better."""
    rng = np.random.default_rng(seed)
    offsets = rng.normal(0.0, 1.0, 8)
    grid = np.array([(a, b) for a in range(8) for b in range(8)])
    pick = rng.permutation(len(grid))
    train, held_out = grid[pick[:30]], grid[pick[30:]]

    def times(points: np.ndarray) -> np.ndarray:
        return offsets[points[:, 0]] + 0.05 * (points[:, 1] - 3.5) ** 2

    def with_indices(points: np.ndarray) -> np.ndarray:  # features, then knob a's value index
        return np.hstack([points / 7.0, points[:, :1].astype(float)])

    plain = GaussianProcess(train / 7.0, times(train))
    offset = GaussianProcess(with_indices(train), times(train), offset_columns=1)
    assert offset.offset_weight > 0.0
    plain_error = np.abs(plain.predict_mean(held_out / 7.0) * plain.scale + plain.mean - times(held_out))
    offset_error = np.abs(
        offset.predict_mean(with_indices(held_out)) * offset.scale + offset.mean - times(held_out)
    )
    assert offset_error.mean() < 0.5 * plain_error.mean()
    _, deviation = offset.predict(with_indices(held_out))
    assert np.all(deviation > 0.0)


def test_the_sampler_appends_the_value_indices_of_knobs_with_three_values_or_more():
    space = {"k0": CategoricalDistribution((1, 2, 4, 8)), "k1": CategoricalDistribution((0, 1))}
    plain = GPSampler(space, options=PLAIN, seed=0)
    plain.prepare(space)
    offsets = GPSampler(space, options=SearchOptions(value_offsets=True, choose_offsets=False), seed=0)
    offsets.prepare(space)
    points = [(0, 0), (3, 1), (2, 0)]
    assert offsets._offset_knobs() == [0]  # a switch's two values need no offsets
    extended = offsets._features(points)
    assert np.array_equal(extended[:, :-1], plain._features(points))
    assert extended[:, -1].tolist() == [0.0, 3.0, 2.0]
    assert not SearchOptions.parse("value_offsets=false").value_offsets
    assert SearchOptions().value_offsets and SearchOptions().choose_offsets  # the default


def test_a_search_with_offsets_proposes_new_points_and_differs_from_the_plain_model():
    plain = bowl_search(PLAIN)
    offsets = bowl_search(SearchOptions(value_offsets=True, choose_offsets=False))
    assert plain[:10] == offsets[:10]  # the same start points
    assert plain != offsets
    assert len(set(offsets)) == 30


def test_each_step_takes_the_offsets_only_where_they_ordered_the_latest_points_better():
    """`choose_offsets`: with too few points that ran, the plain model; on times made of an
    unordered offset per value of one knob, the model with offsets."""
    space = {"a": CategoricalDistribution(tuple(range(8))), "b": CategoricalDistribution(tuple(range(8)))}
    sampler = GPSampler(space, options=SearchOptions(), seed=0)  # the default chooses
    sampler.prepare(space)
    rng = np.random.default_rng(3)
    offsets = rng.normal(0.0, 1.0, 8)
    grid = [(a, b) for a in range(8) for b in range(8)]
    for count, index in enumerate(rng.permutation(len(grid))[:40]):
        a, b = grid[index]
        sampler._note((a, b), float(np.exp(offsets[a] + 0.05 * (b - 3.5) ** 2)))
        if count == 10:
            assert not sampler._offsets_pay()  # 11 points ran: fewer than twice CHOICE_POINTS
    assert sampler._offsets_pay()


def test_a_search_that_chooses_its_model_proposes_new_points():
    chosen = bowl_search(SearchOptions())
    assert chosen[:10] == bowl_search(PLAIN)[:10]
    assert len(set(chosen)) == 30
