"""Plans: what `convolve()` and `Convolver` set up before they touch an image (the
kernel chosen from the database, compiled, and the filter's taps on the device), kept
per process so a repeated call neither looks the kernel up nor compiles it.

A plan is keyed by everything the choice depends on: the device, the database URL,
the filter's shape and values (by a digest), the image's size, pixel types, channels,
frames, border, anchor, flip, `algorithm` and `specialise`. Semantics:

- Fresh: each use compares the database's generation (one aggregate query on a kept
  connection, `autotune.store.readers.generation`) with the one the plan was made at.
  A database that gained or replaced a best kernel or a trial since makes a new plan
  on the next call, so `convolve()` picks a kernel tuned meanwhile on its next call,
  and so does a `Convolver` built after it. A `Convolver` already built keeps the plan
  it was built with until it is built again.
- Bounded: the `PLAN_CACHE_SIZE` most recently used plans are kept. A plan holds its
  compiled program, so a program dropped from `runtime._programs` (its own bound,
  `runtime.KERNEL_CACHE_SIZE`) lives on while a plan uses it: at most both bounds'
  worth of programs are alive.
- Thread-safe: one lock guards the cache; plans are immutable and shared (a kernel's
  arguments are set and it is queued under `runtime._lock`). Two threads that miss on
  the same request at once both look it up; the program is compiled once.
- Device buffers: `convolve()` on a device that does not share host memory (a GPU)
  copies the image into device buffers lent from a pool kept across calls (`lent_buffers`)
  instead of making buffers from the arrays, and through page-locked staging kept with
  them, copied into and out of on the host by several threads: on the H200 a 64 MB round
  trip took 63 ms through new buffers, 34 ms through kept ones, and 8.5 ms through kept
  ones with staging copied by 8 threads (`bench/host_transfers.py`). The pool holds at
  most `BUFFER_POOL_BYTES` of device and page-locked memory, least recently used first
  out, or the last call's buffers alone where they take more (up to twice that). Where no
  page-locked memory can be had, a call transfers from and to its arrays as they are.
- Tied to the context it was made in: a plan whose context is no longer the one the
  process holds for its device is dropped, never used. `clear_plans()` lets go of
  every plan, compiled program, context and kept database connection, so nothing of
  the device is held (Convolvers keep their own).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

import autotune.runtime as runtime
from autotune.call_arguments import Pixels, check_flag
from autotune.devices import DeviceInfo
from autotune.families import KernelFamily, KernelVariant, get_family
from autotune.host_memory import host_alignment, page_locked
from autotune.launcher import Launcher
from autotune.lookup import Choice

PLAN_CACHE_SIZE = 64
BUFFER_POOL_BYTES = 1 << 30


@dataclasses.dataclass(frozen=True)
class Plan:
    """A kernel chosen and compiled for one request, with its taps on the device."""

    info: DeviceInfo
    context: Any
    queue: Any
    choice: Choice
    family: KernelFamily
    variant: KernelVariant
    launcher: Launcher  # its kernels, shared by every thread's calls (under `runtime._lock`)
    taps: dict[str, Any]  # the filter's values as device buffers, by kernel argument name
    host_alignment: int | None  # bytes a host array needs to be used in place; None: not a CPU device


class PlanCacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int
    currsize: int


_lock = threading.Lock()
_plans: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], Plan]] = OrderedDict()
_counts = {"hits": 0, "misses": 0}
_pool_lock = threading.Lock()
# (id of the context, role, bytes, staged) -> (context, lent buffer)
_pool: OrderedDict[tuple[int, str, int, bool], tuple[Any, Lent]] = OrderedDict()


def prepared(
    device_index: int,
    db: str | None,
    size: tuple[int, int],
    filt: np.ndarray,
    algorithm: str,
    specialise: bool,
    pixels: Pixels,
) -> Plan:
    """The plan for this request: the kept one while the database is unchanged, else a
    new one (looked up, compiled, taps uploaded)."""
    from autotune.store import readers

    specialise = check_flag("specialise", specialise)  # a key of the plan: "no" must not pass as true

    url = readers.resolved(db)
    digest = hashlib.blake2b(filt.tobytes(), digest_size=16).hexdigest()
    key = (device_index, url, filt.shape, digest, tuple(size), pixels, algorithm, specialise)
    generation = readers.generation(url)  # before the lookup: a write meanwhile makes a new plan
    _, context, _ = runtime._context(device_index)
    with _lock:
        kept = _plans.get(key)
        if kept is not None and kept[0] == generation and kept[1].context is context:
            _plans.move_to_end(key)
            _counts["hits"] += 1
            return kept[1]
        _counts["misses"] += 1
    plan = _build(device_index, db, size, filt, algorithm, specialise, pixels)
    with _lock:
        _plans[key] = (generation, plan)
        _plans.move_to_end(key)
        while len(_plans) > PLAN_CACHE_SIZE:
            _plans.popitem(last=False)
    return plan


def _build(
    device_index: int,
    db: str | None,
    size: tuple[int, int],
    filt: np.ndarray,
    algorithm: str,
    specialise: bool,
    pixels: Pixels,
) -> Plan:
    import pyopencl as cl

    with runtime._lock:
        info, context, queue = runtime._context(device_index)
        choice, values = runtime._plan(size, filt.shape, info, db, filt, algorithm, specialise, pixels)
        family = get_family(choice.problem.family)
        variant = runtime._variant(choice, family, values, info, db, specialise)
        program = runtime._program(device_index, context, variant.source, variant.build_options)
        launcher = Launcher(family, variant, program)
    mf = cl.mem_flags
    taps = {
        name: cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(a))
        for name, a in family.value_arrays(values).items()
    }
    alignment = host_alignment(info, context.devices[0])
    return Plan(info, context, queue, choice, family, variant, launcher, taps, alignment)


class Lent(NamedTuple):
    """A device buffer lent to one call, with its page-locked staging bytes where the
    call moves NumPy arrays to a GPU (None elsewhere)."""

    buffer: Any
    staging: np.ndarray | None


@contextlib.contextmanager
def lent_buffers(
    context: Any, input_bytes: int, output_bytes: int, queue: Any = None
) -> Iterator[tuple[Lent | None, Lent | None]]:
    """An input and an output device buffer of these sizes (None for a size of 0) for one
    call, from the pool where one is kept, else new; given back to the pool afterwards.
    With `queue`, each comes with page-locked staging of its size (`page_locked`) for
    `staged_upload` / `staged_download`. Two calls never hold the same buffer: a call
    takes it out of the pool while it runs."""
    import pyopencl as cl

    staged = queue is not None

    def take(role: str, size: int) -> Lent | None:
        if not size:
            return None
        with _pool_lock:
            owner, lent = _pool.pop((id(context), role, size, staged), (None, None))
        # The pool holds each buffer's context, so an id is never another context's.
        if owner is context:
            return lent
        buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE, size=size)
        staging = None
        if staged:
            try:
                staging = page_locked(context, queue, size)[1]
            except (cl.Error, MemoryError):  # no page-locked memory to spare: pageable transfers
                staging = None
        return Lent(buffer, staging)

    keys = [(id(context), "input", input_bytes, staged), (id(context), "output", output_bytes, staged)]
    lent = [take(role, size) for _, role, size, _ in keys]
    try:
        yield lent[0], lent[1]
    finally:
        with _pool_lock:
            for key, kept in zip(keys, lent, strict=True):
                if kept is not None:
                    _pool.setdefault(key, (context, kept))
                    _pool.move_to_end(key)
            # Least recently used first out. A call whose buffers alone pass the bound (8192x8192
            # float32 with staging: 1 GiB) keeps them for the next call, instead of allocating
            # and page-locking them again every call, up to twice the bound; larger are let go.
            keep = keys if _held_bytes(keys) <= 2 * BUFFER_POOL_BYTES else []
            while _held_bytes(_pool) > BUFFER_POOL_BYTES and next(iter(_pool)) not in keep:
                _pool.popitem(last=False)


def _held_bytes(keys: Iterable[tuple[int, str, int, bool]]) -> int:
    """Device and page-locked host bytes of these pool keys (a staged buffer holds its
    size twice)."""
    return sum(size * (2 if staged else 1) for _, _, size, staged in keys)


def pooled_buffers() -> list[tuple[str, int]]:
    """The (role, bytes) of each device buffer kept for `convolve()`, least recently used first."""
    with _pool_lock:
        return [(role, size) for _, role, size, _ in _pool]


def clear_plans() -> None:
    """Forget every plan, kept device buffer, compiled program, OpenCL context and kept
    database connection of this process; the next call looks up, compiles and connects afresh."""
    from autotune.store import readers

    with runtime._lock, _lock, _pool_lock:
        _plans.clear()
        _pool.clear()
        runtime._programs.clear()
        runtime._contexts.clear()
    readers.close_all()


def plan_cache_info() -> PlanCacheInfo:
    """Hits and misses of the plan cache since the process started, as functools' cache_info."""
    with _lock:
        return PlanCacheInfo(_counts["hits"], _counts["misses"], PLAN_CACHE_SIZE, len(_plans))


def cached_choices() -> list[Choice]:
    """The kernels the kept plans run, least recently used first."""
    with _lock:
        return [plan.choice for _, plan in _plans.values()]
