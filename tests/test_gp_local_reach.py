"""`local_reach`: the local step leaves out neighbours the model predicts far slower than
the best point, and gives the turn to the global step when none is left."""

import numpy as np
import pytest
from optuna.distributions import CategoricalDistribution

from autotune import surrogate
from autotune.errors import UsageError
from autotune.samplers import GPSampler
from autotune.search import SearchOptions

SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


def _sampler(reach: float) -> GPSampler:
    """A block size whose every value but 8 is ten times slower, and a switch; of the best
    point's neighbours only the two largest blocks are left unmeasured."""
    space = {"block": CategoricalDistribution(SIZES), "switch": CategoricalDistribution((0, 1))}
    options = SearchOptions(local_reach=reach, startup_trials=3)
    sampler = GPSampler(space, options=options, seed=0)
    sampler.prepare(space)
    for block in (0, 1, 2, 4, 5):
        sampler._note((block, 0), 10.0)
    sampler._note((3, 0), 1.0)
    sampler._note((3, 1), 1.1)
    return sampler


def test_without_reach_the_local_step_measures_a_neighbour_predicted_ten_times_slower():
    sampler = _sampler(0.0)
    assert len(sampler.visited) % 2  # the local step's turn
    assert sampler._gp_proposal() in {(6, 0), (7, 0)}


def test_with_reach_the_turn_goes_to_the_global_step():
    sampler = _sampler(3.0)
    proposal = sampler._gp_proposal()
    assert proposal is not None
    assert proposal not in {(6, 0), (7, 0)}
    assert proposal[1] == 1  # beside the switched point that ran at 1.1


def test_ranking_leaves_out_candidates_predicted_beyond_a_log_time():
    measured = np.array([[0.0], [0.25], [0.5], [0.75], [1.0]])
    times = [1.0, 1.0, 1.0, 20.0, 20.0]
    candidates = np.array([[0.1], [0.4], [0.9]])
    full = surrogate.ranking(measured, times, candidates, acquisition="mean")
    kept = surrogate.ranking(measured, times, candidates, acquisition="mean", beyond=float(np.log(3.0)))
    assert sorted(full.tolist()) == [0, 1, 2]
    assert 2 not in kept.tolist() and set(kept.tolist()) <= {0, 1} and kept.tolist()
    assert list(kept) == [i for i in full if i in kept]  # the same order for those kept


def test_the_setting_reads_from_text_and_refuses_negative_values():
    assert SearchOptions.parse("local_reach=3").local_reach == 3.0
    with pytest.raises(UsageError):
        SearchOptions.parse("local_reach=-1")
