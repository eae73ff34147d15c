"""What every family that filters an image shares: pixel types, border modes, the
'valid' geometry (the input is the output grown by F - 1 each way), one output per
launch point, float32 rounding."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from autotune.errors import UsageError

FLOAT32_EPS = float(np.finfo(np.float32).eps)
FLOAT16_EPS = float(np.finfo(np.float16).eps)

# Pixel types a kernel reads and writes itself (NumPy name -> OpenCL C type); the
# arithmetic is float32 whatever they are.
PIXEL_TYPES = {
    "uint8": "uchar",
    "uint16": "ushort",
    "int16": "short",
    "float16": "half",
    "float32": "float",
    "float64": "double",  # read and written as double (devices with cl_khr_fp64), summed in float
}

# How 'same' output sees pixels past the image edge (`none`: 'valid' output, no border).
# Names as OpenCV and SciPy use them, with each one's aliases.
BORDERS = ("none", "constant", "replicate", "reflect", "mirror", "wrap")
#: The problem fields of pixels, borders and layout, at their defaults (a kind that leaves
#: one out has it; a family without a field has its default: one channel, one frame).
PIXEL_DEFAULTS: dict[str, Any] = {
    "dtype": "float32",
    "out_dtype": "float32",
    "border": "none",
    "channels": 1,
    "frames": 1,
}
BORDER_ALIASES = {
    "nearest": "replicate",  # scipy.ndimage
    "edge": "replicate",  # numpy.pad
    "symmetric": "reflect",  # numpy.pad: d c b a | a b c d
    "reflect_101": "mirror",  # cv2.BORDER_REFLECT_101 (its default): d c b | a b c d
    "reflect101": "mirror",
    "default": "mirror",  # cv2.BORDER_DEFAULT
    "grid-wrap": "wrap",
    "grid-constant": "constant",
}
CV2_BORDERS = {0: "constant", 1: "replicate", 2: "reflect", 3: "wrap", 4: "mirror"}  # cv2.BORDER_* values
NUMPY_PAD_MODES = {
    "constant": "constant",
    "replicate": "edge",
    "reflect": "symmetric",
    "mirror": "reflect",
    "wrap": "wrap",
}


def check_pixels(dtype: str, out_dtype: str, border: str) -> None:
    """UsageError for a pixel type or border a problem cannot have."""
    for name, value in (("dtype", dtype), ("out_dtype", out_dtype)):
        if value not in PIXEL_TYPES:
            raise UsageError(f"{name} must be one of {', '.join(PIXEL_TYPES)}, got {value!r}")
    if border not in BORDERS:
        raise UsageError(f"border must be one of {', '.join(BORDERS)}, got {border!r}")


def pixel_words(kind: Mapping[str, Any]) -> list[str]:
    """How a kind's pixels, border and anchor read in its name (`uint8->uint8 mirror
    anchor=1`), where they are not the defaults."""
    words = []
    dtype, out_dtype = kind.get("dtype", "float32"), kind.get("out_dtype", "float32")
    if (dtype, out_dtype) != ("float32", "float32"):
        words.append(f"{dtype}->{out_dtype}")
    if kind.get("border", "none") != "none":
        words.append(kind["border"])
    if kind.get("anchor", -1) != -1:
        words.append(f"anchor={kind['anchor']}")
    return words


def anchor_taps(anchor: tuple[int, int], filter_shape: tuple[int, int]) -> tuple[int, int]:
    """cv2's anchor (x, y) as the (column, row) of taps it names in a (rows, width) filter:
    -1 is the centre, F // 2 (checked where a problem is made)."""
    (x, y), (rows, width) = anchor, filter_shape
    return (width // 2 if x == -1 else x, rows // 2 if y == -1 else y)


def border_name(border: object) -> str:
    """The canonical name of a border mode given by any of its names (or a cv2.BORDER_*
    value); ValueError for one we do not know."""
    if isinstance(border, int) and not isinstance(border, bool) and border in CV2_BORDERS:
        return CV2_BORDERS[border]
    if isinstance(border, str):
        name = border.lower().replace("border_", "")
        name = BORDER_ALIASES.get(name, name)
        if name in BORDERS and name != "none":
            return name
    names = ", ".join([*BORDERS[1:], *BORDER_ALIASES])
    raise ValueError(f"border must be one of {names} (or a cv2.BORDER_* value), got {border!r}")


def pixel_type(dtype: object) -> str:
    """The pixel type name of a NumPy dtype (or name) kernels read and write; ValueError
    for one they do not."""
    try:
        name = np.dtype(dtype).name  # type: ignore[call-overload]
    except TypeError:
        name = str(dtype)
    if name not in PIXEL_TYPES:
        raise ValueError(f"pixel type must be one of {', '.join(PIXEL_TYPES)}, got {dtype!r}")
    return name


def saturated(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values as an output of `dtype` holds them before rounding: clipped to an
    integer type's range (OpenCV's saturate_cast), unchanged for float types."""
    kind = np.dtype(dtype)
    if kind.kind in "iu":
        info = np.iinfo(kind)
        return np.clip(values, info.min, info.max)
    return values


P = TypeVar("P")


def drawn_once(data: Callable[[P], tuple[np.ndarray, ...]]) -> Callable[[P], tuple[np.ndarray, ...]]:
    """A problem's seeded data, drawn once for the problem asked last and read-only: the
    measuring worker reads it for the reference, the tolerance and the buffers in turn,
    and a 4096x4096 image takes 0.2 s to draw."""
    kept = functools.lru_cache(maxsize=1)(data)

    @functools.wraps(data)
    def drawn(problem: P) -> tuple[np.ndarray, ...]:
        arrays = kept(problem)
        for array in arrays:
            array.setflags(write=False)
        return arrays

    return drawn


def rounding_error(dtype: str, reference: Callable[[], np.ndarray]) -> float:
    """The most that storing the reference as `dtype` changes it: half a unit for integer
    types (round to nearest), half an ulp of the largest value for float16. `reference`
    computes it, called for float16 only (for a large image it costs seconds)."""
    kind = np.dtype(dtype)
    if kind.kind in "iu":
        return 0.5
    if kind == np.float16:
        values = reference()
        finite = values[np.isfinite(values)]
        return float(np.abs(finite).max(initial=0.0)) * FLOAT16_EPS / 2 + 2.0**-25
    return 0.0


def pad_for_border(
    image: np.ndarray, before: tuple[int, int], after: tuple[int, int], border: str, value: float = 0.0
) -> np.ndarray:
    """`image` grown by rows/columns before and after as `border` sees past its edge
    (what a kernel with that border reads; for references and host fallbacks)."""
    widths = ((before[0], after[0]), (before[1], after[1])) + ((0, 0),) * (image.ndim - 2)
    if border == "constant":
        return np.pad(image, widths, mode="constant", constant_values=value)
    return np.pad(image, widths, mode=NUMPY_PAD_MODES[border])  # type: ignore[call-overload]


LAUNCH = "global[d] = roundup(ceil(out[d] / work_per_item[d]), local_size[d]), d = x, y"


class FilteredImage:
    """What filtering an image has in any family: 'valid' output (border `none`: the
    input is the output grown by the filter less one each way) or 'same' (input and
    output of one size); pixels written in `out_dtype`; one output per launch point."""

    filter_width: int
    out_width: int
    out_height: int

    @property
    def same(self) -> bool:
        """'same' output: the input is as large as the output, edges read through the border."""
        return getattr(self, "border", "none") != "none"

    @property
    def filter_rows(self) -> int:
        """Rows of taps (the filter's height)."""
        return self.filter_width

    @property
    def in_width(self) -> int:
        return self.out_width if self.same else self.out_width + self.filter_width - 1

    @property
    def in_height(self) -> int:
        return self.out_height if self.same else self.out_height + self.filter_rows - 1

    @property
    def output_dtype(self) -> np.dtype:
        return np.dtype(getattr(self, "out_dtype", "float32"))

    @property
    def min_bytes(self) -> int:
        return 4 * (self.in_width * self.in_height + self.out_width * self.out_height)

    @property
    def launch_extent(self) -> tuple[int, int]:
        return (self.out_width, self.out_height)

    @property
    def output_shape(self) -> tuple[int, int]:
        return (self.out_height, self.out_width)


def shrink_work_group(
    config: dict[str, Any], still_refused: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Halve the larger of `local_x` and `local_y` while the device refuses the config:
    how a fallback of an image family fits a small device."""
    while still_refused(config) and (config["local_x"] > 1 or config["local_y"] > 1):
        knob = "local_x" if config["local_x"] >= config["local_y"] else "local_y"
        config[knob] = int(config[knob]) // 2
    return config
