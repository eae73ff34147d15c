"""Search results written through the store's own API, as a search leaves them: for tests
and the check scripts (checks/fuzz_export.py, checks/fuzz_api.py) that need a tuned
database without measuring."""

import json
from types import SimpleNamespace
from typing import Any


def store_best(db: str, family: Any, problem: Any, configs: list[dict[str, Any]], device: Any = None) -> None:
    """A database in which the best kernel of `problem` on `device` (default: device 0) is
    `configs[0]`, the others measured slower, as a search leaves it: written through the
    store's own API, so export reads it as it reads any search's results."""
    from autotune import __version__
    from autotune.devices import device_info
    from autotune.store import Store, config_key

    device = device or device_info(0)
    store = Store(db)
    try:
        device_id = store.device_id(device)
        problem_id = store.problem_id(family.name, problem.key())
        key = problem.key()
        run = store.start_run(
            device_id=device_id,
            key=json.dumps(key),
            family=family.name,
            problems=json.dumps([key]),
            sampler="random",
            seed=0,
            trials_budget=len(configs),
            time_budget_s=None,
            tool_version=__version__,
        )
        trials = [
            store.add_trial(
                run_id=run.id,
                device_id=device_id,
                problem_id=problem_id,
                number=number,
                origin="sampler",
                config=json.dumps(config),
                config_key=config_key(config),
                status="ok",
                time_ms=1.0 + number,
                runs=1,
                kernel_sha=family.render(config, problem).fingerprint,
            )
            for number, config in enumerate(configs)
        ]
        store.set_best(device_id, problem_id, trials[0], 1.0)
        store.set_run_status(run.id, "finished")
    finally:
        store.close()


def device_row(device: Any, info: dict[str, Any]) -> SimpleNamespace:
    """A devices-table row of `device` holding `info` as its JSON (a row written before some
    limit was recorded: `info` without it), for `DeviceInfo.stored`."""
    return SimpleNamespace(
        info=json.dumps(info),
        platform=device.platform,
        name=device.name,
        vendor=device.vendor,
        driver=device.driver_version,
        type=device.type,
    )
