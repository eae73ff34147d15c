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
    as_shape,
    check_border_value,
    check_flag,
    check_float32_range,
    check_image_shape,
    layout,
    pixels_of,
    prepared_filter,
    wants_double,
)
from autotune.chunks import ChunkedCalls, plan_chunks
from autotune.host_memory import aligned_empty, fetch, page_locked, parallel_copy, usable_in_place, wrap
from autotune.launcher import Launcher
from autotune.lookup import Choice
from autotune.plans import prepared


class Convolver:
    """Correlate images of one shape with one filter (convolve with `flip=True`), as
    `autotune.convolve` would; `image_shape` is the shape callers pass, (H, W) or
    (H, W, C), with `batch=True` (N, H, W) or (N, H, W, C), and `dtype` their pixel
    type. `.queue` and `.context` are the device's: make device arrays with them
    (`pyopencl.array.to_device(convolver.queue, image)`).
    `.plan` is the kernel chosen.

    On a device that shares host memory (a CPU: PoCL) a NumPy call copies nothing where
    it can: an image that is C-contiguous, of `dtype` and aligned to the device's base
    alignment (128 bytes on PoCL; `empty_image()` makes one) is read where it is, and
    the result is written into an aligned array made for the call (or into `out=`, if
    aligned and not overlapping the image). Other arrays are copied once into aligned
    staging arrays. `zero_copy=False` stages every call, as on a GPU; `.zero_copy` says
    which way calls run, `.host_copies` counts the arrays copied on the host so far. Large
    host copies are split over several threads (`autotune.host_memory.parallel_copy`).

    Between calls a Convolver holds the device buffers of its last device-array call (its
    kernel's arguments stay set, so a chained call on the same arrays sets none).

    `chunks=N` (N > 1) splits a staged NumPy call (a GPU's, or with `zero_copy=False`)
    into N bands of rows whose uploads, kernels and downloads overlap
    (autotune/chunks.py); results equal the unchunked call's exactly."""

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
        zero_copy: bool = True,
        chunks: int = 1,
    ) -> None:
        image_shape = as_shape("image_shape", image_shape)
        zero_copy = check_flag("zero_copy", zero_copy)
        try:
            frames, size, channels = layout(image_shape, batch)
        except ValueError as error:
            raise ValueError(f"image_shape {image_shape!r}: {error}") from None
        filt = prepared_filter(filter, mode, flip)
        check_border_value(border_value)
        self.filter_shape = filt.shape
        self.filter_width = filt.shape[1]
        self.image_shape = image_shape
        self.mode = mode
        self._batch = batch
        self._double_precision = runtime._reads_double(dtype, device, db)
        self._pixels = pixels_of(
            dtype,
            out_dtype,
            mode,
            border,
            flip=flip,
            channels=channels,
            frames=frames,
            anchor=anchor,
            double_precision=self._double_precision,
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
        self._family, self._variant = kept.family, kept.variant
        # Kernel objects of its own, so the arguments they last set stay set: a chained call
        # on the same arrays sets none (setting them took most of a call's host time).
        self._launcher = Launcher(self._family, self._variant, kept.launcher.program, keep_arguments=True)
        self._kernel_lock = threading.Lock()
        self._taps: dict[str, Any] = dict(kept.taps)  # shared with the plan: read only
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
        # A CPU device reads and writes NumPy arrays in place (autotune/host_memory.py).
        self._alignment = kept.host_alignment if zero_copy else None
        self.zero_copy = self._alignment is not None
        if type(chunks) is not int or chunks < 1:
            raise ValueError(f"chunks must be a positive int, got {chunks!r}")
        if chunks > 1 and batch:
            raise ValueError("chunks split one image's rows; a batch (batch=True) runs in one launch")
        padding = self._pixels.padding(self.filter_shape)[0] if self._pixels.border != "none" else None
        self._chunks = (
            plan_chunks(
                problem, padding, self.filter_shape[0], self.image_shape[0], chunks, self._pixels.border
            )
            if chunks > 1
            else None
        )
        self._chunk_calls: ChunkedCalls | None = None
        self._staging: tuple[Any, ...] | None = None  # host arrays and buffers, made on the first NumPy call
        self._host_calls = threading.Lock()  # NumPy calls share the staging buffers
        self.host_copies = 0  # whole arrays copied on the host by NumPy calls (staging, conversion)

    def empty_image(self) -> np.ndarray:
        """An uninitialised array of `image_shape` and `dtype` that calls read in place
        (aligned for this device): fill it, then call."""
        if self._alignment is None:
            return np.empty(self.image_shape, self.dtype)
        return aligned_empty(self.image_shape, self.dtype, self._alignment)

    def _staged(self) -> tuple[np.ndarray, np.ndarray, Any, Any]:
        """Host arrays for the image and the result, and the device buffers they move
        to and from, made once and kept. On a GPU the host arrays are page-locked
        (transfers from and to them run at full bus speed, where pageable NumPy memory is
        staged by the driver first); on a CPU device they are the buffers themselves,
        aligned, for images and results that cannot be used in place."""
        import pyopencl as cl

        if self._staging is None:
            mf = cl.mem_flags
            input_bytes = math.prod(self.image_shape) * self.dtype.itemsize  # both forms read it as it is
            output_bytes = math.prod(self.output_shape) * self.output_dtype.itemsize
            if self._alignment is not None:
                image = aligned_empty(self.image_shape, self.dtype, self._alignment)
                result = aligned_empty(self.output_shape, self.output_dtype, self._alignment)
                buffers = (wrap(self.context, image, writes=False), wrap(self.context, result, writes=True))
                self._staging = (image, result, *buffers)
                return self._staging  # type: ignore[return-value]
            into, image_bytes = page_locked(self.context, self.queue, input_bytes)
            back, result_bytes = page_locked(self.context, self.queue, output_bytes)
            image = image_bytes.view(self.dtype).reshape(self.image_shape)
            result = result_bytes.view(self.output_dtype).reshape(self.output_shape)
            device_image = device_result = None  # chunked calls have buffers of their own
            if self._chunks is None:
                device_image = cl.Buffer(self.context, mf.READ_ONLY, size=input_bytes)
                device_result = cl.Buffer(self.context, mf.WRITE_ONLY, size=output_bytes)
            self._staging = (image, result, device_image, device_result, into, back)
        return self._staging[:4]  # type: ignore[return-value]

    def _launch(
        self, input_buffer: Any, output_buffer: Any, wait_for: Any = None, problem: Any = None
    ) -> Any:
        """Queue the kernels on `problem` (default: the whole image; a chunk's band); the
        last one's event."""
        buffers = {**self._taps, "input": input_buffer, "output": output_buffer}
        with self._kernel_lock:
            events = self._launcher.enqueue(self.queue, problem or self.plan.problem, buffers, wait_for)
        return events[-1]

    def _chunked(self, host: np.ndarray, out: np.ndarray) -> None:
        """A staged call in chunks of rows (autotune/chunks.py)."""
        assert self._chunks is not None
        staged_image, staged_result, _, _ = self._staged()
        if self._chunk_calls is None:
            in_row = math.prod(self.image_shape[1:]) * self.dtype.itemsize
            out_row = math.prod(self.output_shape[1:]) * self.output_dtype.itemsize
            self._chunk_calls = ChunkedCalls(self.context, self._chunks, in_row, out_row)

        def launch(problem: Any, source: Any, target: Any, wait_for: list[Any]) -> Any:
            event = self._launch(source, target, wait_for, problem)
            self.queue.flush()
            return event

        def finish(first: int, rows: int) -> None:
            band = slice(first, first + rows)
            parallel_copy(out[band], as_result(staged_result[band], out.dtype))

        self._chunk_calls.run(host, staged_image, staged_result, launch, finish)
        self.host_copies += 2

    def __call__(self, image: Any, *, out: Any = None, wait: bool = True) -> Any:
        """NumPy in, NumPy out (the image's shape must be `image_shape`); or a pyopencl
        Array in (of `dtype`), a pyopencl Array out (`out=` an array of `output_shape`
        and `output_dtype` in this context), queued after the arrays' pending events and
        waited for only if `wait`."""
        import pyopencl as cl
        import pyopencl.array as cl_array

        if isinstance(image, cl_array.Array):
            return self._on_device(image, out, wait)
        host = np.asarray(image)
        if host.dtype != self.dtype or host.shape != self.image_shape:
            # checked, and converted where the kernel reads another type
            host = as_pixels(image, self._batch, self._double_precision)
            self.host_copies += host is not image
            if not np.can_cast(host.dtype, self.dtype, "safe"):  # 300.0 into uint8 would wrap
                raise TypeError(
                    f"this Convolver filters {self.dtype} images, got {host.dtype}: "
                    "make one for that type, or convert the image"
                )
        elif self._double_precision and wants_double(host.dtype):
            check_float32_range("image", host)  # read as double, summed in float32
        if host.shape != self.image_shape:
            raise ValueError(f"this Convolver takes images of shape {self.image_shape}, got {host.shape}")
        result_dtype = self._pixels.result
        if out is None:
            fresh = self._alignment is not None and result_dtype == self.output_dtype
            out = (
                aligned_empty(self.output_shape, result_dtype, self._alignment)  # type: ignore[arg-type]
                if fresh
                else np.empty(self.output_shape, dtype=result_dtype)
            )
        elif not (
            isinstance(out, np.ndarray) and out.shape == self.output_shape and out.dtype == result_dtype
        ):
            raise ValueError(f"out must be a {result_dtype} NumPy array of shape {self.output_shape}")
        with self._host_calls:
            if self._alignment is None and self._chunks is not None:
                self._chunked(host, out)
            elif self._alignment is None:
                staged_image, staged_result, device_image, device_result = self._staged()
                parallel_copy(staged_image, host)
                cl.enqueue_copy(self.queue, device_image, staged_image, is_blocking=False)
                self._launch(device_image, device_result)
                cl.enqueue_copy(self.queue, staged_result, device_result, is_blocking=True)
                parallel_copy(out, as_result(staged_result, result_dtype))
                self.host_copies += 2
            else:
                self._in_place(host, out)
        return out

    def _in_place(self, host: np.ndarray, out: np.ndarray) -> None:
        """A call on a device that shares host memory: the kernel reads the image and
        writes the result where they are when they are aligned and contiguous, else
        through the aligned staging arrays (one copy each way)."""
        if usable_in_place(host, self._alignment, self.dtype):
            source = wrap(self.context, host, writes=False)
        else:
            staged_image, _, source, _ = self._staged()
            parallel_copy(staged_image, host)
            self.host_copies += 1
        # An `out` that overlaps the image (in place) would be read while written: staged.
        direct = usable_in_place(out, self._alignment, self.output_dtype, writes=True)
        direct = direct and not np.may_share_memory(out, host)
        if direct:
            result, target = out, wrap(self.context, out, writes=True)
        else:
            _, result, _, target = self._staged()
        self._launch(source, target)
        fetch(self.queue, target, result)
        with self._kernel_lock:  # buffers over the caller's arrays: new each call, not kept
            self._launcher.forget_arguments()
        if not direct:
            parallel_copy(out, as_result(result, self._pixels.result))
            self.host_copies += 1

    def _on_device(self, image: Any, out: Any, wait: bool) -> Any:
        import pyopencl.array as cl_array

        _check_device_array("image", image, self.image_shape, self.context, self.dtype)
        if out is None:
            out = cl_array.empty(self.queue, self.output_shape, self.output_dtype)
        elif not isinstance(out, cl_array.Array):
            raise TypeError("out must be a pyopencl Array when the image is one")
        else:
            _check_device_array("out", out, self.output_shape, self.context, self.output_dtype)
            if out.base_data == image.base_data:  # read while written: outputs from changed pixels
                raise ValueError("out must not be the image's own buffer: give another array")
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
