"""What a search found for one problem: best time and config, the seed kernels' times,
trials and failures; read from the store and a problem's ledger."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from autotune.families import Problem
from autotune.outcomes import Status, first_measurement
from autotune.space import Config
from autotune.store import config_key
from autotune.tune.ledger import Ledger


@dataclass
class ProblemResult:
    problem: Problem
    label: str  # how the family names the problem's kind (`F=5`)
    trials: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    best_ms: float | None = None
    best_config: Config | None = None
    baseline_ms: float | None = None
    best_seed_ms: float | None = None
    best_seed_preset: str | None = None
    interrupted: bool = False

    @property
    def gflops(self) -> float | None:
        return self.problem.gflops(self.best_ms)

    @property
    def gbs(self) -> float | None:
        return self.problem.gbs(self.best_ms)


def summarise(ledger: Ledger, result: ProblemResult, baseline_preset: str = "baseline") -> ProblemResult:
    """Fill in the best kernel (the stored best, or if the search stopped before
    re-timing, the best seen in this run) and the seed kernels' best times."""
    family, store = ledger.family, ledger.store
    for best, _, _ in store.best(device_id=ledger.device_id):
        if best.problem_id == ledger.problem_id:
            result.best_ms = best.time_ms
            result.best_config = family.read_config(best.config) or _stored(best.config)
    if result.best_ms is None:
        ok = [
            t
            for t in ledger.trials
            if t.run_id == ledger.run_id and t.status == Status.OK and t.time_ms is not None
        ]
        if ok:
            top = min(ok, key=lambda t: t.time_ms or 0.0)
            result.best_ms, result.best_config = (
                top.time_ms,
                family.read_config(top.config) or _stored(top.config),
            )
    # Seed kernels are weighed as the best is: the best's own time where a seed won,
    # else the seed's first measurement (re-timing rows are left out: a minimum over
    # more rows than the best had would flatter the seed).
    presets = {config_key(p.config): name for name, p in family.space.presets.items()}
    best_key = config_key(result.best_config) if result.best_config is not None else None
    seed_times: dict[str, float] = {}
    for key, t in ledger.measurements():
        if t.status == Status.OK and key in presets and t.time_ms is not None:
            name = presets[key]
            if key == best_key and result.best_ms is not None:
                seed_times[name] = result.best_ms
            elif first_measurement(t.origin):
                seed_times[name] = min(seed_times.get(name, float("inf")), t.time_ms)
    result.baseline_ms = seed_times.get(baseline_preset)
    if seed_times:
        result.best_seed_preset, result.best_seed_ms = min(seed_times.items(), key=lambda kv: kv[1])
    return result


def _stored(text: str) -> Config:
    """A config written for another space, shown as stored."""
    return json.loads(text)
