"""A `gp` setting, off by default: the time model's targets pulled toward each point's
fastest measured one-knob neighbour (`envelope`), a model nearer the lower envelope of the
times than their average."""

import pytest
from optuna.distributions import CategoricalDistribution

from autotune.errors import UsageError
from autotune.samplers import GPSampler
from autotune.search import SearchOptions
from tests.test_gp_trust_region import bowl_search

SIZES = (1, 2, 4, 8)


def _sampler(options: SearchOptions) -> GPSampler:
    space = {f"k{i}": CategoricalDistribution(SIZES) for i in range(4)}
    sampler = GPSampler(space, options=options, seed=0)
    sampler.prepare(space)
    return sampler


def test_the_setting_reads_from_text_and_checks_its_value():
    assert SearchOptions.parse("envelope=0.5").envelope == 0.5
    assert SearchOptions().envelope == 0.0
    for bad in ("envelope=-0.1", "envelope=1.5"):
        with pytest.raises(UsageError):
            SearchOptions.parse(bad)


@pytest.mark.parametrize("weight", [0.0, 0.5, 1.0])
def test_each_target_moves_toward_its_fastest_one_knob_neighbour(weight):
    sampler = _sampler(SearchOptions(envelope=weight))
    slow, fast, far, failed = (0, 0, 0, 0), (1, 0, 0, 0), (1, 1, 1, 0), (0, 1, 0, 0)
    for point, time in ((slow, 4.0), (fast, 1.0), (far, 9.0), (failed, None)):
        sampler._note(point, time)
    targets = sampler._targets([slow, fast, far, failed])
    # slow's neighbour `fast` pulls it down by the weight (in log time); `fast` is its own
    # fastest; `far` is two knobs from `fast` and three from `slow`: no neighbour; a failed
    # point stays failed (its neighbour `slow` ran, but a failure is not a time).
    assert targets == pytest.approx([4.0 * 0.25**weight, 1.0, 9.0, None])


def test_a_search_with_the_envelope_proposes_new_points_and_differs_from_the_default():
    default, envelope = bowl_search(SearchOptions()), bowl_search(SearchOptions(envelope=0.5))
    assert default[:10] == envelope[:10]  # the same start points
    assert default != envelope
    assert len(set(envelope)) == 30
