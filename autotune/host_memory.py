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
from typing import Any

import numpy as np


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
