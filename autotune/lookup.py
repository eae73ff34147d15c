"""Which kernel to use for (device, problem), with clear fallbacks: one answer for
`convolve()`, `plan()`, `autotune best` and `autotune export`.

Tuned parameters are data; `resolve` walks down a fixed ladder and says which rung
answered:

1. `exact`: tuned on this device for this problem;
2. `nearest_image_size`: tuned on this device for a problem of the same kind (the
   family's key without its size fields), the nearest size by element count;
3. `related_kind`: tuned on this device for a kind the family calls related (for
   convolution: the same filter width with other pixel types or border), the nearest
   kind, then the nearest size;
4. `same_vendor`: tuned for this kind on another device of the same vendor and type;
5. `default`: the family's fallback config (for convolution a runtime-width kernel,
   one program for every width never tuned).

Every answer is checked against this device's limits before it is used. A best kernel
compiled for one input's values (a filter compiled in) is right for that input only;
`any_data_config` says what serves any input in its place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from autotune.devices import DeviceInfo
from autotune.errors import UsageError
from autotune.families import KernelFamily, Problem
from autotune.families.base import size_distance
from autotune.families.image import PIXEL_DEFAULTS
from autotune.outcomes import Status
from autotune.space import Config

LEVELS = ("exact", "nearest_image_size", "related_kind", "same_vendor", "default")


@dataclass(frozen=True)
class Choice:
    config: Config
    problem: Problem  # what was asked for
    level: str
    time_ms: float | None = None
    tuned_size: tuple[int, ...] | None = None
    tuned_device: str | None = None
    device_id: int | None = None  # the database rows it came from (None: the default)
    problem_id: int | None = None
    trial_id: int | None = None
    reason: str = ""  # why this family answered, where a caller chose between families
    compared: dict[str, float | None] = field(default_factory=dict)  # algorithm -> ms it was weighed at

    @property
    def algorithm(self) -> str:
        """What the family calls its kernels: `direct`, `separable`."""
        from autotune.families import get_family

        return get_family(self.problem.family).algorithm


def resolve(
    rows: list[tuple[Any, Any, Any]], family: KernelFamily, problem: Problem, device: DeviceInfo
) -> Choice:
    """`rows` are (best, device, problem) rows from Store.best(); empty without a database."""
    mine, others, related = [], [], []
    kind = problem.kind()
    for best, row_device, row_problem in readable_rows(rows, family):
        if row_problem.family != family.name:
            continue
        fields = row_problem.fields
        row_kind = {k: v for k, v in fields.items() if k not in problem.size_fields}
        kind_distance = None
        if row_kind != kind:
            if row_device.fingerprint != device.fingerprint:
                continue
            kind_distance = family.related_kind_distance(kind, row_kind)
            if kind_distance is None:
                continue
        config = family.read_config(best.config)
        if config is not None and kind_distance is not None:
            config = family.adapt_related(config, problem, device)  # lent as fits this kind
        if config is None or family.violations(config, problem, device):
            continue  # written for another space, or beyond this device's limits
        size = tuple(fields[name] for name in problem.size_fields)
        choice = Choice(
            config,
            problem,
            "",
            best.time_ms,
            size,
            row_device.name,
            best.device_id,
            best.problem_id,
            best.trial_id,
        )
        if kind_distance is not None:
            related.append((kind_distance, choice))
        elif row_device.fingerprint == device.fingerprint:
            mine.append(choice)
        elif row_device.vendor == device.vendor and row_device.type == device.type:
            others.append(choice)
    if mine:
        nearest = min(mine, key=lambda c: size_distance(c.tuned_size, problem.size))  # type: ignore[arg-type]
        level = "exact" if nearest.tuned_size == problem.size else "nearest_image_size"
        return _with_level(nearest, level)
    if related:
        _, nearest = min(related, key=lambda r: (r[0], size_distance(r[1].tuned_size, problem.size)))  # type: ignore[arg-type]
        return _with_level(nearest, "related_kind")
    if others:
        nearest = min(others, key=lambda c: size_distance(c.tuned_size, problem.size))  # type: ignore[arg-type]
        return _with_level(nearest, "same_vendor")
    return Choice(family.fallback(problem, device), problem, "default")


def readable_rows(rows: list[tuple[Any, Any, Any]], family: KernelFamily) -> list[tuple[Any, Any, Any]]:
    """The best rows whose problem this release's family can read: a row a later release wrote
    (a pixel type or problem field this one does not know) or one edited by hand is left out,
    as the store leaves out rows it cannot parse, rather than failing the export, the lookup
    or the listing of the rest."""
    readable = []
    for best_row in rows:
        try:
            if best_row[2].family != family.name:
                continue
            family.problem(best_row[2].fields)
        except (UsageError, TypeError, ValueError):
            continue
        readable.append(best_row)
    return readable


def tuned_sizes(
    rows: list[tuple[Any, Any, Any]], family: KernelFamily, kind: dict[str, Any], device: DeviceInfo
) -> list[tuple[int, ...]]:
    """Sizes of this kind tuned on this device, as the rows hold them."""
    sizes = []
    for _, row_device, row_problem in readable_rows(rows, family):
        if row_problem.family == family.name and row_device.fingerprint == device.fingerprint:
            problem = family.problem(row_problem.fields)
            if problem.kind() == kind:
                sizes.append(problem.size)
    return sizes


def resolve_kind(
    rows: list[tuple[Any, Any, Any]],
    family: KernelFamily,
    kind: dict[str, Any],
    device: DeviceInfo,
    size: tuple[int, ...] | None = None,
) -> Choice:
    """`resolve` for a problem kind at `size`; without one, at the largest size tuned on
    this device, or the family's default size for the device when none was."""
    if size is None:
        tuned = tuned_sizes(rows, family, kind, device)
        size = max(tuned, key=math.prod) if tuned else family.default_size(device)
    fields = dict(zip(family.problem_type.size_fields, size, strict=True))
    return resolve(rows, family, family.problem({**kind, **fields}), device)


