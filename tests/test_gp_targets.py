"""A `gp` setting, off by default: the time model fits the normal scores of the times' ranks
(`targets=ranks`) instead of log times."""

import numpy as np
import pytest

from autotune import surrogate
from autotune.errors import UsageError
from autotune.search import SearchOptions
from tests.test_gp_trust_region import bowl_search


def test_the_setting_reads_from_text_and_checks_its_value():
    assert SearchOptions.parse("targets=ranks").targets == "ranks"
    assert SearchOptions().targets == "log"
    with pytest.raises(UsageError):
        SearchOptions.parse("targets=linear")


def test_normal_scores_keep_the_order_share_ties_and_ignore_the_gaps():
    scores = surrogate.normal_scores(np.array([3.0, 0.0, 100.0, 3.0]))
    assert scores[1] < scores[0] == scores[3] < scores[2]  # ties share their mean rank
    assert scores.sum() == pytest.approx(0.0)  # ranks symmetric about the middle
    # A point a thousand times slower moves no score but its own: the order is all there is.
    assert surrogate.normal_scores(np.array([1.0, 2.0, 3.0])) == pytest.approx(
        surrogate.normal_scores(np.array([1.0, 2.0, 3000.0]))
    )
    assert surrogate.normal_scores(np.array([5.0])).tolist() == [0.0]


def test_ranking_by_ranks_is_not_bent_by_one_far_slower_point():
    """Four points on a line, the last 1000 times slower: on log times the smooth fit bends
    toward it and ranks a candidate between 1.2 and 1.5 before the one beside the fastest;
    on ranks the one beside the fastest comes first."""
    measured = np.array([[0.0], [0.3], [0.6], [1.0]])
    times = [1.0, 1.2, 1.5, 1000.0]
    candidates = np.array([[0.05], [0.5], [0.9]])
    by_logs, by_ranks = (
        surrogate.ranking(measured, times, candidates, acquisition="mean", targets=targets).tolist()
        for targets in ("log", "ranks")
    )
    assert by_ranks[0] == 0
    assert by_logs != by_ranks
    with pytest.raises(ValueError):
        surrogate.ranking(measured, times, candidates, targets="linear")


def test_a_search_on_ranks_proposes_new_points_and_differs_from_the_default():
    default, ranks = bowl_search(SearchOptions()), bowl_search(SearchOptions(targets="ranks"))
    assert default[:10] == ranks[:10]  # the same start points
    assert default != ranks
    assert len(set(ranks)) == 30
