"""Kernels as other programs need them: which tuned kernels to export (through the
lookup), the .cl source and JSON manifest, the family's C header, T4 results."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune import __version__
from autotune.devices import DeviceInfo
from autotune.errors import UsageError
from autotune.families import KernelFamily, KernelVariant, Problem
from autotune.files import write_file, write_files
from autotune.lookup import any_data_config, fields_text, has_fields, readable_rows, resolve_kind
from autotune.outcomes import Status, first_measurement
from autotune.store import Store

T4_INVALIDITY = {
    Status.OK: "correct",
    Status.INVALID: "constraints",
    Status.COMPILE_ERROR: "compile",
    Status.LAUNCH_ERROR: "runtime",
    Status.CRASHED: "runtime",
    Status.TIMEOUT: "timeout",
    Status.WRONG_RESULT: "correctness",
}


@dataclass(frozen=True)
class Exported:
    """One kernel to export: what runs, the problem it was tuned on and its time there."""

    variant: KernelVariant
    problem: Problem
    time_ms: float | None
    problem_id: int | None = None
    note: str | None = None  # why another kernel than the best is exported


def gflops(problem: Problem | None, time_ms: float | None) -> float | None:
    return problem.gflops(time_ms) if problem is not None else None


def manifest(
    family: KernelFamily,
    variant: KernelVariant,
    source_name: str,
    device: DeviceInfo | None,
    problem: Problem | None = None,
    time_ms: float | None = None,
) -> dict[str, Any]:
    # One launch: its kernel and geometry; several: the family's `launches` say each.
    one = not variant.later_launches
    return {
        "family": family.name,
        **({"kernel_name": variant.kernel_name} if one else {}),
        "source": source_name,
        "build_options": list(variant.build_options),
        **(
            {"local_size": list(variant.local_size), "work_per_item": list(variant.work_per_item)}
            if one
            else {}
        ),
        "config": variant.config,
        "device": device.fingerprint if device else None,
        "image_size": list(problem.size) if problem is not None else None,
        "time_ms": time_ms,
        "gflops": gflops(problem, time_ms),
        **family.manifest_fields(variant),
        "generator": f"autotune {__version__}",
    }


def choose(
    store: Store,
    family: KernelFamily,
    device: DeviceInfo,
    kinds: list[dict[str, Any]] | None,
    size: tuple[int, ...] | None,
    values: dict[str, Any] | None = None,
    only_tuned: bool = False,
    fields: dict[str, Any] | None = None,
) -> list[Exported]:
    """The tuned kernel of this device for each problem kind (every tuned kind when
    None, or every one with the problem `fields` asked; with `only_tuned`, those of
    `kinds` tuned on it, maybe none), for the size nearest `size` (default: the largest
    tuned). A best compiled for one input's values is exported with the values given
    for its kind (`values`, by `family.describe_kind`), else replaced by the fastest
    measured kernel that serves any input."""
    row = store.device_row(device.fingerprint)
    rows = [] if row is None else readable_rows(store.best(device_id=row.id, family=family.name), family)
    tuned: dict[str, dict[str, Any]] = {}  # kinds tuned on this device, by label
    for _, _, problem_row in rows:
        kind = family.problem(problem_row.fields).kind()
        tuned.setdefault(family.describe_kind(kind), kind)
    if kinds is not None:
        wanted = [family.describe_kind(k) for k in kinds]
    else:
        wanted = [label for label, kind in tuned.items() if has_fields(family, kind, fields or {})]
    if only_tuned:
        wanted = [label for label in wanted if label in tuned]
        if not wanted:
            return []
    missing = [label for label in wanted if label not in tuned]
    if not wanted or missing:
        asked = fields_text(fields or {})
        which = missing[0] if missing else "any problem" + (f" with {asked}" if asked else "")
        where = f"device {device.index} ({device.name})" if device.index is not None else device.name
        raise UsageError(f"no tuned kernel for {which} on {where}; run `autotune search` first")
    chosen = []
    for label in wanted:
        kind = tuned[label]
        choice = resolve_kind(rows, family, kind, device, size)
        tuned_problem = _problem(family, kind, choice.tuned_size or choice.problem.size)
        given = (values or {}).get(label)
        if family.serves_any_data(choice.config) or given is not None:
            variant = family.render(choice.config, tuned_problem, values=given)
            chosen.append(Exported(variant, tuned_problem, choice.time_ms, choice.problem_id))
            continue
        trials = store.trials(device_id=choice.device_id, problem_id=choice.problem_id)
        config, trial = any_data_config(choice, family, device, trials)
        if trial is None:
            raise UsageError(f"{label}: {family.values_needed}")
        note = (
            f"{label}: the best kernel ({choice.time_ms:.4g} ms) {family.one_input_kernel}; exporting the "
            f"fastest that {family.any_input_kernel} ({trial.time_ms:.4g} ms; {family.values_option} "
            "exports the other)"
        )
        variant = family.render(config, tuned_problem)
        chosen.append(Exported(variant, tuned_problem, trial.time_ms, choice.problem_id, note))
    return chosen


def _problem(family: KernelFamily, kind: dict[str, Any], size: tuple[int, ...]) -> Problem:
    return family.problem({**kind, **dict(zip(family.problem_type.size_fields, size, strict=True))})


def kernel_files(
    family: KernelFamily,
    variant: KernelVariant,
    out_dir: str | Path,
    device: DeviceInfo | None,
    problem: Problem | None = None,
    time_ms: float | None = None,
) -> tuple[tuple[Path, str], tuple[Path, str]]:
    """(path, text) of <stem>.cl and <stem>.json in out_dir, not written yet."""
    out_dir = Path(out_dir)
    stem = family.export_stem(variant)
    source_path = out_dir / f"{stem}.cl"
    manifest_path = out_dir / f"{stem}.json"
    data = manifest(family, variant, source_path.name, device, problem, time_ms)
    return (source_path, variant.source), (manifest_path, json.dumps(data, indent=2) + "\n")


def write_kernel(
    family: KernelFamily,
    variant: KernelVariant,
    out_dir: str | Path,
    device: DeviceInfo | None,
    problem: Problem | None = None,
    time_ms: float | None = None,
) -> tuple[Path, Path]:
    """<stem>.cl and <stem>.json in out_dir (created if needed), both or neither."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    source, manifest_file = kernel_files(family, variant, out_dir, device, problem, time_ms)
    write_files([source, manifest_file])
    return source[0], manifest_file[0]


def t4_results(trials: list[Any], problems: dict[int, Any], family: KernelFamily) -> dict[str, Any]:
    """Trials in the T4 autotuning results format (schema 1.0.0) for other tuners' tools;
    each configuration also names the problem's kind (for convolution, its filter width)."""
    results = []
    for t in trials:
        if not first_measurement(t.origin):
            continue
        configuration = json.loads(t.config)
        configuration.update(family.t4_fields(problems[t.problem_id].fields))
        results.append(
            {
                "timestamp": t.created_at.isoformat(),
                "configuration": configuration,
                "objectives": ["time"],
                "times": {
                    "compilation_time": (t.compile_ms or 0.0) / 1e3,
                    "runtimes": [t.time_ms / 1e3] if t.time_ms is not None else [],
                },
                "invalidity": T4_INVALIDITY.get(t.status, "runtime"),
                "correctness": 1 if t.status == Status.OK else 0,
                "measurements": (
                    [{"name": "time", "value": t.time_ms, "unit": "ms"}] if t.time_ms is not None else []
                ),
            }
        )
    return {"schema_version": "1.0.0", "results": results}


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_file(path, text)
