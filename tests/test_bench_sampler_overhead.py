"""The proposal-cost bench's history in a family space where valid points are rare."""

import dataclasses
import sys

from autotune.devices import device_info
from autotune.families.separable import SEPARABLE, SeparableProblem
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from repair_rare_points import H200_LIMITS  # noqa: E402
from sampler_overhead import RANDOM_HISTORY, family_search, time_asks  # noqa: E402


def test_history_of_valid_distinct_points_where_few_are_valid():
    """4 in 20,000 points of the separable space are valid with the H200's limits: the history
    beyond its random start comes from moves of known points, so it is all valid, all distinct,
    and the search asks on from there."""
    device = dataclasses.replace(device_info(0), **H200_LIMITS)
    problem = SeparableProblem(9, 1, 4096, 4096, "float32")
    count = RANDOM_HISTORY + 30
    search, rng = family_search(SEPARABLE, problem, device, count, seed=5)
    told = [trial.params for trial in search.study.trials]
    assert len(told) == count
    configs = [search.decode(params) for params in told]
    assert len({str(sorted(config.items())) for config in configs}) == count
    assert all(not SEPARABLE.violations(config, problem, device) for config in configs)
    spent = time_asks(search, 2, lambda _config: rng.lognormvariate(0.0, 0.5))
    assert len(spent) == 2 and all(seconds >= 0.0 for seconds in spent)
