"""`start_spread`: each start point is, of several random draws, the one most knobs apart
from the points already measured or in flight."""

import pytest
from optuna.distributions import CategoricalDistribution

from autotune.errors import UsageError
from autotune.samplers import GPSampler, knobs_apart
from autotune.search import SearchOptions

VALUES = (3, 5, 7, 9)  # no powers of two mixed in, no switches: every knob drawn at random


def _second_start(spread: int, seed: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    space = {f"k{i}": CategoricalDistribution(VALUES) for i in range(4)}
    sampler = GPSampler(space, options=SearchOptions(start_spread=spread), seed=seed)
    sampler.prepare(space)
    first = sampler._start_point()
    sampler._note(first, 1.0)
    return first, sampler._start_point()


def test_spread_start_points_lie_apart_from_those_measured():
    # 64 draws of 4 knobs of 4 values: one differs in all four with chance 1 - (1 - 81/256)^64
    for seed in range(20):
        first, second = _second_start(64, seed)
        assert knobs_apart(first, second) == 4
    # the first draw, as without the setting, is that far in about a third of the seeds
    plain = [knobs_apart(*_second_start(0, seed)) for seed in range(20)]
    assert min(plain) < 4


def test_the_setting_reads_from_text_and_refuses_a_negative_count():
    assert SearchOptions.parse("start_spread=16").start_spread == 16
    assert SearchOptions().start_spread == 32
    with pytest.raises(UsageError):
        SearchOptions.parse("start_spread=-1")
