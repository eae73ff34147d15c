"""Moves out of traps no one-knob step leaves: `local_ties` and `diagonal_repair` (GEMM RTX
3060's 1.078, whose better points lie three knobs away), `reshape_moves` (convolution MI250X's
4x2 tile) and `neighbour_repair` (dedispersion MI250X's strided tile; BENCHMARKS.md)."""

import pytest
from optuna.distributions import CategoricalDistribution

from autotune.errors import UsageError
from autotune.samplers import GPSampler, knobs_apart
from autotune.search import SearchOptions

VALUES = (1, 2, 4, 8)


def _sampler(valid, **settings) -> GPSampler:
    space = {name: CategoricalDistribution(VALUES) for name in ("a", "b", "c")}
    options = SearchOptions(switches_first=False, **settings)
    sampler = GPSampler(space, valid=valid, options=options, seed=0)
    sampler.prepare(space)
    return sampler


def test_the_local_step_takes_the_neighbours_of_a_point_tied_with_the_best():
    def untied(params: dict) -> bool:
        return True

    def candidates(tie: float, tied_time: float) -> list:
        sampler = _sampler(untied, local_ties=tie, diagonal_moves="off")
        sampler._note((0, 0, 0), 1.0)  # the best
        sampler._note((1, 0, 0), tied_time)  # one knob away
        return sampler._local_candidates()

    beyond = (1, 1, 0)  # a neighbour of the tied point, two knobs from the best
    assert beyond not in candidates(0.0, 1.005)
    assert beyond in candidates(0.01, 1.005)
    assert beyond not in candidates(0.01, 1.02)  # not within 1%: no tie
    near = candidates(0.01, 1.005)
    assert len(near) == len(set(near)) and (0, 0, 0) not in near and (1, 0, 0) not in near


def test_stalled_takes_the_tied_points_neighbours_only_once_the_search_stalls():
    sampler = _sampler(lambda params: True, local_ties=0.01, ties_when="stalled", diagonal_moves="off")
    sampler._note((0, 0, 0), 1.0)
    sampler._note((1, 0, 0), 1.005)
    assert (1, 1, 0) not in sampler._local_candidates()
    for a, b in [(a, b) for a in (2, 3) for b in range(4)] + [(1, 3), (1, 2), (0, 3), (0, 2)]:
        sampler._note((a, b, 3), 2.0)  # 12 slower points, no gain (`stall_after`)
    assert sampler._stalled()
    assert (1, 1, 0) in sampler._local_candidates()


def _tied(params: dict) -> bool:
    """a and b tied by their product, b and c by theirs; a and c by nothing."""
    return params["a"] * params["b"] <= 16 and params["b"] * params["c"] <= 4


@pytest.mark.parametrize("repair", ["off", "switches", "tied"])
def test_an_invalid_diagonal_move_is_repaired_by_moving_a_knob_tied_to_it(repair):
    sampler = _sampler(_tied, diagonal_repair=repair)
    sampler._note((1, 1, 1), 1.0)  # a = b = c = 2
    assert {(a, b) for a, b in sampler._tied_pairs()} == {(0, 1), (1, 2)}
    near = sampler._local_candidates()
    # a and b up together (4, 4) breaks b * c <= 4 with c = 2; with c = 1 it keeps the rules
    assert (2, 2, 1) not in near
    assert ((2, 2, 0) in near) == (repair == "tied")  # c has four values: no switch
    assert len(near) == len(set(near))


def test_the_settings_read_from_text_and_refuse_bad_values():
    options = SearchOptions.parse("local_ties=0.01,diagonal_repair=tied")
    assert (options.local_ties, options.diagonal_repair) == (0.01, "tied")
    assert (SearchOptions().local_ties, SearchOptions().diagonal_repair) == (0.0, "off")
    with pytest.raises(UsageError):
        SearchOptions.parse("diagonal_repair=always")
    with pytest.raises(UsageError):
        SearchOptions.parse("local_ties=-0.1")
    with pytest.raises(UsageError):
        SearchOptions.parse("ties_when=sometimes")


def test_reshape_moves_double_one_size_and_halve_another():
    """A 4x2 tile to 2x4 (convolution MI250X: 1.482 -> 1.015) is no one-knob move and, with
    3 between 2 and 4 in the knob's values, no diagonal one either."""
    space = {
        "tile_x": CategoricalDistribution((1, 2, 3, 4)),
        "tile_y": CategoricalDistribution((1, 2, 3, 4)),
        "flag": CategoricalDistribution((0, 1)),
    }

    def candidates(reshape: str) -> list:
        options = SearchOptions(switches_first=False, reshape_moves=reshape)
        sampler = GPSampler(space, valid=lambda params: True, options=options, seed=0)
        sampler.prepare(space)
        sampler._note((3, 1, 0), 1.0)  # 4x2
        return sampler._local_candidates()

    assert (1, 3, 0) not in candidates("off")
    near = candidates("on")
    # 2x4 the one two-knob move: 8x1 has no 8, the flag is no size
    assert [p for p in near if knobs_apart(p, (3, 1, 0)) == 2] == [(1, 3, 0)]
    assert len(near) == len(set(near))


