"""Evaluate points of the kernel space on one device: reject invalid points without
compiling, measure the rest in the worker."""

from __future__ import annotations

from autotune.devices import DeviceInfo, device_info
from autotune.errors import UsageError
from autotune.families.conv2d.problem import Problem
from autotune.families.conv2d.render import generate
from autotune.space import Config, SearchSpace, convolution_space
from autotune.worker import Measurement, Status, TimingPolicy, Worker


class Evaluator:
    def __init__(
        self,
        device_index: int,
        *,
        space: SearchSpace | None = None,
        policy: TimingPolicy | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.space = space or convolution_space()
        self.device: DeviceInfo = device_info(device_index)
        self.policy = policy or TimingPolicy()
        self.worker = Worker(device_index, timeout_s=timeout_s)

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.close()

    def evaluate(self, config: Config, problem: Problem) -> Measurement:
        try:
            config = self.space.complete(config)
        except UsageError as exc:
            return Measurement(Status.INVALID, error=str(exc))
        reasons = self.space.violations(config, {"filter_width": problem.filter_width}, self.device)
        if reasons:
            return Measurement(Status.INVALID, error="; ".join(reasons))
        variant = generate(config, problem.filter_width, self.space, problem.taps())
        return self.worker.measure(variant, problem, self.policy)
