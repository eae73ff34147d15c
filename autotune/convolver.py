"""`autotune.Convolver`: one convolution set up once and called many times.

`convolve()` keeps a plan per request (autotune/plans.py: the kernel chosen, compiled,
the taps uploaded) but still allocates the image's buffers on every call. A Convolver
takes a plan when it is built and keeps it: its kernel is fixed then (a faster kernel
tuned later is used by a Convolver built later), and a call moves only the image and the
result. Called with a `pyopencl.array.Array` it moves nothing: the kernel reads the
array in place and writes a device array (`out=` to reuse one), without waiting unless
asked, so calls chain on the queue.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

import autotune.runtime as runtime
from autotune.call_arguments import (
    as_pixels,
    as_result,
    check_image_shape,
    layout,
    pixels_of,
    prepared_filter,
)
from autotune.lookup import Choice
from autotune.plans import prepared


class Convolver:
    """Correlate images of one shape with one filter (convolve with `flip=True`), as
    `autotune.convolve` would; `image_shape` is the shape callers pass, (H, W) or
    (H, W, C), with `batch=True` (N, H, W) or (N, H, W, C), and `dtype` their pixel
    type. `.queue` and `.context` are the device's: make device arrays with them
    (`pyopencl.array.to_device(convolver.queue, image)`).
    `.plan` is the kernel chosen."""

    def __init__(
        self,
        image_shape: tuple[int, ...],
        filter: Any,  # noqa: A002 - the name users expect
        *,
        device: int | None = None,
        mode: str = "valid",
        border: Any = "constant",
        border_value: float = 0.0,
        dtype: Any = np.float32,
        out_dtype: Any = np.float32,
        db: str | None = None,
        flip: bool = False,
        specialise: bool = False,
        algorithm: str = "auto",
        batch: bool = False,
        anchor: tuple[int, int] | None = None,
    ) -> None:
        import pyopencl as cl

        if not isinstance(image_shape, tuple) or not all(type(n) is int and n > 0 for n in image_shape):
            raise ValueError(f"image_shape must be a tuple of positive ints, got {image_shape!r}")
        try:
            frames, size, channels = layout(image_shape, batch)
        except ValueError as error:
            raise ValueError(f"image_shape {image_shape!r}: {error}") from None
        filt = prepared_filter(filter, mode, flip)
        self.filter_shape = filt.shape
        self.filter_width = filt.shape[1]
        self.image_shape = tuple(image_shape)
        self.mode = mode
        self._batch = batch
        self._pixels = pixels_of(
            dtype, out_dtype, mode, border, flip=flip, channels=channels, frames=frames, anchor=anchor
        )
        self.dtype = np.dtype(self._pixels.dtype)  # what the kernel reads (others convert on the host)
        if self._pixels.border == "none":
            check_image_shape(size, filt.shape)
        if runtime.past_indexing(size, filt.shape, channels):
            raise ValueError(
                f"an image of {math.prod(size) * channels} values is more than one kernel can index; "
                "autotune.convolve() runs it in bands"
            )
        device_index = runtime._check_options(device, db)
        kept = prepared(device_index, db, size, filt, algorithm, specialise, self._pixels)
        self.context, self.queue = kept.context, kept.queue
        self.plan: Choice = kept.choice
        self._family, self._variant, self._kernel = kept.family, kept.variant, kept.kernel
        self._taps: dict[str, Any] = dict(kept.taps)  # shared with the plan: read only
        mf = cl.mem_flags
        if getattr(self.plan.problem, "same", False):
            self._taps["border_value"] = border_value
        problem = self.plan.problem
        # The image's own layout: a batch axis with batch=True, a channel axis if it has one.
        self.output_shape = (
            *((frames,) if batch else ()),
            problem.out_height,
            problem.out_width,
            *((channels,) if len(image_shape) == 3 + int(batch) else ()),
        )
        self.output_dtype = self.plan.problem.output_dtype  # what the kernel writes
        input_bytes = math.prod(self.image_shape) * self.dtype.itemsize  # both forms read the image as it is
        self._input = cl.Buffer(self.context, mf.READ_ONLY, size=input_bytes)
        output_bytes = math.prod(self.output_shape) * self.output_dtype.itemsize
        self._output = cl.Buffer(self.context, mf.WRITE_ONLY, size=output_bytes)
        self._global_size = self._family.global_size(self._variant, self.plan.problem)
        self._staging: tuple[Any, ...] | None = None  # pinned host buffers, made on the first NumPy call
        self._host_calls = threading.Lock()  # NumPy calls share the staging and device buffers

    def _pinned(self) -> tuple[np.ndarray, np.ndarray]:
        """Page-locked host arrays for the image and the result, mapped once and kept:
        transfers from and to them run at full bus speed, where pageable NumPy memory
        is staged by the driver first."""
        import pyopencl as cl

        if self._staging is None:
            mf = cl.mem_flags
            into = cl.Buffer(self.context, mf.READ_WRITE | mf.ALLOC_HOST_PTR, size=self._input.size)
            back = cl.Buffer(self.context, mf.READ_WRITE | mf.ALLOC_HOST_PTR, size=self._output.size)
            flags = cl.map_flags.READ | cl.map_flags.WRITE
            image, _ = cl.enqueue_map_buffer(self.queue, into, flags, 0, self.image_shape, self.dtype)
            result, _ = cl.enqueue_map_buffer(
                self.queue, back, flags, 0, self.output_shape, self.output_dtype
            )
            self._staging = (into, back, image, result)
        return self._staging[2], self._staging[3]

    def _launch(self, input_buffer: Any, output_buffer: Any, wait_for: Any = None) -> Any:
        import pyopencl as cl

        buffers = {**self._taps, "input": input_buffer, "output": output_buffer}
        with runtime._lock:
            self._kernel.set_args(*self._family.arguments(self._variant, self.plan.problem, buffers))
            return cl.enqueue_nd_range_kernel(
                self.queue, self._kernel, self._global_size, self._variant.local_size, wait_for=wait_for
            )

    def __call__(self, image: Any, *, out: Any = None, wait: bool = True) -> Any:
        """NumPy in, NumPy out (the image's shape must be `image_shape`); or a pyopencl
        Array in (of `dtype`), a pyopencl Array out (`out=` an array of `output_shape`
        and `output_dtype` in this context), queued after the arrays' pending events and
        waited for only if `wait`."""
        import pyopencl as cl
        import pyopencl.array as cl_array

        if isinstance(image, cl_array.Array):
            return self._on_device(image, out, wait)
        host = as_pixels(image, self._batch)
        if host.shape != self.image_shape:
            raise ValueError(f"this Convolver takes images of shape {self.image_shape}, got {host.shape}")
        result_dtype = self._pixels.result
        if out is None:
            out = np.empty(self.output_shape, dtype=result_dtype)
        elif not (
            isinstance(out, np.ndarray) and out.shape == self.output_shape and out.dtype == result_dtype
        ):
            raise ValueError(f"out must be a {result_dtype} NumPy array of shape {self.output_shape}")
        with self._host_calls:
            staged_image, staged_result = self._pinned()
            np.copyto(staged_image, host, casting="unsafe")
            cl.enqueue_copy(self.queue, self._input, staged_image, is_blocking=False)
            self._launch(self._input, self._output)
            cl.enqueue_copy(self.queue, staged_result, self._output, is_blocking=True)
            np.copyto(out, as_result(staged_result, result_dtype))
        return out

    def _on_device(self, image: Any, out: Any, wait: bool) -> Any:
        import pyopencl.array as cl_array

        _check_device_array("image", image, self.image_shape, self.context, self.dtype)
        if out is None:
            out = cl_array.empty(self.queue, self.output_shape, self.output_dtype)
        elif not isinstance(out, cl_array.Array):
            raise TypeError("out must be a pyopencl Array when the image is one")
        else:
            _check_device_array("out", out, self.output_shape, self.context, self.output_dtype)
        event = self._launch(image.base_data, out.base_data, wait_for=[*image.events, *out.events] or None)
        out.add_event(event)
        if wait:
            event.wait()
        return out

    def __repr__(self) -> str:
        fields = self.plan.problem.key() | {"algorithm": self.plan.algorithm}
        return f"Convolver({fields}, level={self.plan.level!r})"


def _check_device_array(name: str, array: Any, shape: tuple[int, ...], context: Any, dtype: np.dtype) -> None:
    if array.dtype != dtype:
        raise TypeError(f"{name} must be a {dtype} array, got {array.dtype}")
    if tuple(array.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(array.shape)}")
    if not array.flags.c_contiguous or array.offset != 0:
        raise ValueError(f"{name} must be a C-contiguous array starting at its buffer's start")
    if array.context != context:
        raise ValueError(f"{name} belongs to another OpenCL context than this Convolver's device")
