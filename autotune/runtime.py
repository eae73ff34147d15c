"""`autotune.convolve()`: run the best known kernel on a NumPy image.

The kernel comes from the database through the lookup ladder (autotune/lookup.py);
contexts, compiled programs and plans (autotune/plans.py) are cached per process, so
repeated calls pay only for the transfer and the kernel, and one cheap check that the
database has not changed.

A filter that is a sum of a few outer products (rank r: Gaussian, box and Sobel are
rank 1) can also run as r row/column terms (the separable family). With
`algorithm="auto"` the form measured faster on this device for this width and rank
runs; a form never measured here is not guessed at, and `plan(...).reason` says why.

A tuned kernel with the filter compiled in (`filter_space=literal`) is a new program
for each filter. Here that does not pay: every call moves the image to the device and
back, which takes far longer than the kernel (78-98 ms a call at 4096x4096 on the
H200, against 0.06-0.2 ms of kernel), while a compile takes 0.85-2.1 s
(bench/convolve_calls.py). So by default the fastest kernel measured for the same
device and problem that reads its filter argument runs instead (one program per width
serves every filter); `specialise=True` compiles the tuned kernel for the filter given.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import warnings
from collections import OrderedDict
from typing import Any

import numpy as np

from autotune.call_arguments import (
    Pixels,
    as_filter_shape,
    as_pixels,
    as_result,
    as_shape,
    check_border_value,
    check_flag,
    check_image_shape,
    check_not_empty,
    check_real,
    layout,
    pixels_of,
    prepared_filter,
    shape_text,
    wants_double,
)
from autotune.devices import DeviceInfo, open_device
from autotune.families import KernelFamily, KernelVariant
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.image import pad_for_border
from autotune.families.separable import SEPARABLE, SeparableProblem
from autotune.families.separable.problem import MAX_RANK
from autotune.families.separable.terms import separable_terms
from autotune.host_memory import aligned_empty, fetch, staged_download, staged_upload, usable_in_place, wrap
from autotune.lookup import Choice, any_data_config, resolve
from autotune.space import Config

ALGORITHMS = ("auto", "direct", "separable")

_lock = threading.RLock()  # contexts, the program cache, and setting a shared kernel's arguments
_contexts: dict[int, tuple[DeviceInfo, Any, Any]] = {}
_programs: OrderedDict[tuple[int, str], Any] = OrderedDict()
KERNEL_CACHE_SIZE = 64  # compiled programs kept per process, least recently used dropped first


def _context(device_index: int) -> tuple[DeviceInfo, Any, Any]:
    import pyopencl as cl

    with _lock:  # one context per device: kernels are cached by device
        if device_index not in _contexts:
            info, device = open_device(device_index)
            context = cl.Context([device])
            _contexts[device_index] = (info, context, cl.CommandQueue(context))
        return _contexts[device_index]


def _program(device_index: int, context: Any, source: str, options: tuple[str, ...]) -> Any:
    import pyopencl as cl

    key = (device_index, source)
    if key in _programs and _programs[key].context == context:
        _programs.move_to_end(key)
    else:  # not built yet, or built in a context since let go of (`clear_plans`)
        with warnings.catch_warnings():  # the compiler's notes on a kernel that built are not the caller's
            warnings.simplefilter("ignore", cl.CompilerWarning)
            _programs[key] = cl.Program(context, source).build(options=list(options))
        while len(_programs) > KERNEL_CACHE_SIZE:
            _programs.popitem(last=False)
    return _programs[key]


def _serving(
    choice: Choice, family: KernelFamily, info: DeviceInfo, db: str | None
) -> tuple[Config, float | None]:
    """What runs in place of a choice compiled for one input, and its measured time
    (None where it was never measured)."""
    if family.serves_any_data(choice.config):
        return choice.config, choice.time_ms
    from autotune.store import readers  # SQLAlchemy loads on the first lookup, not on import

    trials = []
    if choice.device_id is not None and choice.problem_id is not None:
        trials = readers.trials(readers.resolved(db), choice.device_id, choice.problem_id)
    config, trial = any_data_config(choice, family, info, trials)
    return config, trial.time_ms if trial is not None else None


def _variant(
    choice: Choice, family: KernelFamily, values: Any, info: DeviceInfo, db: str | None, specialise: bool
) -> KernelVariant:
    if family.serves_any_data(choice.config):
        return family.render(choice.config, choice.problem)
    if specialise:
        return family.render(choice.config, choice.problem, values=values)
    return family.render(_serving(choice, family, info, db)[0], choice.problem)


def _time_here(
    choice: Choice, family: KernelFamily, info: DeviceInfo, db: str | None, specialise: bool
) -> float | None:
    """The measured time of what would run for this choice on this device, scaled to the
    asked size; None where it was not measured on this device."""
    if choice.level not in ("exact", "nearest_image_size") or choice.tuned_size is None:
        return None
    time_ms = choice.time_ms if specialise else _serving(choice, family, info, db)[1]
    if time_ms is None:
        return None
    return time_ms * math.prod(choice.problem.size) / math.prod(choice.tuned_size)


def _tuned_rows(db: str | None) -> list[Any]:
    """Best rows from the database; none when there is no database yet (never create one)."""
    from autotune.store import readers

    return readers.best_rows(readers.resolved(db))


def _check_options(device: Any, db: Any) -> int:
    """The device index; a TypeError for arguments of the wrong type."""
    if db is not None and not isinstance(db, str):
        raise TypeError(f"db must be a database URL string, got {db!r}")
    if device is None:
        return 0
    if type(device) is not int:
        raise TypeError(f"device must be an int (see `autotune devices`), got {device!r}")
    return device


def _reads_double(dtype: Any, device: Any, db: Any) -> bool:
    """Whether the device reads pixels of `dtype` as they are though they need double
    precision (float64); the device is opened only for such pixels."""
    return wants_double(dtype) and _context(_check_options(device, db))[0].double_precision


def plan(
    image_shape: tuple[int, ...],
    filter_size: int | tuple[int, int],
    *,
    device: int = 0,
    db: str | None = None,
    filter: Any = None,  # noqa: A002 - the name users expect
    algorithm: str = "auto",
    specialise: bool = False,
    mode: str = "valid",
    border: Any = "constant",
    dtype: Any = np.float32,
    out_dtype: Any = np.float32,
    batch: bool = False,
    anchor: tuple[int, int] | None = None,
    flip: bool = False,
) -> Choice:
    """The kernel `convolve` would use for an image of this shape ((H, W) or (H, W, C);
    with `batch`, (N, H, W) or (N, H, W, C)) and dtype, and a filter of `filter_size`:
    F (F x F) or (rows, F); `anchor` and `flip` as `convolve` takes them (a flipped
    filter of even size is anchored one tap earlier, so it is another kernel).

    Without `filter` only the direct form is considered (its rank is unknown). `.algorithm`
    says which form answered, `.reason` why, `.compared` the times weighed. What `convolve`
    would refuse is refused here too, with its error, before the device is opened."""
    shape = as_shape("image_shape", image_shape)
    frames, image_size, channels = layout(shape, batch)
    filter_shape = as_filter_shape(filter_size)
    pixels = pixels_of(
        dtype, out_dtype, mode, border, flip=flip, channels=channels, frames=frames, anchor=anchor
    )
    padding = pixels.padding(filter_shape)  # refuses an anchor outside the filter
    if pixels.border == "none":
        check_image_shape(image_size, filter_shape)
    specialise = check_flag("specialise", specialise)
    device = _check_options(device, db)
    info, _, _ = _context(device)
    taps = None if filter is None else prepared_filter(filter, "valid", flip)
    if taps is not None and taps.shape != filter_shape:
        raise ValueError(f"the filter is {shape_text(taps.shape)}, not {shape_text(filter_shape)}")
    pixels = pixels_of(
        dtype,
        out_dtype,
        mode,
        border,
        flip=flip,
        channels=channels,
        frames=frames,
        anchor=anchor,
        double_precision=info.double_precision,
    )
    check_frames_indexable(image_size, filter_shape, channels, frames)
    if padded_on_host(pixels, image_size, filter_shape, channels, frames):
        image_size = tuple(n + sum(pad) for n, pad in zip(image_size, padding, strict=True))
        pixels = dataclasses.replace(pixels, border="none")
    return _plan(image_size, filter_shape, info, db, taps, algorithm, specialise, pixels)[0]


def _plan(
    image_shape: tuple[int, int],
    filter_shape: tuple[int, int],
    info: DeviceInfo,
    db: str | None,
    filt: np.ndarray | None,
    algorithm: str,
    specialise: bool,
    pixels: Pixels | None = None,
) -> tuple[Choice, Any]:
    """The choice and the values its kernel takes for the filter: the filter itself, or
    its separable terms (row_taps, column_taps). Both forms read and write the pixel
    types and border themselves."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    pixels = pixels or Pixels()
    out_h, out_w = image_shape[0], image_shape[1]
    filter_rows, filter_width = filter_shape
    if pixels.border == "none":
        out_w, out_h = out_w - filter_width + 1, out_h - filter_rows + 1
    rows = _tuned_rows(db)
    direct_problem = Conv2DProblem(filter_width, out_w, out_h, **pixels.kind(filter_shape))
    direct = resolve(rows, CONV2D, direct_problem, info)
    if pixels.frames > 1:
        # A batch tuned as one (any frame size) answers; else the kernel chosen for one frame.
        batch_problem = dataclasses.replace(direct_problem, frames=pixels.frames)
        batch = resolve(rows, CONV2D, batch_problem, info)
        tuned = batch.level in ("exact", "nearest_image_size")
        direct = batch if tuned else dataclasses.replace(direct, problem=batch_problem)
    if algorithm == "direct":
        return dataclasses.replace(direct, reason="the direct form was asked for"), filt
    if filt is None:
        if algorithm == "separable":
            raise ValueError("algorithm='separable' needs the filter: its rank decides the kernel")
        return dataclasses.replace(
            direct, reason="no filter given, so no rank to run a separable form by"
        ), filt
    terms = separable_terms(filt, MAX_RANK)
    if terms is None:
        if algorithm == "separable":
            raise ValueError(
                f"the filter is not separable: no sum of up to {MAX_RANK} row/column terms "
                "equals it within float32 rounding"
            )
        reason = f"the filter's rank is above {MAX_RANK}: only the direct form runs it"
        return dataclasses.replace(direct, reason=reason), filt
    rank = terms[0].shape[0]
    if pixels.channels > 1 or pixels.frames > 1 or filter_rows != filter_width:
        many = f"{pixels.channels} channels" if pixels.channels > 1 else f"a batch of {pixels.frames}"
        if filter_rows != filter_width:
            many = f"a {shape_text(filter_shape)} filter"
        if algorithm == "separable":
            raise ValueError(
                f"the separable form filters one channel of one image with a square filter, not {many}: "
                "use algorithm='direct' or 'auto'"
            )
        reason = f"{many}: the separable form filters one channel of one image with a square filter"
        return dataclasses.replace(direct, reason=reason), filt
    (anchor_row, _), (anchor_column, _) = pixels.padding(filter_shape)
    if pixels.border == "none":
        anchor_row = anchor_column = -1  # 'valid' output has no anchor
    if anchor_row != anchor_column:
        if algorithm == "separable":
            raise ValueError(
                "the separable form anchors its filter at one tap in x and y: use algorithm='direct'"
            )
        reason = f"rank {rank}, but the anchor differs in x and y, which the separable form does not take"
        return dataclasses.replace(direct, reason=reason), filt
    if algorithm == "auto" and 2 * rank >= filter_width:
        # r terms cost about 4rF operations per output against the direct form's 2F².
        reason = f"rank {rank} at F={filter_width}: that many separable terms cost more than the direct form"
        return dataclasses.replace(direct, reason=reason), filt
    separable_problem = SeparableProblem(
        filter_width,
        rank,
        out_w,
        out_h,
        pixels.dtype,
        out_dtype=pixels.out_dtype,
        border=pixels.border,
        anchor=anchor_column,
    )
    separable = resolve(rows, SEPARABLE, separable_problem, info)
    if algorithm == "separable":
        return dataclasses.replace(separable, reason=f"the separable form (rank {rank}) was asked for"), terms
    times = {
        "direct": _time_here(direct, CONV2D, info, db, specialise),
        "separable": _time_here(separable, SEPARABLE, info, db, specialise),
    }
    if times["separable"] is None:
        reason = (
            f"rank {rank}, but the separable form was never measured here at F={filter_width}, rank {rank}"
        )
        return dataclasses.replace(direct, reason=reason, compared=times), filt
    if times["direct"] is not None and times["direct"] <= times["separable"]:
        reason = f"rank {rank}: direct {times['direct']:.4g} ms <= separable {times['separable']:.4g} ms here"
        return dataclasses.replace(direct, reason=reason, compared=times), filt
    if times["direct"] is None:
        reason = (
            f"rank {rank}: the separable form was measured here ({times['separable']:.4g} ms), the direct not"
        )
    else:
        reason = f"rank {rank}: separable {times['separable']:.4g} ms < direct {times['direct']:.4g} ms here"
    return dataclasses.replace(separable, reason=reason, compared=times), terms


