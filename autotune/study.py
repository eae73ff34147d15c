"""The seed study: every seed kernel (a preset) timed per filter width on one device."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from autotune.evaluate import Evaluator
from autotune.families.conv2d.problem import Problem
from autotune.worker import Measurement, TimingPolicy


@dataclass
class StudyRow:
    filter_width: int
    preset: str
    measurement: Measurement
    problem: Problem

    @property
    def gflops(self) -> float | None:
        m = self.measurement
        return self.problem.flops / (m.time_ms * 1e-3) / 1e9 if m.ok and m.time_ms else None


def run_study(
    device_index: int,
    filter_widths: Iterable[int],
    image_size: tuple[int, int],
    presets: Iterable[str] | None = None,
    policy: TimingPolicy | None = None,
    on_row: Callable[[StudyRow], None] | None = None,
    seed: int = 0,
) -> list[StudyRow]:
    rows = []
    with Evaluator(device_index, policy=policy) as evaluator:
        names = list(presets) if presets is not None else list(evaluator.space.presets)
        for filter_width in filter_widths:
            problem = Problem(filter_width, image_size[0], image_size[1], seed)
            for name in names:
                config = evaluator.space.presets[name].config
                row = StudyRow(filter_width, name, evaluator.evaluate(config, problem), problem)
                rows.append(row)
                if on_row:
                    on_row(row)
    return rows


def speedups(rows: list[StudyRow], baseline: str = "baseline") -> dict[tuple[int, str], float]:
    """Speed-up of each (filter width, preset) over the baseline preset."""
    base = {r.filter_width: r.measurement.time_ms for r in rows if r.preset == baseline and r.measurement.ok}
    result = {}
    for r in rows:
        b = base.get(r.filter_width)
        if b and r.measurement.ok and r.measurement.time_ms:
            result[(r.filter_width, r.preset)] = b / r.measurement.time_ms
    return result
