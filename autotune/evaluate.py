"""Evaluate points of a family's space on one device: reject invalid points without
compiling, measure the rest in the worker."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable
from concurrent.futures import Future

from autotune.device_lock import DeviceLock
from autotune.devices import DeviceInfo, device_info
from autotune.errors import UsageError
from autotune.families import KernelFamily, KernelVariant, Problem
from autotune.outcomes import Compiled, Measurement, Status, TimingPolicy
from autotune.space import Config
from autotune.worker import Worker


def check_fits(problems: list[Problem], device: DeviceInfo) -> None:
    """Refuse, before anything is stored, problems whose data cannot be held: on the device
    (inputs and output at once) or in this host's memory (those, and the float64
    reference each trial is checked against). Otherwise every trial would fail alike."""
    host = _physical_memory()
    for problem in problems:
        reference = math.prod(problem.output_shape) * 8
        shown = "x".join(map(str, problem.size))
        if problem.min_bytes > device.global_mem_size:
            raise UsageError(
                f"a {shown} problem needs {problem.min_bytes / 2**30:.1f} GiB on the device; "
                f"{device.name} has {device.global_mem_size / 2**30:.1f} GiB"
            )
        if host is not None and problem.min_bytes + reference > host:
            raise UsageError(
                f"a {shown} problem needs {(problem.min_bytes + reference) / 2**30:.1f} GiB of host memory "
                f"(its data and float64 reference); this machine has {host / 2**30:.1f} GiB"
            )


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


#: What a worker's hang or death gives every variant of the request it was in.
PROCESS_FAILURES = (Status.TIMEOUT, Status.CRASHED)


class Evaluator:
    def __init__(
        self,
        device_index: int,
        family: KernelFamily,
        *,
        policy: TimingPolicy | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.family = family
        self.device: DeviceInfo = device_info(device_index)
        self.policy = policy or TimingPolicy()
        self.lock = DeviceLock(self.device)
        self.worker = Worker(device_index, timeout_s=timeout_s)

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.close()
        self.lock.close()

    def evaluate(self, config: Config, problem: Problem) -> Measurement:
        variant = self.render(config, problem)
        return variant if isinstance(variant, Measurement) else self.measure(variant, problem)

    def render(self, config: Config, problem: Problem) -> KernelVariant | Measurement:
        """The variant of a point valid on this device, or why it is not (INVALID)."""
        try:
            config = self.family.space.complete(config)
        except UsageError as exc:
            return Measurement(Status.INVALID, error=str(exc))
        reasons = self.family.violations(config, problem, self.device)
        if reasons:
            return Measurement(Status.INVALID, error="; ".join(reasons))
        return self.family.render(config, problem)

    def start(
        self, variant: KernelVariant, problem: Problem, compiled: Future[Compiled] | None = None
    ) -> Callable[[], Measurement]:
        """Send a rendered variant to be timed, with its binary compiled ahead when there
        is one (a failed compile is the answer), and return what waits for the
        measurement: the caller may work meanwhile (a search asks its sampler for the
        next point). No other process of this host measures on the device from here until
        the measurement is taken (`DeviceLock`)."""
        binary = compiled.result() if compiled is not None else None
        if binary is not None and binary.status is not Status.OK:
            failure = binary.as_failure()
            return lambda: failure
        held = contextlib.ExitStack()
        held.enter_context(self.lock.held())
        try:
            waiting = self.worker.start_measure(variant, problem, self.policy, binary)
        except BaseException:
            held.close()
            raise

        def measurement() -> Measurement:
            with held:
                return waiting()

        return measurement

    def measure_together(
        self,
        configs: list[Config],
        problem: Problem,
        compiled: list[Future[Compiled] | None] | None = None,
    ) -> list[Measurement]:
        """Configs of one problem verified, then timed in turns of a few runs each (the worker's
        `measure_together`), with the binaries built ahead where `compiled` has them; a config
        not valid here, or whose build failed, is its own failed measurement."""
        if compiled is not None and len(compiled) != len(configs):
            raise ValueError(f"{len(compiled)} builds for {len(configs)} configs")
        rendered: list[KernelVariant | Measurement] = [self.render(config, problem) for config in configs]
        binaries: list[Compiled | None] = []
        for i, future in enumerate(compiled if compiled is not None else [None] * len(configs)):
            variant = rendered[i]
            # Built one request at a time (each with its own time-out), so the one request
            # that times them all only loads binaries: twelve kernels a driver takes seconds
            # each to compile would otherwise share one time-out.
            built = future.result() if future is not None else None
            if built is None and isinstance(variant, KernelVariant):
                built = self.worker.compile(variant)
            if built is not None and built.status is not Status.OK:
                rendered[i] = built.as_failure()
            binaries.append(built)
        chosen = [i for i, v in enumerate(rendered) if isinstance(v, KernelVariant)]
        variants = [rendered[i] for i in chosen if isinstance(rendered[i], KernelVariant)]
        if chosen:
            with self.lock.held():
                timed = self.worker.measure_together(
                    variants, problem, self.policy, [binaries[i] for i in chosen]
                )
                if len(chosen) > 1 and all(m.status in PROCESS_FAILURES for m in timed):
                    # the worker hung or died under one of them: each alone, so the others
                    # are measured and the one that did it is named
                    timed = [
                        self.worker.measure(v, problem, self.policy, binaries[i])
                        for i, v in zip(chosen, variants, strict=True)
                    ]
            for i, m in zip(chosen, timed, strict=True):
                rendered[i] = m
        return [m for m in rendered if isinstance(m, Measurement)]

    def measure(
        self, variant: KernelVariant, problem: Problem, compiled: Future[Compiled] | None = None
    ) -> Measurement:
        """Time a rendered variant (`start`, then wait for it)."""
        return self.start(variant, problem, compiled)()