def convolve(
    image: Any,
    filter: Any,  # noqa: A002 - the name users expect
    *,
    device: int | None = None,
    mode: str = "valid",
    border: Any = "constant",
    border_value: float = 0.0,
    out_dtype: Any = np.float32,
    db: str | None = None,
    flip: bool = False,
    specialise: bool = False,
    algorithm: str = "auto",
    batch: bool = False,
    anchor: tuple[int, int] | None = None,
) -> np.ndarray:
    """2-D correlation of `image` with `filter` (convolution with `flip=True`): F x F, or
    rows x F (rows and F from 1 to 255; the separable form takes square ones).
    `image`: (H, W), or (H, W, C) with C = 1-4 interleaved channels, each filtered
    alike; with `batch=True` a batch of frames, (N, H, W) or (N, H, W, C), filtered in
    one launch.

    mode="valid": output (H-rows+1) x (W-F+1). mode="same": output H x W, past the edge
    the image reads as `border` says, with OpenCV's and SciPy's names: "constant"
    (`border_value`, 0 by default), "replicate" / "nearest", "reflect" (cv2
    BORDER_REFLECT), "mirror" / "reflect_101" (cv2's default), "wrap" (or a
    cv2.BORDER_* value); the filter's anchor is cv2.filter2D's default and
    scipy.ndimage.correlate's (with flip=True, scipy.ndimage.convolve's), for odd and
    even sizes; `anchor=(x, y)` puts the filter's column x, row y over each output
    instead, as cv2.filter2D's anchor (-1: the default; SciPy's origin o is tap
    size // 2 + o, for correlate and convolve alike: with flip=True the anchor names a
    tap of the filter as given, and flips with it). The direct kernel handles the border
    itself (no padded copy of the image).

    Pixel types: uint8, uint16, int16, float16 and float32 images are read as they are
    by the kernel, and float64 on a device with double precision; others are converted
    to float32 on the host (a finite float64 value past float32's range is refused).
    Arithmetic is float32 (float64 output is within float32's tolerance of the exact
    result); NaN in, NaN out: each output sums every tap's product, so a NaN or
    infinite pixel under a zero tap gives NaN (scipy.ndimage leaves zero taps out).
    `out_dtype`: float32 (default), or "same" (-1, or the image's dtype) for output of
    the image's type, rounded to nearest even and saturated (cv2's ddepth=-1).

    Where the tuned kernel has the filter compiled in, `specialise=True` compiles it
    for this filter (one compile per filter); by default the fastest measured kernel
    that reads the filter argument runs. `algorithm`: "auto" runs a filter of low rank
    as separable terms where that form was measured faster here; "direct" or
    "separable" decide (see `plan`).
    """
    array = np.asarray(image)
    check_real("image", array.dtype)
    frames, size, channels = layout(array.shape, batch)
    check_not_empty("image", array.shape)
    double_precision = _reads_double(array.dtype, device, db)
    filt = prepared_filter(filter, mode, flip)
    filter_rows = filt.shape[0]
    pixels = pixels_of(
        array.dtype,
        out_dtype,
        mode,
        border,
        flip=flip,
        channels=channels,
        frames=frames,
        anchor=anchor,
        double_precision=double_precision,
    )
    check_border_value(border_value)
    padding = pixels.padding(filt.shape)
    if pixels.border == "none":
        check_image_shape(size, filt.shape)
    check_frames_indexable(size, filt.shape, channels, frames)
    host_padded = padded_on_host(pixels, size, filt.shape, channels, frames)
    kernel_pixels = pixels
    if host_padded:  # the padded image is what the 'valid' kernel reads
        (rows_before, rows_after), (columns_before, columns_after) = padding
        size = (size[0] + rows_before + rows_after, size[1] + columns_before + columns_after)
        kernel_pixels = dataclasses.replace(pixels, border="none")
    device_index = _check_options(device, db)

    import pyopencl as cl

    from autotune.plans import lent_buffers, prepared  # plans builds on this module

    kept = prepared(device_index, db, size, filt, algorithm, specialise, kernel_pixels)
    # The pixels' values last, as a Convolver's call checks them after it was built: the
    # arguments (and the algorithm's needs) are refused first, with plan()'s and Convolver's message.
    pixels_in = as_pixels(array, batch, double_precision)
    if batch and frames == 1:
        pixels_in = pixels_in[0]  # one image; its batch axis comes back on the result
    if host_padded:
        pixels_in = pad_for_border(pixels_in, *zip(*padding, strict=True), pixels.border, border_value)
    context, queue, problem = kept.context, kept.queue, kept.choice.problem
    arguments: dict[str, Any] = dict(kept.taps)
    if getattr(problem, "same", False):
        arguments["border_value"] = border_value
    alignment = kept.host_alignment  # a CPU device: arrays it can use in place are not copied
    if alignment is None:
        output = np.empty(problem.output_shape, dtype=problem.output_dtype)
    else:
        output = aligned_empty(problem.output_shape, problem.output_dtype, alignment)
    if frames > 1 or getattr(problem, "same", False):
        launches = [(problem, pixels_in, output)]
    else:
        # Kernels index with 32-bit ints: an image of 2^31 values or more runs in bands
        # of rows, each overlapping the next by F - 1 input rows.
        launches = [
            (
                dataclasses.replace(problem, out_height=rows),
                pixels_in[first : first + rows + filter_rows - 1],
                output[first : first + rows],
            )
            for first, rows in _bands((pixels_in.shape[0], pixels_in.shape[1] * channels), filt.shape)
        ]
    for band, band_input, band_output in launches:
        # A CPU device reads and writes aligned arrays where they are; everything else goes
        # through device buffers kept across calls (a GPU's arrays, always).
        source_in_place = usable_in_place(band_input, alignment, band_input.dtype)
        target_in_place = usable_in_place(band_output, alignment, band_output.dtype, writes=True)
        sizes = (0 if source_in_place else band_input.nbytes, 0 if target_in_place else band_output.nbytes)
        # A GPU's transfers go through page-locked staging, copied on the host by threads.
        staging_queue = queue if alignment is None else None
        with lent_buffers(context, *sizes, staging_queue) as (kept_input, kept_output):
            if source_in_place:
                source = wrap(context, band_input, writes=False)
            else:
                assert kept_input is not None
                source = kept_input.buffer
                if kept_input.staging is not None:
                    staged_upload(queue, source, band_input, kept_input.staging)
                else:
                    cl.enqueue_copy(queue, source, band_input, is_blocking=False)
            target = wrap(context, band_output, writes=True) if target_in_place else kept_output.buffer
            _launch(kept, band, {**arguments, "input": source, "output": target})
            if target_in_place:
                fetch(queue, target, band_output)
            elif kept_output.staging is not None:
                staged_download(queue, band_output, target, kept_output.staging)
            else:
                cl.enqueue_copy(queue, band_output, target, is_blocking=True)
    if pixels_in.ndim == 3 + int(frames > 1) and channels == 1:  # (..., H, W, 1) in: (..., H', W', 1) out
        output = output[..., None]
    if batch and frames == 1:
        output = output[None]
    return as_result(output, pixels.result)


