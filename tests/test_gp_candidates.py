"""The global step's candidates in a space small enough to list."""

import optuna

from autotune.samplers import GPSampler


def test_a_point_in_flight_when_the_space_is_listed_comes_back_once_given_up():
    """The listing is kept for the whole search: a point claimed while it was made and
    later given up (a shared search's worker gone) is a candidate again."""
    space = {
        "x": optuna.distributions.CategoricalDistribution([1, 2, 4, 8]),
        "y": optuna.distributions.CategoricalDistribution([0, 1]),
    }
    sampler = GPSampler(space, valid=lambda params: not (params["x"] == 8 and params["y"] == 1))
    sampler.prepare(space)
    sampler.visited = {(0, 0): 1.0}
    sampler.in_flight = {(1, 1)}
    assert set(sampler._candidates()) == {(0, 1), (1, 0), (2, 0), (2, 1), (3, 0)}
    sampler.in_flight = set()  # given up
    assert set(sampler._candidates()) == {(0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0)}
