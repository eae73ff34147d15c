"""The tuning loop in-process, on a replayed landscape: every rule of the loop, in
milliseconds, with a real SQLite store and no device work."""

import json
import math

import optuna
import pytest

from autotune.devices import device_info
from autotune.families.landscape import LandscapeEvaluator, LandscapeFamily, LandscapeProblem
from autotune.replay import load, replay_once
from autotune.search import SearchOptions
from autotune.store import Store
from autotune.tune import Budget, Tuner
from tests.test_replay import synthetic

PROBLEM = LandscapeProblem("bowl")


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    return LandscapeFamily(load(synthetic(tmp_path_factory.mktemp("landscape") / "bowl.json.gz")))


def tune(family, store, trials=30, sampler="gp", seed=0, listener=None, fresh=False, options=None):
    evaluator = LandscapeEvaluator(family, device_info(0))
    tuner = Tuner(
        store,
        0,
        evaluator.device,
        family,
        [PROBLEM],
        sampler=sampler,
        seed=seed,
        budget=Budget(trials=trials),
        listener=listener,
        fresh=fresh,
        evaluator=evaluator,
        search_options=options,
    )
    return tuner, tuner.run(), evaluator


def running_best(trials):
    best, out = math.inf, []
    for trial in trials:
        best = min(best, trial.time_ms if trial.time_ms is not None else math.inf)
        out.append(best)
    return out


@pytest.mark.parametrize("sampler", ["gp", "random", "tpe"])
@pytest.mark.parametrize("seed", [0, 7])
def test_the_loop_asks_what_the_engine_replays(family, tmp_path, sampler, seed):
    """With nothing stored, the tuner's trials are the search engine's own sequence: the
    loop adds persistence, not different choices."""
    store = Store(f"sqlite:///{tmp_path / 'tune.db'}")
    tuner, (result,), evaluator = tune(family, store, trials=30, sampler=sampler, seed=seed)
    trials = [t for t in store.trials(run_id=tuner.run_id) if t.origin == "sampler"]
    assert running_best(trials) == replay_once(family.landscape, sampler, 30, seed).best_after
    assert result.trials == 30 and evaluator.measured == 30 + 9  # and the top three, three times
    (best, _, row) = store.best()[0]
    assert row.family == "landscape" and row.fields == {"name": "bowl"}
    assert best.time_ms == result.best_ms == min(t.time_ms for t in trials if t.time_ms is not None)


def test_the_loop_passes_the_gp_settings_to_the_engine(family, tmp_path):
    options = SearchOptions(stall_after=6, global_step="ei")
    store = Store(f"sqlite:///{tmp_path / 'tune.db'}")
    tuner, _, _ = tune(family, store, trials=30, seed=3, options=options)
    trials = [t for t in store.trials(run_id=tuner.run_id) if t.origin == "sampler"]
    assert running_best(trials) == replay_once(family.landscape, "gp", 30, 3, options).best_after


def test_the_same_search_is_reported_and_a_fresh_one_goes_on_from_the_store(family, tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'tune.db'}")
    first, (result,), _ = tune(family, store, trials=25)
    again, (reported,), evaluator = tune(family, store, trials=25)
    assert again.already_finished and again.run_id == first.run_id and evaluator.measured == 0
    assert (reported.best_ms, reported.trials, reported.failures) == (result.best_ms, 25, result.failures)
    # A fresh run starts from everything stored: the sampler knows those points and
    # measures 25 others.
    fresh, (answered,), evaluator = tune(family, store, trials=25, fresh=True)
    keys = {run: {t.config_key for t in store.trials(run_id=run) if t.origin == "sampler"} for run in (1, 2)}
    assert fresh.run_id == 2 and len(keys[2]) == 25 and not keys[1] & keys[2]
    assert evaluator.measured == 25 + 9 and answered.best_ms <= result.best_ms


def test_a_stopped_search_resumes_to_its_budget_measuring_nothing_twice(family, tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'tune.db'}")
    box = {}

    def stop_after_ten(kind, data):
        if kind == "trial" and data["done"] == 10:
            box["tuner"].stop.requested = True

    evaluator = LandscapeEvaluator(family, device_info(0))
    box["tuner"] = Tuner(
        store, 0, evaluator.device, family, [PROBLEM], budget=Budget(trials=30),
        listener=stop_after_ten, evaluator=evaluator,
    )  # fmt: skip
    (stopped,) = box["tuner"].run()
    assert stopped.interrupted and stopped.trials == 10 and store.best() == []
    resumed, (result,), _ = tune(family, store, trials=30)
    assert resumed.resumed and resumed.run_id == box["tuner"].run_id and result.trials == 30
    measured = [t.config_key for t in store.trials(run_id=resumed.run_id) if t.origin == "sampler"]
    assert len(measured) == len(set(measured)) == 30
    assert store.run(resumed.run_id).status == "finished"


def test_failed_points_count_and_never_win(family, tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'tune.db'}")
    tuner, (result,), _ = tune(family, store, trials=60, sampler="random", seed=1)
    failed = [t for t in store.trials(run_id=tuner.run_id) if t.status != "ok"]
    assert failed and all(t.status == "compile_error" and t.time_ms is None for t in failed)
    assert result.failures == {"compile_error": len(failed)}
    (best, _, _) = store.best()[0]
    assert json.loads(best.config) not in [json.loads(t.config) for t in failed]


def test_a_space_that_gained_values_keeps_searching_the_same_database(tmp_path, family):
    """Optuna refuses a parameter whose choices changed; a release whose space gives a
    knob more values (conv2d's work_x did) must still search a database that holds the
    older release's studies, and its study holds the older trials too."""
    import gzip

    data = json.loads(gzip.decompress(synthetic(tmp_path / "older.json.gz").read_bytes()))
    data["tune_params"]["x"] = list(range(20))  # values 16-19: none in the cache, all invalid
    wider_path = tmp_path / "wider.json.gz"
    wider_path.write_bytes(gzip.compress(json.dumps(data).encode()))
    wider = LandscapeFamily(load(wider_path))
    assert len(wider.space.knobs["x"].values) == 20 != len(family.space.knobs["x"].values)
    store = Store(f"sqlite:///{tmp_path / 'tune.db'}")
    _, (older_result,), _ = tune(family, store, trials=8, sampler="random")
    _, (result,), _ = tune(wider, store, trials=16, sampler="random")
    assert result.trials >= 16 and result.best_ms <= older_result.best_ms
    storage = optuna.storages.RDBStorage(store.url)
    newest = optuna.load_study(study_name=storage.get_all_studies()[-1].study_name, storage=storage)
    assert len({t.user_attrs["trial_id"] for t in newest.trials}) == len(newest.trials) >= 16