def _launch(plan: Any, problem: Any, buffers: dict[str, Any]) -> None:
    """Set a plan's kernels' arguments and queue them (one launcher serves every thread)."""
    with _lock:
        plan.launcher.enqueue(plan.queue, problem, buffers)
        plan.launcher.drop_scratch()  # a kept plan holds no scratch memory between calls


MAX_INDEXED = 2**31 - 1  # the most values a kernel's int indices reach


def padded_on_host(
    pixels: Pixels, size: tuple[int, int], filter_shape: tuple[int, ...], channels: int, frames: int
) -> bool:
    """Whether a 'same' call is too large for one launch's int indices, so that `convolve`
    pads the image on the host and runs 'valid' in bands (and `plan` answers for that)."""
    return pixels.border != "none" and frames == 1 and past_indexing(size, filter_shape, channels)


def check_frames_indexable(
    size: tuple[int, int], filter_shape: tuple[int, ...], channels: int, frames: int
) -> None:
    """A batch runs in one launch, so each frame must be within int indexing (a single
    image past it runs in bands instead)."""
    if frames > 1 and past_indexing(size, filter_shape, channels):
        raise ValueError(
            f"a frame of {math.prod(size) * channels} values is more than one kernel can index: "
            "convolve the frames one by one"
        )


def past_indexing(size: tuple[int, int], filter_shape: tuple[int, ...], channels: int) -> bool:
    """Whether an image (or frame) of `size` with its border could hold more values than a
    kernel's int indices reach."""
    return (math.prod(size) + 2 * max(filter_shape) * sum(size)) * channels > MAX_INDEXED


def _bands(image_shape: tuple[int, int], filter_shape: tuple[int, ...]) -> list[tuple[int, int]]:
    """(first output row, output rows) of each launch: one for an image whose values
    int indices reach, else bands whose input rows (with the filter's rows less one of
    overlap) do."""
    in_height, in_width = image_shape
    filter_rows = filter_shape[0]
    out_height = in_height - filter_rows + 1
    rows = min(out_height, MAX_INDEXED // in_width - (filter_rows - 1))
    if rows < 1:
        raise ValueError(
            f"an image row of {in_width} values with a {shape_text(filter_shape)} filter "
            "is more than one kernel can index"
        )
    return [(first, min(rows, out_height - first)) for first in range(0, out_height, rows)]
