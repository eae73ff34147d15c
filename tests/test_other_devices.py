"""A search on a device new to a problem starts from what other devices measured for it."""

import dataclasses
import json
import sqlite3

from autotune.devices import device_info
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.store import Store, config_key, now
from autotune.tune import Budget, Tuner
from tests.conftest import run_cli

PROBLEM = Conv2DProblem(3, 40, 24)


def _config(**knobs):
    return CONV2D.space.complete({"filter_mode": "define", "local_x": 4, "local_y": 4, **knobs})


def _device_row(store, device, name, **changes):
    """A device row of another model (or vendor, or type), with a run."""
    device_id = store.device_id(dataclasses.replace(device, name=name, **changes))
    run = store.start_run(
        device_id=device_id,
        key=f"elsewhere {name}",
        family="conv2d",
        problems="[]",
        sampler="random",
        seed=0,
        trials_budget=None,
        time_budget_s=None,
        tool_version="0",
    )
    return device_id, run.id


def _trial(store, where, config, time_ms, problem=PROBLEM, status="ok", origin="sampler", sha="sha"):
    device_id, run_id = where
    store.add_trial(
        run_id=run_id,
        device_id=device_id,
        problem_id=store.problem_id(
            "conv2d", problem.key() if isinstance(problem, Conv2DProblem) else problem
        ),
        number=0,
        origin=origin,
        config=json.dumps(config),
        config_key=config_key(config),
        status=status,
        time_ms=time_ms,
        created_at=now(),
        kernel_sha=sha,
    )


def test_a_search_starts_from_other_devices_fastest_configs(tmp_path):
    path = tmp_path / "tune.db"
    store = Store(f"sqlite:///{path}")
    device = device_info(0)
    fastest, second, third, shy, wrong, repeated, old, foreign = (
        _config(work_x=2, work_y=2),
        _config(work_x=1, work_y=2),
        _config(work_x=2, work_y=1),
        _config(work_x=4, work_y=1),
        _config(work_x=1, work_y=4),
        _config(work_x=4, work_y=2),
        _config(work_x=2, work_y=4),
        _config(work_x=4, work_y=4),
    )
    too_big = _config(local_x=256, local_y=64)  # more work-items than this device's groups hold
    presets = {config_key(p.config) for p in CONV2D.space.presets.values()}
    planted = (fastest, second, third, shy, wrong, repeated, old, foreign, too_big)
    assert not presets & {config_key(c) for c in planted}
    other = _device_row(store, device, "another CPU")
    for config, ms in ((third, 3.0), (too_big, 0.1), (fastest, 1.0), (second, 2.0)):
        _trial(store, other, config, ms)
    _trial(store, other, third, 0.5, problem=Conv2DProblem(3, 400, 240))  # farther size: after the nearest
    _trial(store, other, shy, None, status="compile_error")
    _trial(store, other, wrong, 0.05, status="wrong_result")  # ran, but wrong: never a start
    _trial(store, other, repeated, 0.05, origin="retime")  # re-timings are not first measurements
    _trial(store, other, old, 0.05, sha=None)  # measured before kernels had fingerprints
    _trial(store, other, shy, 0.2, problem=Conv2DProblem(5, 40, 24))  # another kind
    foreign_type = "CPU" if "GPU" in device.type else "GPU"
    _trial(store, _device_row(store, device, "other type", type=foreign_type), foreign, 0.01)

    budget = len(CONV2D.presets_for(PROBLEM, device)) + 3
    tuner = Tuner(
        store, 0, device, CONV2D, [PROBLEM], sampler="random", budget=Budget(trials=budget), other_devices=3
    )
    tuner.run()
    with sqlite3.connect(path) as db:
        tried = db.execute(
            "SELECT origin, config_key FROM autotune_trials"
            " WHERE device_id = ? AND origin != 'retime' ORDER BY id",
            (store.device_id(device),),
        ).fetchall()
    started = [key for origin, key in tried if origin == "other_device"]
    assert started == [config_key(fastest), config_key(second), config_key(third)]
    assert [origin for origin, _ in tried if origin != "preset"][:3] == ["other_device"] * 3
    # the same search again on a fresh run: what this device measured is not queued again
    assert tuner._fastest_on_other_devices(PROBLEM, {k for _, k in tried}) == []
    assert tuner._fastest_on_other_devices(PROBLEM, {config_key(fastest)}) == [second, third]


def test_other_devices_go_by_rank_nearest_model_first_and_their_number_is_capped(tmp_path):
    """Each device's fastest before any device's second; the same model (another driver)
    first, then this vendor's; at most twice the per-device count in all; a config two
    devices share once; a problem row this release cannot read is passed over."""
    store = Store(f"sqlite:///{tmp_path / 'tune.db'}")
    device = device_info(0)
    configs = [_config(work_x=x, work_y=y) for x, y in ((2, 2), (1, 2), (2, 1), (4, 1), (1, 4), (4, 2))]
    far = _device_row(store, device, "far CPU", vendor="Another vendor")
    near = _device_row(store, device, "near CPU")
    same_model = _device_row(store, device, device.name, driver_version="0.0 (an older driver)")
    for where, pair in ((far, configs[0:2]), (near, configs[2:4]), (same_model, [configs[4], configs[2]])):
        for number, config in enumerate(pair):
            _trial(store, where, config, 1.0 + number)
    _trial(store, near, configs[5], 0.01, problem={"filter_width": 3, "rows": 40, "new_field": 1})
    _trial(store, _device_row(store, device, device.name), configs[5], 0.01)  # this device's own
    tuner = Tuner(store, 0, device, CONV2D, [PROBLEM], other_devices=2)
    tuner.device_id = store.device_id(device)
    # rank 1: same model, near, far; rank 2: same model's second is near's first (once),
    # near's second; the cap (2 x 2) cuts the far CPU's second
    assert tuner._fastest_on_other_devices(PROBLEM, set()) == [configs[4], configs[2], configs[0], configs[3]]


def test_the_search_command_starts_from_other_devices_unless_told_not_to(tmp_path):
    path = tmp_path / "tune.db"
    store = Store(f"sqlite:///{path}")
    device = device_info(0)
    planted = _config(work_x=2, work_y=2)
    _trial(store, _device_row(store, device, "another CPU"), planted, 1.0)
    store.close()
    common = [
        "search",
        "-d",
        "0",
        "-f",
        "3",
        "-s",
        "40x24",
        "--sampler",
        "random",
        "--db",
        f"sqlite:///{path}",
    ]
    presets = len(CONV2D.presets_for(PROBLEM, device))
    for flags, expected in ((["--no-other-devices"], []), (["--fresh"], [config_key(planted)])):
        result = run_cli(*common, "--trials", str(presets + 1), *flags)
        assert result.returncode == 0, result.stderr
        with sqlite3.connect(path) as db:
            started = db.execute(
                "SELECT config_key FROM autotune_trials WHERE origin = 'other_device' AND run_id ="
                " (SELECT max(id) FROM autotune_runs)"
            ).fetchall()
        assert [key for (key,) in started] == expected
