"""`autotune.Convolver`: one convolution set up once and called many times.

`convolve()` looks the kernel up, compiles (or finds) it and allocates buffers on every
call. A Convolver does that once for an image shape and a filter: the kernel is chosen
from the database when it is built (a faster kernel tuned later is used by a Convolver
built later), its taps are uploaded once, and a call moves only the image and the
result. Called with a `pyopencl.array.Array` it moves nothing: the kernel reads the
array in place and writes a device array (`out=` to reuse one), without waiting unless
asked, so calls chain on the queue.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

import autotune.runtime as runtime
from autotune.families import get_family
from autotune.lookup import Choice


class Convolver:
    """Correlate images of one shape with one filter (convolve with `flip=True`), as
    `autotune.convolve` would; `image_shape` is the shape callers pass. `.queue` and
    `.context` are the device's: make device arrays with them
    (`pyopencl.array.to_device(convolver.queue, image)`). `.plan` is the kernel chosen."""

    def __init__(
        self,
        image_shape: tuple[int, int],
        filter: Any,  # noqa: A002 - the name users expect
        *,
        device: int | None = None,
        mode: str = "valid",
        db: str | None = None,
        flip: bool = False,
        specialise: bool = False,
        algorithm: str = "auto",
    ) -> None:
        import pyopencl as cl

        if len(image_shape) != 2 or not all(type(n) is int and n > 0 for n in image_shape):
            raise ValueError(f"image_shape must be two positive ints, got {image_shape!r}")
        filt = runtime.prepared_filter(filter, mode, flip)
        self.filter_width = width = filt.shape[0]
        self.image_shape = tuple(image_shape)
        self.mode = mode
        self._padding = runtime.same_padding(width, flip) if mode == "same" else None
        padded = (image_shape[0] + width - 1, image_shape[1] + width - 1) if mode == "same" else image_shape
        runtime.check_image_shape(padded, width)
        if padded[0] * padded[1] > runtime.MAX_INDEXED:
            raise ValueError(
                f"an image of {padded[0] * padded[1]} values is more than one kernel can index; "
                "autotune.convolve() runs it in bands"
            )
        device_index = runtime._check_options(device, db)
        with runtime._lock:
            info, self.context, self.queue = runtime._context(device_index)
            self.plan: Choice
            self.plan, values = runtime._plan(padded, width, info, db, filt, algorithm, specialise)
            self._family = get_family(self.plan.problem.family)
            self._variant = runtime._variant(self.plan, self._family, values, info, db, specialise)
            variant = self._variant
            self._kernel = runtime._kernel(
                device_index, self.context, variant.source, variant.kernel_name, variant.build_options
            )
        taps = self._family.value_arrays(values)
        mf = cl.mem_flags
        self._taps = {
            name: cl.Buffer(self.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(a))
            for name, a in taps.items()
        }
        self.output_shape = self.plan.problem.output_shape
        self._input = cl.Buffer(self.context, mf.READ_ONLY, size=4 * padded[0] * padded[1])
        self._output = cl.Buffer(self.context, mf.WRITE_ONLY, size=4 * int(np.prod(self.output_shape)))
        self._global_size = self._family.global_size(self._variant, self.plan.problem)
        self._padded_shape = padded
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
            image, _ = cl.enqueue_map_buffer(self.queue, into, flags, 0, self._padded_shape, np.float32)
            result, _ = cl.enqueue_map_buffer(self.queue, back, flags, 0, self.output_shape, np.float32)
            image[...] = 0.0  # the zero border of mode="same" stays as it is
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
        Array in, a pyopencl Array out (`out=` a float32 array of `output_shape` in this
        context), queued after the arrays' pending events and waited for only if `wait`."""
        import pyopencl as cl
        import pyopencl.array as cl_array

        if isinstance(image, cl_array.Array):
            return self._on_device(image, out, wait)
        host = runtime._as_image("image", image)
        if host.shape != self.image_shape:
            raise ValueError(f"this Convolver takes images of shape {self.image_shape}, got {host.shape}")
        if out is None:
            out = np.empty(self.output_shape, dtype=np.float32)
        elif not (isinstance(out, np.ndarray) and out.shape == self.output_shape and out.dtype == np.float32):
            raise ValueError(f"out must be a float32 NumPy array of shape {self.output_shape}")
        with self._host_calls:
            staged_image, staged_result = self._pinned()
            if self._padding is None:
                np.copyto(staged_image, host)
            else:
                (top, _), (left, _) = self._padding
                staged_image[top : top + host.shape[0], left : left + host.shape[1]] = host
            cl.enqueue_copy(self.queue, self._input, staged_image, is_blocking=False)
            self._launch(self._input, self._output)
            cl.enqueue_copy(self.queue, staged_result, self._output, is_blocking=True)
            np.copyto(out, staged_result)
        return out

    def _on_device(self, image: Any, out: Any, wait: bool) -> Any:
        import pyopencl.array as cl_array

        if self._padding is not None:
            raise ValueError('device arrays take mode="valid" (pad on the device, then call)')
        _check_device_array("image", image, self.image_shape, self.context)
        if out is None:
            out = cl_array.empty(self.queue, self.output_shape, np.float32)
        elif not isinstance(out, cl_array.Array):
            raise TypeError("out must be a pyopencl Array when the image is one")
        else:
            _check_device_array("out", out, self.output_shape, self.context)
        event = self._launch(image.base_data, out.base_data, wait_for=[*image.events, *out.events] or None)
        out.add_event(event)
        if wait:
            event.wait()
        return out

    def __repr__(self) -> str:
        fields = self.plan.problem.key() | {"algorithm": self.plan.algorithm}
        return f"Convolver({fields}, level={self.plan.level!r})"


def _check_device_array(name: str, array: Any, shape: tuple[int, ...], context: Any) -> None:
    if array.dtype != np.float32:
        raise TypeError(f"{name} must be a float32 array, got {array.dtype}")
    if tuple(array.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(array.shape)}")
    if not array.flags.c_contiguous or array.offset != 0:
        raise ValueError(f"{name} must be a C-contiguous array starting at its buffer's start")
    if array.context != context:
        raise ValueError(f"{name} belongs to another OpenCL context than this Convolver's device")
