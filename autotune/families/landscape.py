"""A measured landscape as a kernel family: every point's "kernel" is its config and
measuring it is a look-up in the landscape.

This lets the tuning loop, the ledger and the store run in-process, in milliseconds,
on real measured data (shared/landscapes, Kernel Tuner caches, T4 results), and shows
what a second family needs: a problem type, a space, render and an evaluator. Points
missing from the landscape break its restrictions (`violations`), failed points fail
to compile, as they did on the device that measured them.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from autotune.families.base import KernelFamily, KernelVariant, Problem
from autotune.outcomes import Compiled, Measurement, Status
from autotune.replay import Landscape
from autotune.space import Config, SearchSpace
from autotune.store import config_key


@dataclass(frozen=True)
class LandscapeProblem(Problem):
    family: ClassVar[str] = "landscape"
    size_fields: ClassVar[tuple[str, ...]] = ()

    name: str
    seed: int = 0

    flops = 0
    min_bytes = 0
    launch_extent = (1,)
    output_shape = (1,)

    def inputs(self) -> dict[str, np.ndarray]:
        return {}

    def reference(self) -> np.ndarray:
        return np.zeros(1)

    def tolerance(self) -> float:
        return 0.0


class LandscapeFamily(KernelFamily):
    name: ClassVar[str] = "landscape"
    algorithm: ClassVar[str] = "replayed"
    space_file: ClassVar[str] = ""
    template: ClassVar[str] = ""
    problem_type: ClassVar[type[Problem]] = LandscapeProblem
    description: ClassVar[str] = "a measured landscape, replayed"

    def __init__(self, landscape: Landscape) -> None:
        self.landscape = landscape

    @property
    def space(self) -> SearchSpace:
        return self.landscape.space

    def violations(self, config: Config, problem: Problem, device: object | None = None) -> list[str]:
        return [] if self.landscape.look_up(config)[0] else ["not in the landscape"]

    def render(self, config: Config, problem: Problem, values: Any = None) -> KernelVariant:
        return KernelVariant(
            config_key(config), "landscape", (1,), (1,), config=dict(config), family=self.name
        )

    def arguments(self, variant: KernelVariant, problem: Problem, buffers: Mapping[str, Any]) -> tuple:
        return ()


class LandscapeEvaluator:
    """Answers the tuner as a device would, from the landscape."""

    def __init__(self, family: LandscapeFamily, device: Any) -> None:
        self.family = family
        self.device = device
        self.measured = 0

    def __enter__(self) -> LandscapeEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def evaluate(self, config: Config, problem: Problem) -> Measurement:
        if self.family.violations(config, problem):
            return Measurement(Status.INVALID, error="not in the landscape")
        return self.measure(self.family.render(config, problem), problem)

    def measure(
        self, variant: KernelVariant, problem: Problem, compiled: Future[Compiled] | None = None
    ) -> Measurement:
        self.measured += 1
        _, time_ms = self.family.landscape.look_up(variant.config)
        if time_ms is None:
            return Measurement(Status.COMPILE_ERROR, error="failed where the landscape was measured")
        return Measurement(Status.OK, time_ms=time_ms, min_ms=time_ms, max_ms=time_ms, runs=1)

    def measure_together(
        self, configs: list[Config], problem: Problem, compiled: list[Any] | None = None
    ) -> list[Measurement]:
        """A landscape's times do not drift: each config as `evaluate` answers it."""
        return [self.evaluate(config, problem) for config in configs]
