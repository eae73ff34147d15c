"""One database shared by two releases: trials with an origin or a status a later release
added are read by this one (search, history, show, best, report, export), not refused."""

import json
import sqlite3

from autotune.devices import device_info
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.store import Store, config_key, now
from tests.conftest import run_cli

PROBLEM = Conv2DProblem(3, 40, 24)


def _plant(store, device, config, origin, status, time_ms):
    """A finished run of a later release that measured `config` once."""
    run = store.start_run(
        device_id=store.device_id(device),
        key="a later release's search",
        family="conv2d",
        problems=json.dumps([PROBLEM.key()]),
        sampler="gp",
        seed=0,
        trials_budget=1,
        time_budget_s=None,
        tool_version="99.0",
    )
    store.add_trial(
        run_id=run.id,
        device_id=store.device_id(device),
        problem_id=store.problem_id("conv2d", PROBLEM.key()),
        number=0,
        origin=origin,
        config=json.dumps(config),
        config_key=config_key(config),
        status=status,
        time_ms=time_ms,
        created_at=now(),
        kernel_sha=CONV2D.render(config, PROBLEM).fingerprint,
    )
    store.set_run_status(run.id, "finished", owner=None)
    return run


def _every_reader_runs(url, tmp_path, run_id):
    for command in (
        ["history"],
        ["show", str(run_id)],
        ["best"],
        ["report", "--format", "json", "--out", str(tmp_path / "report"), "--no-measure"],
        ["export", "--format", "t4", "--out", str(tmp_path / "export")],
    ):
        result = run_cli(*command, "--db", url)
        assert result.returncode == 0, (command, result.stderr)
        assert "Traceback" not in result.stderr


def test_a_status_this_release_does_not_know_is_measured_again_not_answered(tmp_path):
    """A later release's failure kind (here "too_slow") says nothing this release can act
    on: the point is a start point again, measured and recorded with a status it knows."""
    path = tmp_path / "tune.db"
    url = f"sqlite:///{path}"
    store = Store(url)
    device = device_info(0)
    config = CONV2D.presets_for(PROBLEM, device)[0]
    run = _plant(store, device, config, "preset", "too_slow", None)
    store.close()

    search = run_cli("search", "-d", "0", "-f", "3", "-s", "40x24", "--trials", "2", "--db", url, "--json")
    assert search.returncode == 0, search.stderr
    with sqlite3.connect(path) as db:
        again = db.execute(
            "SELECT status FROM autotune_trials WHERE config_key = ? AND origin = 'preset' AND run_id != ?",
            (config_key(config), run.id),
        ).fetchall()
    assert again == [("ok",)]
    with sqlite3.connect(path) as db:  # nor is it in the problem's Optuna study, where a
        # shared search would take it for a measurement of the point
        planted = db.execute("SELECT id FROM autotune_trials WHERE status = 'too_slow'").fetchone()[0]
        mirrored = db.execute(
            "SELECT count(*) FROM trial_user_attributes WHERE key = 'trial_id' AND value_json = ?",
            (json.dumps(planted),),
        ).fetchone()[0]
        known = db.execute("SELECT count(*) FROM trial_user_attributes WHERE key = 'trial_id'").fetchone()[0]
    assert mirrored == 0 and known > 0
    _every_reader_runs(url, tmp_path, run.id)


def test_trials_of_an_origin_this_release_does_not_know_are_read_as_first_measurements(tmp_path):
    path = tmp_path / "tune.db"
    url = f"sqlite:///{path}"
    store = Store(url)
    device = device_info(0)
    config = CONV2D.space.complete({"filter_mode": "define", "local_x": 4, "local_y": 2, "work_x": 2})
    run = _plant(store, device, config, "from_a_later_release", "ok", 1e-6)  # faster than anything here
    store.close()

    search = run_cli("search", "-d", "0", "-f", "3", "-s", "40x24", "--trials", "2", "--db", url, "--json")
    assert search.returncode == 0, search.stderr
    with sqlite3.connect(path) as db:
        again = db.execute(
            "SELECT count(*) FROM autotune_trials WHERE config_key = ? AND origin NOT IN ('retime', 'cached')"
            " AND run_id != ?",
            (config_key(config), run.id),
        ).fetchone()[0]
    assert again == 0  # measured already: the later release's trial counts
    with sqlite3.connect(path) as db:
        retimed = db.execute(
            "SELECT count(*) FROM autotune_trials WHERE config_key = ? AND origin = 'retime'",
            (config_key(config),),
        ).fetchone()[0]
    assert retimed > 0  # and, as the fastest first measurement, it was among those re-timed
    _every_reader_runs(url, tmp_path, run.id)
