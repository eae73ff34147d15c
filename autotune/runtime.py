"""`autotune.convolve()`: run the best known kernel on a NumPy image.

The kernel comes from the database through the lookup ladder (autotune/lookup.py);
contexts and compiled programs are cached per process, so repeated calls pay only for
the transfer and the kernel.

A tuned kernel with the filter compiled in (`filter_space=literal`) is a new program
for each filter. Here that does not pay: every call moves the image to the device and
back, which takes far longer than the kernel (78-98 ms a call at 4096x4096 on the
H200, against 0.06-0.2 ms of kernel), while a compile takes 0.85-2.1 s
(bench/convolve_calls.py). So by default the fastest kernel measured for the same
device and problem that reads its filter argument runs instead (one program per width
serves every filter); `specialise=True` compiles the tuned kernel for the filter given.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from autotune.devices import DeviceInfo, open_device
from autotune.families import KernelVariant
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.lookup import Choice, any_data_config, resolve
from autotune.space import Config

_lock = threading.Lock()
_contexts: dict[int, tuple[DeviceInfo, Any, Any]] = {}
_kernels: OrderedDict[tuple[int, str], Any] = OrderedDict()
KERNEL_CACHE_SIZE = 64  # compiled programs kept per process, least recently used dropped first
_serving_configs: dict[tuple[Any, ...], Config] = {}


def _context(device_index: int) -> tuple[DeviceInfo, Any, Any]:
    import pyopencl as cl

    if device_index not in _contexts:
        info, device = open_device(device_index)
        context = cl.Context([device])
        _contexts[device_index] = (info, context, cl.CommandQueue(context))
    return _contexts[device_index]


def _kernel(device_index: int, context: Any, source: str, name: str, options: tuple[str, ...]) -> Any:
    import pyopencl as cl

    key = (device_index, source)
    if key in _kernels:
        _kernels.move_to_end(key)
    else:
        program = cl.Program(context, source).build(options=list(options))
        _kernels[key] = cl.Kernel(program, name)
        while len(_kernels) > KERNEL_CACHE_SIZE:
            _kernels.popitem(last=False)
    return _kernels[key]


def _serving_config(choice: Choice, info: DeviceInfo, db: str | None) -> Config:
    """What runs in place of a choice compiled for one filter (memoised per process)."""
    key = (db, choice.device_id, choice.problem_id, json.dumps(choice.config, sort_keys=True))
    if key not in _serving_configs:
        trials = []
        if choice.device_id is not None and choice.problem_id is not None:
            store = _open_store(db)
            try:
                trials = store.trials(device_id=choice.device_id, problem_id=choice.problem_id)
            finally:
                store.close()
        _serving_configs[key] = any_data_config(choice, CONV2D, info, trials)[0]
    return _serving_configs[key]


def _variant(
    choice: Choice, filt: np.ndarray, info: DeviceInfo, db: str | None, specialise: bool
) -> KernelVariant:
    if CONV2D.serves_any_data(choice.config):
        return CONV2D.render(choice.config, choice.problem)
    if specialise:
        return CONV2D.render(choice.config, choice.problem, values=filt)
    return CONV2D.render(_serving_config(choice, info, db), choice.problem)


def _open_store(db: str | None) -> Any:
    from autotune.store import Store, default_url

    return Store(db or default_url(), read_only=True)


def _tuned_rows(db: str | None) -> list[Any]:
    """Best rows from the database; none when there is no database yet (never create one)."""
    from autotune.store import default_url, sqlite_file

    url = db or default_url()
    path = sqlite_file(url)
    if path is not None and not path.exists():
        return []
    if path is None and url.startswith("sqlite:"):  # an in-memory database starts empty
        return []
    store = _open_store(db)
    try:
        return store.best()
    finally:
        store.close()


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _as_image(name: str, array: Any) -> np.ndarray:
    array = np.asarray(array)
    if array.dtype.kind in "cOSUVMm" or array.dtype == np.bool_:
        raise TypeError(f"{name} must hold real numbers, got dtype {array.dtype}")
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty (shape {array.shape})")
    if array.dtype.kind == "f" and array.dtype.itemsize > 4:
        # float32 arithmetic: a finite value past its range would silently become inf
        # (NaN and infinities given are kept: NaN in, NaN out).
        finite = np.isfinite(array)
        largest = float(np.abs(array, where=finite, out=np.zeros(array.shape, array.dtype)).max())
        if largest > FLOAT32_MAX:
            raise ValueError(
                f"{name} holds {largest:.6g}, beyond float32's range (largest magnitude {FLOAT32_MAX:.6g}); "
                "convolve computes in float32: scale the data first"
            )
    return np.ascontiguousarray(array, dtype=np.float32)


def _check_options(device: Any, db: Any) -> int:
    """The device index; a TypeError for arguments of the wrong type."""
    if db is not None and not isinstance(db, str):
        raise TypeError(f"db must be a database URL string, got {db!r}")
    if device is None:
        return 0
    if type(device) is not int:
        raise TypeError(f"device must be an int (see `autotune devices`), got {device!r}")
    return device


def plan(
    image_shape: tuple[int, int], filter_width: int, *, device: int = 0, db: str | None = None
) -> Choice:
    """The kernel `convolve` would use for a 'valid' output of this image shape."""
    device = _check_options(device, db)
    info, _, _ = _context(device)
    problem = Conv2DProblem(
        filter_width, image_shape[1] - filter_width + 1, image_shape[0] - filter_width + 1
    )
    return resolve(_tuned_rows(db), CONV2D, problem, info)


def convolve(
    image: Any,
    filter: Any,  # noqa: A002 - the name users expect
    *,
    device: int | None = None,
    mode: str = "valid",
    db: str | None = None,
    flip: bool = False,
    specialise: bool = False,
) -> np.ndarray:
    """2-D correlation of `image` with a square `filter` (convolution with `flip=True`).

    mode="valid": output (H-F+1) x (W-F+1); mode="same": zero padding, output H x W,
    aligned as scipy.ndimage.correlate(mode="constant"), or with flip=True as
    scipy.ndimage.convolve(mode="constant"), for odd and even F. float32 arithmetic; NaN in,
    NaN out. Where the tuned kernel has the filter compiled in, `specialise=True`
    compiles it for this filter (one compile per filter); by default the fastest
    measured kernel that reads the filter argument runs.
    """
    image = _as_image("image", image)
    filt = _as_image("filter", filter)
    if filt.shape[0] != filt.shape[1]:
        raise ValueError(f"filter must be square, got shape {filt.shape}")
    if mode not in ("valid", "same"):
        raise ValueError(f"mode must be 'valid' or 'same', got {mode!r}")
    width = filt.shape[0]
    if flip:
        filt = np.ascontiguousarray(filt[::-1, ::-1])
    if mode == "same":
        # scipy.ndimage centres a filter of even width F on its tap F/2, and a flipped
        # one (ndimage.convolve) on tap F/2 of the unflipped filter: after the flip,
        # tap F/2 - 1. For odd widths both are the middle tap.
        before = (width - 1) // 2 if flip else width // 2
        after = width - 1 - before
        image = np.pad(image, ((before, after), (before, after)))
    if image.shape[0] < width or image.shape[1] < width:
        raise ValueError(f"image {image.shape} is smaller than the {width}x{width} filter ('valid' mode)")
    device_index = _check_options(device, db)

    import pyopencl as cl

    with _lock:
        info, context, queue = _context(device_index)
        choice = plan(image.shape, width, device=device_index, db=db)
        variant = _variant(choice, filt, info, db, specialise)
        kernel = _kernel(device_index, context, variant.source, variant.kernel_name, variant.build_options)
    out_h, out_w = image.shape[0] - width + 1, image.shape[1] - width + 1
    mf = cl.mem_flags
    input_buf = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=image)
    filter_buf = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=filt)
    output = np.empty((out_h, out_w), dtype=np.float32)
    output_buf = cl.Buffer(context, mf.WRITE_ONLY, size=output.nbytes)
    with _lock:
        buffers = {"input": input_buf, "filter": filter_buf, "output": output_buf}
        kernel.set_args(*CONV2D.arguments(variant, choice.problem, buffers))
        cl.enqueue_nd_range_kernel(
            queue, kernel, CONV2D.global_size(variant, choice.problem), variant.local_size
        )
    cl.enqueue_copy(queue, output, output_buf)
    queue.finish()
    return output
