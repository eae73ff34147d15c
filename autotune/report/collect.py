"""What a report shows, read from the store as plain data (the `--format json` output).

Nothing here draws or measures: figures and ceilings are added by the caller. Rows a
release cannot read (another family's key, a damaged config) are left out, as the
other commands that read do.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from autotune.cli.output import device_record
from autotune.errors import AutotuneError
from autotune.families import KernelFamily, Problem, get_family
from autotune.outcomes import Origin, Status, counts_as_trial, first_measurement
from autotune.report.importance import importances
from autotune.store import Device, ProblemRow, Run, Store, Trial, config_key

BASELINE_PRESET = "baseline"  # what the seed study's speed-ups are over (study.speedups)
EXAMPLE_ERROR_CHARS = 400


@dataclass(frozen=True)
class Scope:
    """Which part of the database a report covers: every device and run when None."""

    device_id: int | None = None
    run_id: int | None = None


def _family(name: str) -> KernelFamily | None:
    try:
        return get_family(name)
    except AutotuneError:
        return None


def _problem(row: ProblemRow | None) -> tuple[KernelFamily, Problem] | None:
    """A stored problem as its family reads it; None for a row this release cannot read."""
    family = _family(row.family) if row is not None else None
    if family is None or row is None or row.fields is None:
        return None
    try:
        return family, family.problem(row.fields)
    except (AutotuneError, TypeError, ValueError):
        return None


def _label(family: KernelFamily, problem: Problem, sizes: set[tuple[int, ...]], families: set[str]) -> str:
    """The problem's short name, with its family and size where the page holds several."""
    label = family.describe_kind(problem.kind())
    if len(families) > 1:
        label = f"{family.name} {label}"
    if len(sizes) > 1:
        label += " @" + "x".join(map(str, problem.size))
    return label


def _config(family: KernelFamily, text: str) -> Any:
    config = family.read_config(text)
    if config is not None:
        return config
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return text


def _preset_names(family: KernelFamily) -> dict[str, str]:
    """Config key of each seed preset -> its name."""
    return {config_key(p.config): name for name, p in family.space.presets.items()}


def _seed_study(
    family: KernelFamily, trials: list[Trial], best_ms: float, best_config: Any
) -> dict[str, Any] | None:
    """Each seed preset's time on one problem (its fastest first measurement; the best's
    own time where a preset is the best, as `search` weighs them) and the tuned kernel's,
    with speed-ups over the baseline preset. None when the baseline was never measured."""
    names = _preset_names(family)
    best_key = config_key(best_config) if isinstance(best_config, dict) else None
    times: dict[str, float] = {}
    for t in trials:
        if t.status != Status.OK or t.time_ms is None or not first_measurement(t.origin):
            continue
        config = family.read_config(t.config)
        name = names.get(config_key(config)) if config is not None else None
        if name is not None:
            measured = best_ms if config_key(config) == best_key else t.time_ms
            times[name] = min(times.get(name, float("inf")), measured)
    baseline = times.get(BASELINE_PRESET)
    if baseline is None:
        return None
    ordered = {name: times[name] for name in family.space.presets if name in times}
    return {
        "baseline_ms": baseline,
        "presets_ms": ordered,
        "tuned_ms": best_ms,
        "speedup": {name: baseline / ms for name, ms in ordered.items()} | {"tuned": baseline / best_ms},
    }


def _export_stem(family: KernelFamily, config: Any, problem: Problem) -> str | None:
    """The file stem `autotune export` gives this kernel (to link the page to it)."""
    if not isinstance(config, dict):
        return None
    try:
        return family.export_stem(family.render(config, problem))
    except AutotuneError:
        return None  # a kernel compiled for one input's values: exported under another config


def _best_rows(store: Store, device: Device, trials: list[Trial]) -> list[dict[str, Any]]:
    rows = []
    readable = []
    for best, _, problem_row in store.best(device_id=device.id):
        found = _problem(problem_row)
        if found is not None:
            readable.append((best, problem_row, *found))
    sizes = {p.size for *_, p in readable}
    families = {f.name for *_, f, _ in readable}
    by_problem: dict[int, list[Trial]] = defaultdict(list)
    for t in trials:
        by_problem[t.problem_id].append(t)
    run_of = {t.id: t.run_id for t in trials}
    for best, problem_row, family, problem in readable:
        config = _config(family, best.config)
        rows.append(
            {
                "problem_id": problem_row.id,
                "family": family.name,
                "problem": _label(family, problem, sizes, families),
                "label": _label(family, problem, sizes, {family.name}),  # within its family
                **problem.kind(),
                "image_size": list(problem.size),
                "time_ms": best.time_ms,
                "gflops": problem.gflops(best.time_ms),
                "gbs": problem.gbs(best.time_ms),
                "intensity": problem.flops / problem.min_bytes,
                "config": config,
                "trial_id": best.trial_id,
                "run_id": run_of.get(best.trial_id),
                "seed_study": _seed_study(family, by_problem[problem_row.id], best.time_ms, config),
                "export_stem": _export_stem(family, config, problem),
            }
        )
    return rows


