"""A search on a device new to a problem starts from what other devices measured for it."""

import dataclasses
import json
import sqlite3

from autotune.devices import device_info
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.store import Store, config_key, now
from autotune.tune import Budget, Tuner


def _other_device(store, device, name, type_=None):
    """A device row of another model (or type), with a finished run."""
    other = dataclasses.replace(device, name=name, type=type_ or device.type)
    device_id = store.device_id(other)
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


def _trial(store, device_id, run_id, problem, config, time_ms, number, status="ok"):
    store.add_trial(
        run_id=run_id,
        device_id=device_id,
        problem_id=store.problem_id("conv2d", problem.key()),
        number=number,
        origin="sampler",
        config=json.dumps(config),
        config_key=config_key(config),
        status=status,
        time_ms=time_ms if status == "ok" else None,
        created_at=now(),
    )


def test_a_search_starts_from_other_devices_fastest_configs(tmp_path):
    path = tmp_path / "tune.db"
    store = Store(f"sqlite:///{path}")
    device = device_info(0)
    space = CONV2D.space
    problem = Conv2DProblem(3, 40, 24)

    def config(**knobs):
        return space.complete({"filter_mode": "define", "local_x": 4, "local_y": 4, **knobs})

    fastest, second, third, failed, gpu_only = (
        config(work_x=2, work_y=2),
        config(work_x=1, work_y=2),
        config(work_x=2, work_y=1),
        config(work_x=4, work_y=1),
        config(work_x=4, work_y=4),
    )
    too_big = config(local_x=256, local_y=64)  # more work-items than this device's groups hold
    presets = {config_key(p.config) for p in space.presets.values()}
    assert not presets & {config_key(c) for c in (fastest, second, third, failed, gpu_only, too_big)}
    same_model, run = _other_device(store, device, "another CPU")
    for number, (c, ms) in enumerate(((third, 3.0), (too_big, 0.1), (fastest, 1.0), (second, 2.0))):
        _trial(store, same_model, run, problem, c, ms, number)
    _trial(store, same_model, run, Conv2DProblem(3, 400, 240), third, 0.5, 9)  # farther size: after
    _trial(store, same_model, run, problem, failed, None, 10, status="compile_error")
    _trial(store, same_model, run, Conv2DProblem(5, 40, 24), failed, 0.2, 11)  # another kind
    gpu, gpu_run = _other_device(store, device, "a GPU", type_="GPU")
    _trial(store, gpu, gpu_run, problem, gpu_only, 0.01, 0)

    budget = len(CONV2D.presets_for(problem, device)) + 3
    Tuner(
        store, 0, device, CONV2D, [problem], sampler="random", budget=Budget(trials=budget), other_devices=3
    ).run()
    with sqlite3.connect(path) as db:
        mine = store.device_id(device)
        tried = db.execute(
            "SELECT origin, config_key FROM autotune_trials"
            " WHERE device_id = ? AND origin != 'retime' ORDER BY id",
            (mine,),
        ).fetchall()
    started = [key for origin, key in tried if origin == "other_device"]
    assert started == [config_key(fastest), config_key(second), config_key(third)]
    first_after_presets = [origin for origin, _ in tried if origin != "preset"][:3]
    assert first_after_presets == ["other_device"] * 3


def test_no_other_device_leaves_the_search_as_it_was(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'tune.db'}")
    device = device_info(0)
    problem = Conv2DProblem(3, 40, 24)
    budget = len(CONV2D.presets_for(problem, device)) + 2
    Tuner(store, 0, device, CONV2D, [problem], sampler="random", budget=Budget(trials=budget)).run()
    origins = {t.origin for t in store.trials()}
    assert "other_device" not in origins and "sampler" in origins


def test_other_devices_go_by_rank_and_their_number_is_capped(tmp_path):
    """Each device's fastest before any device's second; this vendor's devices first;
    at most twice the per-device count in all."""
    path = tmp_path / "tune.db"
    store = Store(f"sqlite:///{path}")
    device = device_info(0)
    space = CONV2D.space
    problem = Conv2DProblem(3, 40, 24)
    configs = [
        space.complete({"filter_mode": "define", "local_x": 4, "local_y": 4, "work_x": x, "work_y": y})
        for x, y in ((2, 2), (1, 2), (2, 1), (4, 1), (1, 4), (4, 2))
    ]
    others = [
        _other_device(store, dataclasses.replace(device, vendor="Another vendor"), "far CPU"),
        _other_device(store, device, "near CPU"),
        _other_device(store, device, "third CPU"),
    ]
    for (device_id, run), pair in zip(others, (configs[0:2], configs[2:4], configs[4:6]), strict=True):
        for number, config in enumerate(pair):
            _trial(store, device_id, run, problem, config, 1.0 + number, number)
    tuner = Tuner(store, 0, device, CONV2D, [problem], other_devices=2)
    tuner.device_id = store.device_id(device)
    queued = tuner._fastest_on_other_devices(problem)
    # rank by rank, this vendor's two CPUs before the far one; the cap (2 x 2) cuts the rest
    assert queued == [configs[2], configs[4], configs[0], configs[3]]
