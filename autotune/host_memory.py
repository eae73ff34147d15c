"""NumPy arrays as kernel buffers without copies, on devices that share host memory.

A CPU device (PoCL) reads and writes host memory: a buffer made with `USE_HOST_PTR`
over a NumPy array is that array, so neither an upload nor a download copies a byte.
The kernels assume their buffers start at the device's base alignment
(`CL_DEVICE_MEM_BASE_ADDR_ALIGN`, 128 bytes on PoCL: aligned float4 loads), which NumPy's
allocator does not promise (16 bytes), so only arrays that are C-contiguous and aligned
are used in place; outputs made here are allocated aligned, and anything else is copied
as before. After a kernel wrote a host buffer, mapping it is what makes the host's view
current (OpenCL's rule; on PoCL it copies nothing).
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numpy as np

# Below this many bytes a copy is not split: handing bands to threads costs more than it saves.
PARALLEL_COPY_BYTES = 1 << 22
_copiers: ThreadPoolExecutor | None = None
_copiers_lock = threading.Lock()


def _forget_copiers() -> None:
    """In a forked child: the pool's threads (and a lock one of them held) stayed behind."""
    global _copiers, _copiers_lock
    _copiers, _copiers_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_copiers)


def host_alignment(info: Any, device: Any) -> int | None:
    """Bytes a host array's start needs to serve as this device's buffer in place; None
    for a device with memory of its own (a GPU: staged transfers instead)."""
    if not (info.is_cpu or getattr(device, "host_unified_memory", False)):
        return None
    return max(int(device.mem_base_addr_align) // 8, 16)


def aligned_empty(shape: tuple[int, ...], dtype: Any, alignment: int) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts at a multiple of `alignment`."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def usable_in_place(array: np.ndarray, alignment: int | None, dtype: Any, writes: bool = False) -> bool:
    """Whether `array` can be a kernel's buffer as it is: a device sharing host memory,
    the kernel's dtype, C-contiguous, aligned (and writeable, for an output)."""
    return (
        alignment is not None
        and array.dtype == dtype
        and array.flags.c_contiguous
        and array.ctypes.data % alignment == 0
        and (array.flags.writeable or not writes)
    )


def wrap(context: Any, array: np.ndarray, writes: bool) -> Any:
    """A buffer over the array's own memory (check `usable_in_place` first)."""
    import pyopencl as cl

    mf = cl.mem_flags
    return cl.Buffer(context, (mf.WRITE_ONLY if writes else mf.READ_ONLY) | mf.USE_HOST_PTR, hostbuf=array)


def fetch(queue: Any, buffer: Any, array: np.ndarray) -> None:
    """Make what the kernels wrote to `buffer` (made by `wrap` over `array`) visible in
    `array`: map and unmap it (waiting for the kernels and the unmap, so the array may
    be freed as soon as this returns)."""
    import pyopencl as cl

    mapped, _ = cl.enqueue_map_buffer(queue, buffer, cl.map_flags.READ, 0, array.shape, array.dtype)
    mapped.base.release(queue).wait()


def copy_threads() -> int:
    """Threads a large host copy (or a large reference's bands, `correlate_valid`) is split
    over: the cores this process may run on, at most 8."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(8, cores))


def parallel_copy(target: np.ndarray, source: np.ndarray, threads: int | None = None) -> None:
    """`np.copyto(target, source, casting="unsafe")` (`source` of `target`'s shape) split
    into bands of rows over a pool of threads. One core copies host memory at a fraction
    of what the bus to a GPU moves, and writing a freshly allocated result first faults
    its pages in: a host round trip is bound by those copies, and NumPy lets go of the GIL
    while it copies, so bands of rows copy at once."""
    global _copiers
    threads = copy_threads() if threads is None else threads
    rows = target.shape[0] if target.ndim else 0
    if threads <= 1 or rows < 2 or target.nbytes < PARALLEL_COPY_BYTES:
        np.copyto(target, source, casting="unsafe")
        return
    source = np.broadcast_to(source, target.shape)  # what np.copyto accepts, cut in the same bands
    parts = min(threads, rows)
    bounds = [round(k * rows / parts) for k in range(parts + 1)]
    with _copiers_lock:
        if _copiers is None or _copiers._max_workers < parts:  # noqa: SLF001 - grow the pool when asked for more
            if _copiers is not None:
                _copiers.shutdown(wait=False)
            _copiers = ThreadPoolExecutor(max(parts, copy_threads()), thread_name_prefix="autotune-copy")
        pool = _copiers
    bands = [slice(first, last) for first, last in zip(bounds, bounds[1:], strict=False)]
    copies = [pool.submit(np.copyto, target[band], source[band], casting="unsafe") for band in bands]
    wait(copies)  # every band done, even when one failed, before the caller reuses `target`
    for copy in copies:
        copy.result()


def page_locked(context: Any, queue: Any, nbytes: int) -> tuple[Any, np.ndarray]:
    """A page-locked host buffer (`ALLOC_HOST_PTR`) of `nbytes` and the bytes it maps to:
    on a GPU, transfers from and to it run at the bus's speed, where the driver first
    stages pageable NumPy memory through its own buffer, one core copying."""
    import pyopencl as cl

    mf = cl.mem_flags
    pinned = cl.Buffer(context, mf.READ_WRITE | mf.ALLOC_HOST_PTR, size=nbytes)
    flags = cl.map_flags.READ | cl.map_flags.WRITE
    host, _ = cl.enqueue_map_buffer(queue, pinned, flags, 0, (nbytes,), np.uint8)
    return pinned, host


def _view(staging: np.ndarray, like: np.ndarray) -> np.ndarray:
    return staging[: like.nbytes].view(like.dtype).reshape(like.shape)


def staged_upload(queue: Any, buffer: Any, array: np.ndarray, staging: np.ndarray) -> Any:
    """Queue `array`'s upload into `buffer` through the page-locked `staging` bytes
    (`page_locked`): copied there on the host by `parallel_copy`, then moved without
    waiting. Returns the transfer's event: `staging` must not be written before it ends."""
    import pyopencl as cl

    view = _view(staging, array)
    parallel_copy(view, array)
    return cl.enqueue_copy(queue, buffer, view, is_blocking=False)


def staged_download(queue: Any, array: np.ndarray, buffer: Any, staging: np.ndarray) -> None:
    """Move `buffer` into `array` through the page-locked `staging` bytes, after
    everything queued before; returns when `array` holds it."""
    import pyopencl as cl

    view = _view(staging, array)
    cl.enqueue_copy(queue, view, buffer, is_blocking=True)
    parallel_copy(array, view)
