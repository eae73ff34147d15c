"""What a call of `convolve()`, `plan()` or a `Convolver` takes, checked: images (one,
with channels, or a batch of frames), filters (F x F or rows x F), pixel types, borders
and anchors, and how results come back in the caller's type. Pure: no device, no
database."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from autotune.families.conv2d.problem import MAX_CHANNELS
from autotune.families.conv2d.render import MAX_FILTER_WIDTH
from autotune.families.image import PIXEL_TYPES, border_name

FLOAT32_MAX = float(np.finfo(np.float32).max)


def is_int(value: Any) -> bool:
    """Whether `value` is an integer (NumPy's too), not a bool: True is not a size."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def check_flag(name: str, value: Any) -> bool:
    """`value` as a bool; TypeError for anything but True or False (NumPy's too): a
    string such as "no" would read as true."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_border_value(border_value: Any) -> None:
    """A real number (not a bool, a string or a sequence that NumPy would take for one)."""
    real = isinstance(border_value, np.number) and not isinstance(border_value, np.complexfloating)
    if type(border_value) not in (int, float) and not real:
        raise TypeError(f"border_value must be a number, got {border_value!r}")


def check_real(name: str, dtype: np.dtype) -> None:
    """TypeError for pixels of `dtype` that are not real numbers (kernels sum them)."""
    if dtype.kind in "cOSUVMm" or dtype == np.bool_:
        raise TypeError(f"{name} must hold real numbers, got dtype {dtype}")


def as_shape(name: str, shape: Any) -> tuple[int, ...]:
    """An image's shape as a caller names it (`plan`, `Convolver`): a tuple or list of
    ints, each at least 1 (an image with a side of 0 is empty, as `convolve` says)."""
    if not isinstance(shape, tuple | list) or not all(is_int(n) for n in shape):
        raise TypeError(f"{name} must be a tuple of positive ints, got {shape!r}")
    sides = tuple(int(n) for n in shape)
    if any(n < 0 for n in sides):
        raise ValueError(f"{name} must be a tuple of positive ints, got {sides!r}")
    check_not_empty("image", sides)
    return sides


def check_not_empty(name: str, shape: tuple[int, ...]) -> None:
    """ValueError for an array of this shape that holds no values."""
    if 0 in shape:
        raise ValueError(f"{name} is empty (shape {shape})")


def as_filter_shape(filter_size: Any) -> tuple[int, int]:
    """(rows, F) of a filter named by its size, F (square) or (rows, F), checked as a
    filter given by its taps is."""
    sides = tuple(filter_size) if isinstance(filter_size, tuple | list) else (filter_size, filter_size)
    if not all(is_int(n) for n in sides):
        raise TypeError(f"filter_size must be F or (rows, F) of ints, got {filter_size!r}")
    if len(sides) != 2:
        raise ValueError(f"filter_size must be F or (rows, F), got {filter_size!r}")
    shape = (int(sides[0]), int(sides[1]))
    check_filter_shape(shape)
    return shape


def as_image(name: str, array: Any, batch: bool | None = None) -> np.ndarray:
    """A real array as float32, checked: 2-D (a filter), or with `batch` given an image
    or a batch of them (see `layout`)."""
    array = np.asarray(array)
    check_real(name, array.dtype)
    if batch is not None:
        layout(array.shape, batch)
    elif array.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {array.shape}")
    check_not_empty(name, array.shape)
    if array.dtype.kind == "f" and array.dtype.itemsize > 4:
        check_float32_range(name, array)
    return np.ascontiguousarray(array, dtype=np.float32)


def check_float32_range(name: str, array: np.ndarray) -> None:
    """ValueError for a finite value past float32's range: float32 arithmetic would
    silently make it inf (NaN and infinities given are kept: NaN in, NaN out)."""
    low, high = float(array.min()), float(array.max())  # no temporaries: the common case
    if low >= -FLOAT32_MAX and high <= FLOAT32_MAX:
        return
    finite = np.isfinite(array)
    largest = float(np.abs(array, where=finite, out=np.zeros(array.shape, array.dtype)).max())
    if largest > FLOAT32_MAX:
        raise ValueError(
            f"{name} holds {largest:.6g}, beyond float32's range (largest magnitude {FLOAT32_MAX:.6g}); "
            "convolve computes in float32: scale the data first"
        )


def layout(shape: tuple[int, ...], batch: bool = False) -> tuple[int, tuple[int, int], int]:
    """(frames, (H, W), channels) of an image, (H, W) or (H, W, C), or with `batch` of a
    batch of them, (N, H, W) or (N, H, W, C); ValueError for another shape."""
    batch = check_flag("batch", batch)
    shape = tuple(shape)
    if batch and len(shape) not in (3, 4):
        raise ValueError(f"a batch must be (N, H, W) or (N, H, W, C), got shape {shape}")
    frames, image = (shape[0], shape[1:]) if batch else (1, shape)
    if len(image) == 3 and 1 <= image[2] <= MAX_CHANNELS:
        return frames, (image[0], image[1]), image[2]
    if len(image) == 2:
        return frames, (image[0], image[1]), 1
    if len(shape) == 4 and not batch:
        raise ValueError(
            f"image must be (H, W) or (H, W, C), got shape {shape}: for a batch (N, H, W, C) pass batch=True"
        )
    raise ValueError(
        f"image must be (H, W) or (H, W, C) with C from 1 to {MAX_CHANNELS} channels"
        f"{' per frame' if batch else ''}, got shape {shape}"
        + ("" if batch or len(shape) != 3 else ": for a batch of frames (N, H, W) pass batch=True")
    )


@dataclasses.dataclass(frozen=True)
class Pixels:
    """What a call reads and writes: the pixel types kernels see, the border of 'same'
    output (`none`: 'valid'), and what the caller gets back."""

    dtype: str = "float32"  # read by the kernel (PIXEL_TYPES)
    out_dtype: str = "float32"  # written by the kernel (PIXEL_TYPES)
    border: str = "none"
    result: np.dtype = np.dtype(np.float32)  # returned (cast on the host where it is not out_dtype)

    flip: bool = False  # a flipped filter: 'same' output anchors it at (F - 1) // 2
    channels: int = 1  # interleaved, each filtered alike
    frames: int = 1  # a batch of images of one size, in one launch
    anchor: tuple[int, int] | None = None  # cv2's (x, y) tap over each output; None or -1: the default

    def padding(self, filter_shape: tuple[int, ...]) -> tuple[tuple[int, int], tuple[int, int]]:
        """Rows and columns of border before and after the image ('same' output)."""
        return same_padding(filter_shape, self.flip, self.anchor)

    def kind(self, filter_shape: tuple[int, int]) -> dict[str, Any]:
        """The direct family's problem fields for a filter of this shape, (rows, width)
        (one frame: a batch runs the kernel chosen for one)."""
        kind: dict[str, Any] = {"dtype": self.dtype, "out_dtype": self.out_dtype, "border": self.border}
        kind["channels"] = self.channels
        kind["filter_height"] = filter_shape[0]  # the problem names a square filter by its width alone
        if self.border != "none":
            (kind["anchor_y"], _), (kind["anchor"], _) = self.padding(filter_shape)
        return kind


def native_type(dtype: np.dtype, double_precision: bool = False) -> str:
    """The pixel type kernels read an image of `dtype` as: its own where they can, else
    float32 (converted on the host). float64 needs a device with double precision."""
    if dtype.name in PIXEL_TYPES and (dtype.name != "float64" or double_precision):
        return dtype.name
    return "float32"


def wants_double(dtype: Any) -> bool:
    """Whether kernels could read pixels of `dtype` as they are only with double precision
    (the device need not be opened otherwise)."""
    kind = np.dtype(dtype)
    return kind.kind == "f" and kind.itemsize == 8


def pixels_of(
    dtype: Any,
    out_dtype: Any,
    mode: str,
    border: Any,
    *,
    flip: bool = False,
    channels: int = 1,
    frames: int = 1,
    anchor: Any = None,
    double_precision: bool = False,
) -> Pixels:
    """How a call with an image of `dtype` runs on a device with `double_precision` or
    without; ValueError for arguments it cannot take.
    `out_dtype`: "float32" (the default), or "same" / -1 / the image's own dtype for
    output of the input type (rounded to nearest even and saturated for integer types,
    as OpenCV's ddepth=-1). `anchor`: cv2's (x, y), for mode="same"."""
    if mode not in ("valid", "same"):
        raise ValueError(f"mode must be 'valid' or 'same', got {mode!r}")
    flip = check_flag("flip", flip)
    if anchor is not None:
        if mode != "same":
            raise ValueError(
                "anchor places the filter over each output of mode='same'; 'valid' output has none"
            )
        if not (isinstance(anchor, tuple | list) and len(anchor) == 2 and all(is_int(a) for a in anchor)):
            raise TypeError(
                f"anchor must be (x, y): the filter's column and row over each output, got {anchor!r}"
            )
        anchor = (int(anchor[0]), int(anchor[1]))
    dtype = np.dtype(dtype)
    check_real("image", dtype)
    native = native_type(dtype, double_precision)
    if isinstance(out_dtype, str) and out_dtype == "same" or (type(out_dtype) is int and out_dtype == -1):
        result = dtype
    else:
        try:
            result = np.dtype(out_dtype)
        except TypeError:
            result = None
        if result is not None and result.newbyteorder("=") == dtype.newbyteorder("="):
            result = dtype  # the image's own type, in the image's byte order
        if result not in (np.dtype(np.float32), dtype):
            raise ValueError(
                f"out_dtype must be 'float32' or 'same' (the image's {dtype.name}), got {out_dtype!r}"
            )
    out = result.name if result.name in PIXEL_TYPES and native == dtype.name else "float32"
    border = "none" if mode == "valid" else border_name(border)
    return Pixels(native, out, border, result, flip=flip, channels=channels, frames=frames, anchor=anchor)


def shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(str(n) for n in shape)


def prepared_filter(filter: Any, mode: str, flip: bool) -> np.ndarray:  # noqa: A002
    """The taps a kernel correlates with (flipped for a true convolution), checked:
    rows x F, any rows and F from 1 to 255."""
    filt = as_image("filter", filter)
    check_filter_shape(filt.shape)
    if mode not in ("valid", "same"):
        raise ValueError(f"mode must be 'valid' or 'same', got {mode!r}")
    return np.ascontiguousarray(filt[::-1, ::-1]) if flip else filt


def check_filter_shape(shape: tuple[int, ...]) -> None:
    """ValueError for a filter of a side the kernels do not take."""
    if min(shape) < 1 or max(shape) > MAX_FILTER_WIDTH:
        raise ValueError(f"filter {shape_text(shape)}: each side must be from 1 to {MAX_FILTER_WIDTH} taps")


def same_padding(
    filter_shape: tuple[int, ...], flip: bool, anchor: tuple[int, int] | None = None
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Rows and columns before and after an image for mode="same": the tap of the
    correlated filter (flipped, with `flip`) over each output comes first.
    scipy.ndimage centres a filter of even size F on its tap F/2 (as cv2.filter2D's
    default anchor), and a flipped one (ndimage.convolve) on tap F/2 of the unflipped
    filter: after the flip, tap F/2 - 1. For odd sizes both are the middle tap.
    `anchor` (x, y) names a tap of the filter as given instead, as cv2.filter2D's does
    (-1: the default), so SciPy's `origin` o is the tap F // 2 + o for correlate and
    convolve alike; flipped, that tap is F - 1 - x (cv2's docs: flip the kernel, and
    its anchor with it)."""
    pads = []
    for axis, taps in enumerate(filter_shape[:2]):
        tap = taps // 2
        if anchor is not None and anchor[1 - axis] != -1:
            tap = anchor[1 - axis]
            if not 0 <= tap < taps:
                rows, width = filter_shape[:2]
                raise ValueError(f"anchor {tuple(anchor)} (x, y) lies outside the {rows}x{width} filter")
        before = taps - 1 - tap if flip else tap
        pads.append((before, taps - 1 - before))
    return pads[0], pads[1]


def check_image_shape(size: tuple[int, ...], filter_shape: tuple[int, ...]) -> None:
    """`size`: (H, W) of the image (or of each frame); `filter_shape`: (rows, F)."""
    if size[0] < filter_shape[0] or size[1] < filter_shape[1]:
        raise ValueError(
            f"image {tuple(size)} is smaller than the {shape_text(filter_shape)} filter ('valid' mode)"
        )


def as_pixels(image: Any, batch: bool = False, double_precision: bool = False) -> np.ndarray:
    """The image (or batch) as kernels read it, channels interleaved, in the machine's
    byte order: its own dtype where they read that type (float64 only on a device with
    `double_precision`), else float32 (checked as `as_image` does)."""
    array = np.asarray(image)
    if native_type(array.dtype, double_precision) == array.dtype.name and array.size:
        layout(array.shape, batch)
        if wants_double(array.dtype):
            check_float32_range("image", array)  # read as double, summed in float32
        if not array.dtype.isnative:  # big-endian data (FITS, say): kernels read native order
            return np.ascontiguousarray(array.astype(array.dtype.newbyteorder("=")))
        return np.ascontiguousarray(array)
    return as_image("image", array, batch)


def as_result(output: np.ndarray, result: np.dtype) -> np.ndarray:
    """The kernel's output as the caller asked for it: integer types rounded to nearest
    even and saturated, as the kernels do it themselves."""
    if output.dtype == result:
        return output
    if result.kind in "iu":
        # In float64, and the ends set apart: float32 (and for 64-bit types float64) rounds
        # the type's largest value up, past what it holds, where a cast would wrap around.
        info = np.iinfo(result)
        values = np.nan_to_num(np.rint(output.astype(np.float64)), nan=0.0)  # NaN gives 0, as in kernels
        lowest, highest = float(info.min), float(info.max)
        inside = np.clip(values, lowest, np.nextafter(highest, 0.0) if int(highest) > info.max else highest)
        saturated = inside.astype(result)
        saturated[values >= highest] = info.max
        saturated[values <= lowest] = info.min
        return saturated
    return output.astype(result)