def test_reshape_moves_first_come_before_the_other_neighbours_until_known():
    space = {
        "tile_x": CategoricalDistribution((1, 2, 3, 4)),
        "tile_y": CategoricalDistribution((1, 2, 3, 4)),
    }
    options = SearchOptions(reshape_moves="first")
    sampler = GPSampler(space, valid=lambda params: True, options=options, seed=0)
    sampler.prepare(space)
    sampler._note((3, 1), 1.0)  # 4x2
    assert sampler._local_candidates() == [(1, 3)]  # 2x4 first
    sampler._note((1, 3), 1.5)  # tried: slower
    assert set(sampler._local_candidates()) == {(0, 1), (1, 1), (2, 1), (3, 0), (3, 2), (3, 3)}


def test_reshape_moves_wait_for_the_model_after_patience_misses_until_one_pays():
    space = {name: CategoricalDistribution((1, 2, 4, 8)) for name in ("x", "y", "z")}
    options = SearchOptions(reshape_moves="first", reshape_patience=2, diagonal_moves="off")
    sampler = GPSampler(space, valid=lambda params: True, options=options, seed=0)
    sampler.prepare(space)
    sampler._note((2, 1, 1), 1.0)  # 4x2x2
    reshapes = sampler._local_candidates()
    assert sorted(reshapes) == sorted(sampler._reshaped((2, 1, 1))) and len(reshapes) == 6
    sampler._note(reshapes[0], 2.0)
    assert not sampler._reshapes_spent()
    sampler._note(reshapes[1], 2.0)  # two in a row without a gain
    assert sampler._reshapes_spent()
    near = sampler._local_candidates()
    assert (3, 1, 1) in near and set(reshapes[2:]) <= set(near)  # one-knob moves beside them
    sampler._note(reshapes[2], 0.5)  # one pays: a new best, and reshapes come first again
    assert not sampler._reshapes_spent()
    assert set(sampler._local_candidates()) <= set(sampler._reshaped(reshapes[2]))
    with pytest.raises(UsageError):
        SearchOptions.parse("reshape_patience=-1")


def _dedispersion_like() -> dict:
    """A tile of 1 takes no stride (dedispersion's tile_size_x and tile_stride_x)."""
    return {
        "tile": CategoricalDistribution((1, 2, 3, 4)),
        "stride": CategoricalDistribution((0, 1)),
        "block": CategoricalDistribution((32, 64, 128)),
    }


def _strided(params: dict) -> bool:
    return params["tile"] > 1 or params["stride"] == 0


@pytest.mark.parametrize("repair", ["off", "on", "first"])
def test_a_one_knob_move_that_breaks_a_rule_is_retried_with_a_tied_switch_flipped(repair):
    space = _dedispersion_like()
    # diagonal moves off: tile and stride one value down together is the same point here
    options = SearchOptions(neighbour_repair=repair, reshape_moves="off", diagonal_moves="off")
    sampler = GPSampler(space, valid=_strided, options=options, seed=0)
    sampler.prepare(space)
    assert (0, 1) in sampler._tied_pairs()
    sampler._note((1, 1, 1), 1.0)  # tile 2 with a stride: tile 1 alone breaks the rule
    sampler._note((1, 0, 1), 3.0)  # the stride's flip is known: no switch move left
    near = sampler._local_candidates()
    assert (0, 1, 1) not in near
    if repair == "first":
        assert near == [(0, 0, 1)]  # tile 1 without the stride, before the rest
    else:
        assert ((0, 0, 1) in near) == (repair == "on")
        assert {(2, 1, 1), (3, 1, 1), (1, 1, 0), (1, 1, 2)} <= set(near)
    assert len(near) == len(set(near))


def test_a_repaired_move_known_nearby_is_not_tried_first():
    space = _dedispersion_like()
    options = SearchOptions(neighbour_repair="first", reshape_moves="off")
    sampler = GPSampler(space, valid=_strided, options=options, seed=0)
    sampler.prepare(space)
    sampler._note((1, 1, 1), 1.0)
    sampler._note((1, 0, 1), 3.0)
    sampler._note((0, 0, 2), 2.0)  # tile 1 without a stride seen two knobs away
    assert (0, 0, 1) in sampler._local_candidates()  # left to the model's order, not first
    assert len(sampler._local_candidates()) > 1
    assert SearchOptions().neighbour_repair == "first"
    with pytest.raises(UsageError):
        SearchOptions.parse("neighbour_repair=always")
