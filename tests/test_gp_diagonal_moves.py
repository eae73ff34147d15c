"""`diagonal_moves`: the local step also tries, for each pair of knobs the rules tie, the
points one value up or down in both at once."""

import pytest
from optuna.distributions import CategoricalDistribution

from autotune import samplers
from autotune.errors import UsageError
from autotune.samplers import GPSampler, knobs_apart
from autotune.search import SearchOptions

SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


def _sampler(diagonal: str) -> GPSampler:
    """A work-group's width and height, tied by a size limit, and an untied unroll."""
    space = {
        "local_x": CategoricalDistribution(SIZES),
        "local_y": CategoricalDistribution(SIZES),
        "unroll": CategoricalDistribution((1, 2, 4)),
    }
    options = SearchOptions(diagonal_moves=diagonal, switches_first=False, reshape_moves="off")

    def valid(params: dict) -> bool:
        return params["local_x"] * params["local_y"] <= 128

    sampler = GPSampler(space, valid=valid, options=options, seed=0)
    sampler.prepare(space)
    sampler._note((6, 1, 1), 1.0)  # 64x2, the best
    sampler._note((5, 1, 1), 1.2)  # 32x2
    sampler._note((6, 0, 1), 1.2)  # 64x1
    return sampler


def test_the_local_step_reaches_the_corner_beside_two_slower_neighbours():
    plain = _sampler("off")._local_candidates()
    assert all(knobs_apart(p, (6, 1, 1)) == 1 for p in plain)
    assert (5, 0, 1) not in plain
    near = _sampler("always")._local_candidates()
    diagonal = [p for p in near if knobs_apart(p, (6, 1, 1)) == 2]
    # 32x1, 32x4 and 128x1; 128x4 breaks the rule; unroll is tied to nothing
    assert sorted(diagonal) == [(5, 0, 1), (5, 2, 1), (7, 0, 1)]
    assert set(plain) < set(near)


def test_stalled_adds_them_only_once_the_search_stalls():
    sampler = _sampler("stalled")
    assert (5, 0, 1) not in sampler._local_candidates()
    for x, y in [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)]:  # 12 slower points: no gain
        sampler._note((x, y, 0), 2.0)
        sampler._note((x, y, 2), 2.0)
    assert sampler._stalled()
    assert (5, 0, 1) in sampler._local_candidates()


def test_the_setting_reads_from_text_and_refuses_other_words():
    assert SearchOptions.parse("diagonal_moves=stalled").diagonal_moves == "stalled"
    assert SearchOptions().diagonal_moves == "always"
    with pytest.raises(UsageError):
        SearchOptions.parse("diagonal_moves=sometimes")


@pytest.mark.parametrize("filter_width", [3, 7, 11, 33])
def test_a_gpu_searchs_work_group_width_and_height_are_tied(filter_width):
    """On a GPU the work-group limit ties local_x to local_y, so the local step reaches a
    corner such as 32x1 beside a best 64x2 (an H100 search at F = 11 missed it while the
    draws were too few to see the tie); knobs no rule ties are not told tied by chance."""
    from autotune.families.conv2d import CONV2D, Conv2DProblem
    from autotune.search import Search
    from tests.conftest import GPU_LIMITS

    problem = Conv2DProblem(filter_width, 4096, 4096).key()
    space = CONV2D.space
    search = Search(
        space,
        "gp",
        0,
        valid=lambda config: not space.violations(config, problem, GPU_LIMITS),
        live_values=space.live_values(problem, GPU_LIMITS),
    )
    sampler = search.gp
    sampler.prepare(search.distributions)
    tied = {(sampler.names[a], sampler.names[b]) for a, b in sampler._tied_pairs()}
    assert ("local_x", "local_y") in tied
    assert ("filter_space", "local_x") not in tied
    assert ("vector", "image_vector") in tied


def test_a_space_whose_first_draws_hold_no_valid_point_is_given_up_early():
    """The separable space on a GPU: none of 16,000 draws keeps its rules, so the tie
    search stops after the first quarter of them instead of checking every one."""
    space = {name: CategoricalDistribution(SIZES) for name in ("local_x", "local_y", "tile")}
    checked = []

    def valid(params: dict) -> bool:
        checked.append(params)
        return params["local_x"] * params["local_y"] * params["tile"] == 3  # never

    sampler = GPSampler(space, valid=valid, options=SearchOptions(), seed=0)
    sampler.prepare(space)
    assert sampler._tied_pairs() == set()
    assert len(checked) == samplers.TIE_DRAWS // 4
