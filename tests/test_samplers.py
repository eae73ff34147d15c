"""`GPSampler` in plain Optuna studies: the engine's gp, in memory and on a SQLite file,
with several workers on one study, never proposing an invalid point."""

import math

import optuna
import pytest

from autotune.replay import Landscape, load
from autotune.samplers import GPSampler
from autotune.search import Search, SearchOptions
from autotune.tune.studies import distributions
from tests.test_replay import synthetic


@pytest.fixture
def bowl(tmp_path) -> Landscape:
    return load(synthetic(tmp_path / "bowl.json.gz"))


def in_landscape(landscape: Landscape):
    return lambda params: landscape.look_up(params)[0]


def objective_of(landscape: Landscape):
    """A replay objective as any Optuna user writes one; failed points return NaN (FAIL)."""

    def objective(trial: optuna.Trial) -> float:
        params = {
            name: trial.suggest_categorical(name, knob.values) for name, knob in landscape.space.knobs.items()
        }
        valid, value = landscape.look_up(params)
        assert valid, params  # the sampler proposes points of the landscape only
        return math.nan if value is None else value

    return objective


def engine_points(landscape: Landscape, budget: int, seed: int, options: SearchOptions) -> list[dict]:
    search = Search(landscape.space, "gp", seed, valid=lambda c: landscape.look_up(c)[0], options=options)
    points = []
    for _ in range(budget):
        trial, config = search.ask()  # type: ignore[misc]
        points.append(config)
        search.tell(trial, landscape.look_up(config)[1])
    return points


def tell(study: optuna.Study, trial: optuna.Trial, value: float | None) -> None:
    """A time, or a failure (None)."""
    if value is None:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    else:
        study.tell(trial, value)


def study_points(study: optuna.Study) -> list[dict]:
    return [t.params for t in sorted(study.trials, key=lambda t: t.number)]


@pytest.mark.parametrize("options", [SearchOptions(), SearchOptions(genetic_every=3, stall_after=5)])
def test_a_plain_study_proposes_what_the_engine_proposes(bowl, options):
    """Same landscape, seed and settings: the same points in the same order, failures
    included, whether Optuna's own loop or the engine asks."""
    sampler = GPSampler(distributions(bowl.space), valid=in_landscape(bowl), options=options, seed=11)
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective_of(bowl), n_trials=40)
    assert study_points(study) == engine_points(bowl, 40, 11, options)
    assert any(t.state == optuna.trial.TrialState.FAIL for t in study.trials)
    assert len({tuple(p.values()) for p in study_points(study)}) == 40  # never a point twice


def test_a_study_on_a_sqlite_file_proposes_the_same(bowl, tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'studies.db'}")
    sampler = GPSampler(distributions(bowl.space), valid=in_landscape(bowl), seed=4)
    study = optuna.create_study(storage=storage, study_name="bowl", sampler=sampler)
    study.optimize(objective_of(bowl), n_trials=25)
    assert study_points(study) == engine_points(bowl, 25, 4, SearchOptions())
    reloaded = optuna.load_study(study_name="bowl", storage=storage)
    assert reloaded.best_value == study.best_value


