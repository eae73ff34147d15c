"""Two `gp` settings, both off by default: a trust region around the best point for the
global step (`trust_region`, `trust_failures`) and log-ratio features for the pairs of size
knobs the rules tie together (`tied_ratios`)."""

import itertools
from dataclasses import replace

import pytest
from optuna.distributions import CategoricalDistribution

from autotune.errors import UsageError
from autotune.replay import _space
from autotune.samplers import GPSampler, knobs_apart
from autotune.search import Search, SearchOptions

SIZES = (1, 2, 4, 8, 16, 32)


def _sampler(options: SearchOptions, knobs: int = 4, valid=None) -> GPSampler:
    space = {f"k{i}": CategoricalDistribution(SIZES) for i in range(knobs)}
    sampler = GPSampler(space, valid=valid, options=options, seed=0)
    sampler.prepare(space)
    return sampler


def _history(sampler: GPSampler, values: list[float]) -> None:
    """Measured points in this order (each a different point; where they lie does not
    matter to the radius)."""
    sampler.visited = {}
    sampler.best = None
    points = itertools.product(range(len(SIZES)), repeat=len(sampler.sizes))
    for point, value in zip(points, values, strict=False):
        sampler._note(point, value)


def test_the_settings_read_from_text_and_check_their_values():
    options = SearchOptions.parse("trust_region=3,trust_failures=5,tied_ratios=true")
    assert (options.trust_region, options.trust_failures, options.tied_ratios) == (3, 5, True)
    assert SearchOptions.parse(options.describe()) == options
    default = SearchOptions()
    assert (default.trust_region, default.tied_ratios) == (0, False)
    for bad in ("trust_region=-1", "trust_failures=0", "tied_ratios=maybe"):
        with pytest.raises(UsageError):
            SearchOptions.parse(bad)


def test_the_trust_region_widens_on_gains_narrows_on_misses_and_collapses():
    sampler = _sampler(SearchOptions(trust_region=2, trust_failures=2, startup_trials=3))
    start = [5.0, 4.0, 3.0]  # the start points: the radius does not move
    _history(sampler, start)
    assert sampler._trust_radius() == 2
    _history(sampler, [*start, 2.0, 1.0])  # two gains in a row
    assert sampler._trust_radius() == 3
    _history(sampler, [*start, 2.0, 1.0, 9.0, 9.0])  # two misses
    assert sampler._trust_radius() == 2
    collapsed = [*start, 9.0, 9.0, 9.0, 9.0]  # 2 -> 1 -> collapsed
    _history(sampler, collapsed)
    assert sampler._trust_radius() is None
    _history(sampler, [*collapsed, 2.0])  # a gain starts it afresh
    assert sampler._trust_radius() == 2
    # no wider than the knobs that have more than one value
    _history(sampler, [*start, *(0.5**i for i in range(1, 12))])
    assert sampler._trust_radius() == 4


def test_the_global_step_keeps_to_the_trust_region():
    sampler = _sampler(SearchOptions(trust_region=1, startup_trials=3))
    _history(sampler, [5.0, 4.0, 3.0])
    centre = sampler.best[1]
    everything = list(itertools.product(range(len(SIZES)), repeat=4))
    inside = sampler._in_trust_region(everything)
    assert inside and all(knobs_apart(p, centre) <= 1 for p in inside)
    assert len(inside) == 1 + 4 * (len(SIZES) - 1)
    _history(sampler, [5.0, 4.0, 3.0, 9.0, 9.0, 9.0])  # collapsed: the whole space
    assert sampler._in_trust_region(everything) == everything


def bowl_search(options: SearchOptions, valid=None, steps: int = 30) -> list[tuple]:
    """The points a `gp` search proposes, in order, on four knobs of 0..5 whose time grows
    with the squared distance from (4, 4, 4, 4); each proposal must keep `valid`."""
    space = _space("bowl", {f"k{i}": list(range(6)) for i in range(4)})
    search = Search(space, "gp", 5, valid=valid, options=options)
    proposed = []
    for _ in range(steps):
        trial, config = search.ask()
        assert valid is None or valid(config)
        proposed.append(tuple(config.values()))
        search.tell(trial, 1.0 + sum((v - 4) ** 2 for v in config.values()))
    return proposed


def test_a_search_with_a_trust_region_proposes_valid_points_and_differs_from_the_default():
    def points(options):
        return bowl_search(options, valid=lambda c: c["k0"] + c["k1"] < 9)

    # one-knob local steps in both: diagonal ones on the tied k0, k1 reach the bowl's
    # bottom so soon that both searches then propose alike
    plain = SearchOptions(diagonal_moves="off")
    default, region = points(plain), points(replace(plain, trust_region=1))
    assert default[:10] == region[:10]  # the same start points
    assert default != region
    assert len(set(region)) == 30


def test_tied_pairs_are_the_pairs_the_rules_tie():
    """k0 must be a multiple of k1, k2 at least k3: two tied pairs; every other pair is free."""

    def valid(params):
        return params["k0"] % params["k1"] == 0 and params["k2"] >= params["k3"]

    sampler = _sampler(SearchOptions(tied_ratios=True), knobs=5, valid=valid)
    assert sampler._tied_pairs() == {(0, 1), (2, 3)}
    features = sampler._features([(0, 0, 0, 0, 0), (5, 0, 3, 1, 2)])
    plain = _sampler(SearchOptions(), knobs=5, valid=valid)._features([(0, 0, 0, 0, 0)])
    assert features.shape[1] == plain.shape[1] + 2  # one log ratio per tied pair
    every_pair = _sampler(SearchOptions(ratio_features=True), knobs=5, valid=valid)
    assert every_pair._features([(0, 0, 0, 0, 0)]).shape[1] == plain.shape[1] + 10


def test_without_rules_no_pair_is_tied_and_the_search_is_the_default_one():
    space = _space("free", {f"k{i}": [1, 2, 4, 8] for i in range(3)})

    def points(options):
        search = Search(space, "gp", 2, options=options)
        proposed = []
        for _ in range(20):
            trial, config = search.ask()
            proposed.append(tuple(config.values()))
            search.tell(trial, 1.0 + sum(config.values()))
        return proposed

    assert points(SearchOptions(tied_ratios=True)) == points(SearchOptions())