def _failures(trials: list[Trial]) -> list[dict[str, Any]]:
    """Trials that did not give a verified time, by status, with the first error of each."""
    counts: Counter[str] = Counter()
    example: dict[str, str] = {}
    for t in trials:
        if t.status == Status.OK or t.origin == Origin.RETIME:
            continue
        counts[t.status] += 1
        if t.error and t.status not in example:
            text = t.error.strip()
            # its end, as outcomes.clip keeps it: where compilers and tracebacks put the cause
            example[t.status] = (
                text if len(text) <= EXAMPLE_ERROR_CHARS else "..." + text[-EXAMPLE_ERROR_CHARS:]
            )
    return [{"status": s, "count": n, "example": example.get(s)} for s, n in counts.most_common()]


def _trial_points(run: Run, trials: list[Trial]) -> list[dict[str, Any]]:
    """The trials a search counts, in order, with the best verified time so far."""
    points, best = [], None
    counted = [t for t in trials if counts_as_trial(t.origin, t.status)]
    for position, t in enumerate(sorted(counted, key=lambda t: t.id), start=1):  # in the order run
        ok = t.status == Status.OK and t.time_ms is not None
        if ok and (best is None or t.time_ms < best):  # type: ignore[operator]
            best = t.time_ms
        seconds = (t.created_at - run.started_at).total_seconds() if t.created_at and run.started_at else None
        points.append(
            {
                "trial": position,
                "trial_id": t.id,
                "origin": t.origin,
                "status": t.status,
                "time_ms": t.time_ms if ok else None,
                "seconds": seconds,
                "best_ms": best,
            }
        )
    return points


def _run_record(
    run: Run, device: Device, trials: list[Trial], problems: dict[int, ProblemRow]
) -> dict[str, Any]:
    by_problem: dict[int, list[Trial]] = defaultdict(list)
    for t in trials:
        by_problem[t.problem_id].append(t)
    readable = {pid: found for pid in by_problem if (found := _problem(problems.get(pid))) is not None}
    sizes = {p.size for _, p in readable.values()}
    families = {f.name for f, _ in readable.values()}
    records = []
    for problem_id, (family, problem) in readable.items():
        mine = by_problem[problem_id]
        points = _trial_points(run, mine)
        retimed = [t.time_ms for t in mine if t.origin == Origin.RETIME and t.time_ms is not None]
        first_ok = [
            t for t in mine if t.status == Status.OK and t.time_ms is not None and first_measurement(t.origin)
        ]
        records.append(
            {
                "problem_id": problem_id,
                "problem": _label(family, problem, sizes, families),
                **problem.kind(),
                "image_size": list(problem.size),
                "trials": points,
                "origins": dict(Counter(p["origin"] for p in points)),
                "retimed_ms": min(retimed) if retimed else None,
                "times_ms": [t.time_ms for t in first_ok],
                "failures": _failures(mine),
                "importance": importances(
                    family, [(family.read_config(t.config), t.time_ms) for t in first_ok]
                ),
            }
        )
    return {
        "run_id": run.id,
        "device_id": device.id,
        "device": device.name,
        "family": run.family,
        "sampler": run.sampler,
        "seed": run.seed,
        "status": run.status,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "problems": records,
    }


def collect(store: Store, scope: Scope) -> dict[str, Any]:
    """Devices (best kernels, seed study) and runs (trials, failures, importances)."""
    problems = store.problems()
    devices = []
    for device in store.devices():
        if scope.device_id is not None and device.id != scope.device_id:
            continue
        trials = store.trials(device_id=device.id)
        devices.append(
            {
                "id": device.id,
                **device_record(device),
                "fingerprint": device.fingerprint,
                "best": _best_rows(store, device, trials),
            }
        )
    runs = []
    for run, device in store.runs():
        if scope.run_id is not None and run.id != scope.run_id:
            continue
        if scope.device_id is not None and device.id != scope.device_id:
            continue
        runs.append(_run_record(run, device, store.trials(run_id=run.id), problems))
    return {"devices": devices, "runs": runs}
