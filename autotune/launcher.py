"""Queue a compiled variant on a problem: the one place that turns a family's launch
steps into kernel launches, for the measuring worker, `convolve()` and `Convolver`.

A variant may be a pipeline of launches (a row pass, then a column pass) from one
program, passing scratch buffers between them; every caller runs it the same way. A
`Launcher` holds one kernel object per kernel name, so the arguments it last set stay
set: with `keep_arguments`, a launch sets only those that changed (a chained call on
the same arrays sets none; setting them took most of a call's host time).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from autotune.families.base import KernelFamily, KernelVariant, Problem


class Launcher:
    """A variant's kernels from its built program, ready to queue."""

    def __init__(
        self,
        family: KernelFamily,
        variant: KernelVariant,
        program: Any,
        keep_arguments: bool = False,
        scratch: dict[tuple[Any, str], Any] | None = None,
    ) -> None:
        import pyopencl as cl

        self.family = family
        self.variant = variant
        self.program = program
        self.kernels = {
            launch.kernel_name: cl.Kernel(program, launch.kernel_name) for launch in variant.launches
        }
        self.keep_arguments = keep_arguments
        self._arguments_set: dict[str, tuple[Any, ...]] = {}
        # Scratch buffers by (queue, name): launches on one queue share them (each call's
        # launches follow the last call's), launches on two queues at once may not. Launchers
        # whose launches take turns on one queue may share the dict (`scratch`), so the
        # device holds one buffer of each name, the largest they need, not one each.
        self._scratch: dict[tuple[Any, str], Any] = {} if scratch is None else scratch

    def scratch(self, queue: Any, problem: Problem) -> dict[str, Any]:
        """The scratch buffers `problem` needs, made once per queue (and again larger)."""
        import pyopencl as cl

        buffers = {}
        for name, nbytes in self.family.scratch(self.variant, problem).items():
            key = (queue, name)
            kept = self._scratch.get(key)
            if kept is None or kept.size < nbytes:
                kept = self._scratch[key] = cl.Buffer(
                    queue.context, cl.mem_flags.READ_WRITE, size=max(nbytes, 1)
                )
            buffers[name] = kept
        return buffers

    def enqueue(
        self, queue: Any, problem: Problem, buffers: Mapping[str, Any], wait_for: Any = None
    ) -> list[Any]:
        """Queue every launch of the variant on `problem`; their events, in order (the
        last one's end is the result's)."""
        import pyopencl as cl

        if self.variant.later_launches:  # one launch passes nothing between launches
            buffers = {**buffers, **self.scratch(queue, problem)}
        steps = self.family.steps(self.variant, problem, buffers)
        events = []
        for step in steps:
            kernel = self.kernels[step.kernel_name]
            self._set_arguments(step.kernel_name, kernel, step.arguments)
            after = [events[-1]] if events else wait_for  # each launch after the one before
            events.append(
                cl.enqueue_nd_range_kernel(queue, kernel, step.global_size, step.local_size, wait_for=after)
            )
        return events

    def drop_scratch(self) -> None:
        """Let go of the scratch buffers (launches queued with them keep them until done):
        a launcher shared by calls that come and go holds no device memory between them."""
        self._scratch.clear()

    def forget_arguments(self) -> None:
        """Hold no argument of earlier launches (buffers over a caller's arrays)."""
        self._arguments_set.clear()

    def _set_arguments(self, name: str, kernel: Any, arguments: tuple[Any, ...]) -> None:
        if not self.keep_arguments:
            kernel.set_args(*arguments)
            return
        last = self._arguments_set.pop(name, ())  # unknown until every one is set
        for index, value in enumerate(arguments):
            if index >= len(last) or not _same_argument(value, last[index]):
                kernel.set_arg(index, value)
        self._arguments_set[name] = arguments


def _same_argument(value: Any, last: Any) -> bool:
    """Whether a kernel argument already holds `value`: the same buffer or an equal scalar
    of the same type (anything else is set again)."""
    import pyopencl as cl

    if value is last:
        return True
    if type(value) is not type(last):
        return False
    if isinstance(value, np.generic):
        return bool(value == last)
    return isinstance(value, cl.MemoryObjectHolder) and value == last
