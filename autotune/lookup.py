"""Which kernel to use for (device, filter width, image size), with clear fallbacks.

Tuned parameters are data; the lookup walks down a fixed ladder and says which rung
answered:

1. `exact`: tuned on this device for this width and image size;
2. `nearest_image_size`: tuned on this device for this width, another image size
   (the nearest by area);
3. `same_vendor`: tuned for this width on another device of the same vendor and type;
4. `default`: the space's fallback config, a runtime-width kernel (one program serves
   every width never tuned).

Every answer is checked against this device's limits before it is used. A best kernel
with the filter compiled in is right for one filter only; `fastest_reading_filter`
finds what serves any filter in its place (the fastest kernel measured for the same
device and problem that reads its filter argument).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from autotune.devices import DeviceInfo
from autotune.errors import UsageError
from autotune.families.conv2d.render import literal_filter
from autotune.space import Config, SearchSpace, convolution_space
from autotune.worker import Status

LEVELS = ("exact", "nearest_image_size", "same_vendor", "default")


@dataclass(frozen=True)
class Choice:
    config: Config
    filter_width: int
    level: str
    time_ms: float | None = None
    tuned_image_size: tuple[int, int] | None = None
    tuned_device: str | None = None
    device_id: int | None = None  # the database rows it came from (None: the default)
    problem_id: int | None = None


def _distance(a: tuple[int, int], b: tuple[int, int]) -> float:
    return abs(math.log((a[0] * a[1]) / (b[0] * b[1])))


def fallback_config(device: DeviceInfo, filter_width: int, space: SearchSpace | None = None) -> Config:
    """The fallback config, shrunk until the device accepts it."""
    space = space or convolution_space()
    assert space.fallback is not None
    config = dict(space.fallback.config)
    if space.violations(config, {"filter_width": filter_width}, device):
        config["filter_space"] = "global"
    while space.violations(config, {"filter_width": filter_width}, device) and (
        config["local_x"] > 1 or config["local_y"] > 1
    ):
        key = "local_x" if config["local_x"] >= config["local_y"] else "local_y"
        config[key] = int(config[key]) // 2
    return config


def choose(
    rows: list[tuple[Any, Any, Any]],
    device: DeviceInfo,
    filter_width: int,
    image_size: tuple[int, int],
    space: SearchSpace | None = None,
) -> Choice:
    """`rows` are (best, device, problem) rows from Store.best(); empty without a database."""
    space = space or convolution_space()
    fingerprint = device.fingerprint
    mine, others = [], []
    for best, row_device, problem in rows:
        if problem.filter_width != filter_width:
            continue
        try:
            config = space.complete(json.loads(best.config))  # older rows lack newer knobs
        except UsageError:
            continue  # written for another space
        if space.violations(config, {"filter_width": filter_width}, device):
            continue
        size = (problem.out_width, problem.out_height)
        same_device = all(
            getattr(row_device, k) == fingerprint[k] for k in ("platform", "name", "vendor", "driver")
        )
        entry = (config, best.time_ms, size, row_device.name, best.device_id, best.problem_id)
        if same_device:
            mine.append(entry)
        elif row_device.vendor == device.vendor and row_device.type == device.type:
            others.append(entry)
    for entries, level in ((mine, None), (others, "same_vendor")):
        if entries:
            config, time_ms, size, name, device_id, problem_id = min(
                entries, key=lambda e: _distance(e[2], image_size)
            )
            if level is None:
                level = "exact" if size == tuple(image_size) else "nearest_image_size"
            return Choice(config, filter_width, level, time_ms, size, name, device_id, problem_id)
    return Choice(fallback_config(device, filter_width, space), filter_width, "default")


def fastest_reading_filter(trials: list[Any], space: SearchSpace | None = None) -> Any | None:
    """The fastest verified trial among `trials` (one device and problem) whose kernel
    reads its filter argument: what serves any filter where the best has one compiled in."""
    space = space or convolution_space()
    reading = []
    for trial in trials:
        if trial.status != Status.OK.value or trial.time_ms is None:
            continue
        try:
            config = space.complete(json.loads(trial.config))
        except UsageError:
            continue
        if not literal_filter(config):
            reading.append(trial)
    return min(reading, key=lambda t: t.time_ms, default=None)