def test_two_workers_on_one_sqlite_study_never_propose_a_running_point(bowl, tmp_path):
    """Two workers (the same seed: left alone they would propose the same points) ask in
    turn, each keeping three points running: every running point differs, through the
    start and the model's steps, and every point is valid."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    optuna.create_study(storage=url, study_name="shared")
    workers = [
        optuna.load_study(
            study_name="shared",
            storage=url,
            sampler=GPSampler(distributions(bowl.space), valid=in_landscape(bowl), seed=5),
        )
        for _ in range(2)
    ]
    running: list[tuple[optuna.Study, optuna.Trial]] = []
    for step in range(60):
        study = workers[step % 2]
        trial = study.ask(distributions(bowl.space))
        assert bowl.look_up(trial.params)[0]
        running.append((study, trial))
        points = [tuple(t.params.values()) for _, t in running]
        assert len(set(points)) == len(points), points
        if len(running) == 6:
            owner, oldest = running.pop(0)
            tell(owner, oldest, bowl.look_up(oldest.params)[1])
    finished = optuna.load_study(study_name="shared", storage=url).trials
    measured = [tuple(t.params.values()) for t in finished]
    assert len(set(measured)) == len(measured) == 60


def test_invalid_points_are_never_proposed(bowl):
    """A validity test narrower than the landscape (x + y <= 6): every proposal keeps it."""
    narrow = lambda params: in_landscape(bowl)(params) and params["x"] + params["y"] <= 6  # noqa: E731
    study = optuna.create_study(sampler=GPSampler(distributions(bowl.space), valid=narrow, seed=2))
    for _ in range(50):
        trial = study.ask(distributions(bowl.space))
        assert narrow(trial.params), trial.params
        tell(study, trial, bowl.look_up(trial.params)[1])


def test_without_a_declared_space_it_learns_the_space_from_the_trials():
    """An objective that suggests integers: the first trial is drawn at random, then the
    sampler models the knobs every finished trial has and finds the optimum."""

    def objective(trial: optuna.Trial) -> float:
        x, y = trial.suggest_int("x", 0, 30), trial.suggest_int("y", 0, 10, step=2)
        return 1.0 + (x - 21) ** 2 + (y - 4) ** 2

    study = optuna.create_study(sampler=GPSampler(seed=3))
    study.optimize(objective, n_trials=40)
    assert study.best_params == {"x": 21, "y": 4}
    points = [tuple(t.params.values()) for t in study.trials]
    assert len(set(points)) == len(points)


def test_it_minimises_times_only(bowl):
    study = optuna.create_study(direction="maximize", sampler=GPSampler(distributions(bowl.space), seed=1))
    with pytest.raises(ValueError, match="minimises one objective"):
        study.ask(distributions(bowl.space))


def test_threads_of_one_study_share_the_sampler(bowl):
    """`study.optimize(n_jobs=2)`: two threads ask one sampler; no point twice, none invalid."""
    sampler = GPSampler(distributions(bowl.space), valid=in_landscape(bowl), seed=6)
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective_of(bowl), n_trials=30, n_jobs=2)
    points = study_points(study)
    assert len(points) == 30 and len({tuple(p.values()) for p in points}) == 30


@pytest.mark.parametrize(
    "settings", ["", "failures=kernel", "failures=model", "stall_after=4,stall_step=far"]
)
def test_a_large_space_checks_validity_in_the_models_order_and_proposes_what_a_full_check_would(
    monkeypatch, settings
):
    """Where a space is sampled (over ENUMERATE_LIMIT points), a global step checks the
    rules of the candidates in the model's order until one holds: a real search's check
    evaluates the space's rules, so checking all 4,000 cost most of a proposal. The
    points proposed are those of a sampler that checks every candidate first, with the
    settings that rank candidates otherwise too (a model of failures; a stalled step far
    from the best point, which checks its candidates first)."""
    from autotune.replay import _space
    from autotune.samplers import CANDIDATE_SAMPLE, ENUMERATE_LIMIT, TIE_DRAWS

    space = _space("large", {f"k{i}": list(range(8)) for i in range(6)})
    assert ENUMERATE_LIMIT < 8**6
    checks = []

    def valid(config):
        checks.append(1)
        return (config["k0"] + config["k1"] + config["k2"]) % 3 != 0  # a third of the space is not

    def time_of(config):
        if config["k3"] == 7 and config["k4"] == 0:
            return None  # fails to run
        return 1.0 + sum((v - 2) ** 2 for v in config.values()) / 10

    def points(seed):
        search = Search(space, "gp", seed, valid=valid, options=SearchOptions.parse(settings))
        proposed, per_ask = [], []
        for _ in range(30):
            before = len(checks)
            trial, config = search.ask()
            per_ask.append(len(checks) - before)
            assert valid(config)
            proposed.append(config)
            search.tell(trial, time_of(config))
        return proposed, per_ask

    lazy, per_ask = points(3)
    if not settings:
        # one ask also finds, once a search, which knobs the rules tie (`diagonal_moves`)
        beyond = [count - TIE_DRAWS for count in per_ask if count >= CANDIDATE_SAMPLE / 10]
        assert len(beyond) <= 1 and max(beyond, default=0) < CANDIDATE_SAMPLE / 10, per_ask
    # every candidate checked first, as before
    monkeypatch.setattr(
        GPSampler,
        "_candidates",
        lambda self, original=GPSampler._candidates: [p for p in original(self) if self._usable(p)],
    )
    full, per_ask_full = points(3)
    assert full == lazy
    assert max(per_ask_full) > CANDIDATE_SAMPLE / 2  # the check this saves
