"""The seed study: every seed kernel (a preset) of a family timed per problem on one device."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from autotune.evaluate import Evaluator
from autotune.families import KernelFamily, Problem
from autotune.outcomes import Measurement, TimingPolicy


@dataclass
class StudyRow:
    problem: Problem
    label: str
    preset: str
    measurement: Measurement

    @property
    def gflops(self) -> float | None:
        m = self.measurement
        return self.problem.gflops(m.time_ms) if m.ok else None


def run_study(
    device_index: int,
    family: KernelFamily,
    problems: Iterable[Problem],
    presets: Iterable[str] | None = None,
    policy: TimingPolicy | None = None,
    on_row: Callable[[StudyRow], None] | None = None,
) -> list[StudyRow]:
    rows = []
    with Evaluator(device_index, family, policy=policy) as evaluator:
        space = family.space
        named = list(presets) if presets is not None else None
        for problem in problems:
            label = family.describe_kind(problem.kind())
            # Named presets run as asked; by default those a search of this problem here
            # would measure first (their `when`), valid or not.
            names = (
                named
                if named is not None
                else [p.name for p in space.presets_applying(problem.key(), evaluator.device)]
            )
            for name in names:
                config = family.space.presets[name].config
                row = StudyRow(problem, label, name, evaluator.evaluate(config, problem))
                rows.append(row)
                if on_row:
                    on_row(row)
    return rows


def speedups(rows: list[StudyRow], baseline: str = "baseline") -> dict[tuple[Problem, str], float]:
    """Speed-up of each (problem, preset) over the baseline preset on the same problem."""
    base = {r.problem: r.measurement.time_ms for r in rows if r.preset == baseline and r.measurement.ok}
    result = {}
    for r in rows:
        b = base.get(r.problem)
        if b and r.measurement.ok and r.measurement.time_ms:
            result[(r.problem, r.preset)] = b / r.measurement.time_ms
    return result