def _with_level(choice: Choice, level: str) -> Choice:
    return Choice(**{**choice.__dict__, "level": level})


def fastest_serving_any_data(trials: list[Any], family: KernelFamily) -> Any | None:
    """The fastest verified trial among `trials` (one device and problem) whose kernel
    serves any input."""
    serving = []
    for trial in trials:
        if trial.status != Status.OK or trial.time_ms is None:
            continue
        config = family.read_config(trial.config)
        if config is not None and family.serves_any_data(config):
            serving.append(trial)
    return min(serving, key=lambda t: t.time_ms, default=None)


def any_data_config(
    choice: Choice, family: KernelFamily, device: DeviceInfo, trials: list[Any]
) -> tuple[Config, Any | None]:
    """What runs in place of `choice` for any input, and the trial that measured it:
    the choice itself if it serves any input, else the fastest measured kernel of the
    same device and problem that does, else (no trial) the family's twin of the choice."""
    if family.serves_any_data(choice.config):
        return choice.config, None
    fastest = fastest_serving_any_data(trials, family)
    if fastest is not None:
        config = family.read_config(fastest.config)
        if config is not None and not family.violations(config, choice.problem, device):
            return config, fastest
    return family.any_data_twin(choice.config, choice.problem, device), None


def has_fields(family: KernelFamily, kind: dict[str, Any], fields: dict[str, Any]) -> bool:
    """Whether a tuned kind has the problem fields asked (`--dtype uint8 --border mirror`
    without a filter width); a field a kind leaves out is at its default. An `anchor` is
    cv2's (x, y), compared as the taps it names in that kind's filter (check it first with
    `family.kinds`: here an anchor that fits no filter of the kind's size is no match)."""
    plain = {name: value for name, value in fields.items() if name != "anchor"}
    if any(kind.get(name, PIXEL_DEFAULTS[name]) != value for name, value in plain.items()):
        return False
    if "anchor" not in fields:
        return True
    width, rows = kind["filter_width"], kind.get("filter_height", 0)
    pixels = {name: kind[name] for name in PIXEL_DEFAULTS if name in kind}
    ranks = [kind["rank"]] if "rank" in kind else None
    size = (rows, width) if rows else width
    try:
        placed = family.kinds([size], ranks, {**pixels, "anchor": fields["anchor"]})
    except UsageError:  # an anchor past this kind's filter
        return False
    return placed[0] == kind


def fields_text(fields: dict[str, Any]) -> str:
    """Fields as a command line names them: `dtype=uint8, anchor=0,2`."""
    shown = {name: ",".join(map(str, value)) if name == "anchor" else value for name, value in fields.items()}
    return ", ".join(f"{name}={value}" for name, value in shown.items())
