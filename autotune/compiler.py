"""Compile ahead: build the next variants in parallel while the device times one.

Each compiler is a worker process of its own (same time-out and crash handling as the
measuring worker) holding a context on the device; it returns the program binary, which
the measuring worker loads instead of compiling. Only for devices other than CPUs: on a
CPU the compiler and the kernel being timed would share the same cores.
"""

from __future__ import annotations

import os
import queue
from concurrent.futures import Future, ThreadPoolExecutor

from autotune.families import KernelVariant
from autotune.outcomes import Compiled
from autotune.worker import Worker


def default_compilers() -> int:
    return max(1, min(15, (os.cpu_count() or 2) - 1))


class CompilePool:
    def __init__(self, device_index: int, processes: int, timeout_s: float = 120.0) -> None:
        self.size = processes
        self._idle: queue.Queue[Worker] = queue.Queue()
        for _ in range(processes):
            self._idle.put(Worker(device_index, timeout_s=timeout_s))
        self._threads = ThreadPoolExecutor(max_workers=processes, thread_name_prefix="autotune-compile")

    def submit(self, variant: KernelVariant) -> Future[Compiled]:
        return self._threads.submit(self._compile, variant)

    def _compile(self, variant: KernelVariant) -> Compiled:
        worker = self._idle.get()
        try:
            return worker.compile(variant)
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        self._threads.shutdown(wait=True, cancel_futures=True)
        while not self._idle.empty():
            self._idle.get().close()

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
