"""What a search measures first: start points this device measured in an earlier run
(presets here; warm starts and other devices' configs go by the same rule) are not
queued again (the sampler knows them; each queued one used to be answered from the
history and repaired to a neighbour nobody chose, a trial spent)."""

import json

from autotune.devices import device_info
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.samplers import knobs_apart
from autotune.store import Store
from autotune.tune import Budget, Tuner

PROBLEM = Conv2DProblem(3, 40, 24)


def _point(config):
    return tuple(
        CONV2D.space.knobs[name].values.index(value) for name, value in CONV2D.space.complete(config).items()
    )


def test_a_second_search_goes_to_the_sampler_not_to_neighbours_of_what_it_measured(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'tune.db'}")
    device = device_info(0)
    presets = CONV2D.presets_for(PROBLEM, device)
    assert len(presets) >= 2
    first = Tuner(store, 0, device, CONV2D, [PROBLEM], sampler="random", budget=Budget(trials=len(presets)))
    first.run()
    assert {t.origin for t in store.trials(run_id=first.run_id) if t.origin != "retime"} == {"preset"}
    # another search of the same problem (another seed: a new run), after the presets
    second = Tuner(store, 0, device, CONV2D, [PROBLEM], sampler="random", seed=5, budget=Budget(trials=4))
    (result,) = second.run()
    tried = [t for t in store.trials(run_id=second.run_id) if t.origin != "retime"]
    assert result.trials == 4 and {t.origin for t in tried} == {"sampler"}
    # random points: none is a preset's one- or two-knob neighbour, as the repairs were
    preset_points = [_point(p) for p in presets]
    for trial in tried:
        point = _point(json.loads(trial.config))
        assert min(knobs_apart(point, p) for p in preset_points) > 2, trial.config
