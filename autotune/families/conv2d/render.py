"""Code generation: a pure function from (config, filter width) to a runnable kernel.

The same KernelVariant feeds the measuring worker, `autotune render` and exported
kernels, so what is timed is byte for byte what users get. With
`filter_space=literal` the filter's values are part of the input too: that kernel is
compiled for one filter (the compiler folds the taps into its multiply-adds, which
frees the registers that held them), so every caller passes the filter it will run.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from autotune.errors import UsageError
from autotune.families.base import KernelVariant
from autotune.families.image import PIXEL_TYPES
from autotune.families.rendering import float_literal, load_template
from autotune.space import Config, SearchSpace

KERNEL_NAME = "convolve"
SPACE_FILE = "conv2d.toml"
TEMPLATE_FILE = "conv2d.cl.j2"
MAX_FILTER_WIDTH = 255
EDGE_TILE_MAX_WIDTH = 8  # widest filter whose 'same' edge tiles keep a scalar register tile
BORDER_GROUPS_MAX_WIDTH = 9  # widest filter a borrowed 'same' kernel gives edge work-groups (GPUs)


def check_filter_width(filter_width: object, what: str = "filter width") -> int:
    if type(filter_width) is not int or not 1 <= filter_width <= MAX_FILTER_WIDTH:
        raise UsageError(f"{what} must be an integer from 1 to {MAX_FILTER_WIDTH}, got {filter_width!r}")
    return filter_width


def _widest_read(limit: int, stride: int) -> int:
    """Floats per image read (4, 2 or 1, at most `limit`) that keeps reads aligned when
    they start at multiples of `stride` floats."""
    return next(n for n in (4, 2, 1) if n <= limit and stride % n == 0)


def literal_filter(config: Config) -> bool:
    """Whether the kernel for `config` is compiled for one filter's values."""
    return config.get("filter_space") == "literal"


def filter_type(config: Config) -> str:
    """The address space and type of the filter argument (literal kernels ignore it)."""
    return "__constant float" if config["filter_space"] == "constant" else "__global const float"


def kernel_parameters(
    config: Config, dtype: str = "float32", out_dtype: str = "float32", border: str = "none"
) -> list[str]:
    """The kernel's parameters as its source declares them: the template writes these and
    the export manifest lists them, so a host program reads the signature the kernel has."""
    filter_name = "unused_filter" if literal_filter(config) else "filter"
    return [
        f"__global const {PIXEL_TYPES[dtype]} * restrict input",
        f"{filter_type(config)} * restrict {filter_name}",
        f"__global {PIXEL_TYPES[out_dtype]} * restrict output",
        "const int in_width",
        "const int out_width",
        "const int out_height",
        "const int filter_width",
        *(["const float border_value"] if border != "none" else []),
    ]


def _filter_rows(taps: Any, filter_shape: tuple[int, int]) -> list[str]:
    values = np.asarray(taps, dtype=np.float32)
    if values.shape != filter_shape:
        rows, width = filter_shape
        raise UsageError(f"filter_space=literal needs the {rows}x{width} filter, got shape {values.shape}")
    return [", ".join(float_literal(float(v)) for v in row) for row in values]


def generate(
    config: Config,
    filter_width: int,
    space: SearchSpace | None = None,
    taps: Any = None,
    *,
    dtype: str = "float32",
    out_dtype: str = "float32",
    border: str = "none",
    anchor: int = 0,
    channels: int = 1,
    batch: bool = False,
    filter_height: int = 0,
    anchor_y: int | None = None,
) -> KernelVariant:
    """Render one point of the space; raises UsageError for a point that cannot exist.

    `taps` (rows x F) is the filter a `filter_space=literal` kernel is compiled for;
    other kernels read the filter argument and ignore it. `filter_height`: rows of taps
    (0: F, a square filter); `anchor` / `anchor_y`: the column / row of taps over each
    output pixel in 'same' output (`anchor_y` None: as `anchor`). `dtype` / `out_dtype`: the
    pixel types read and written; `border`: `none` ('valid') or the 'same' border, with
    the filter tap `anchor` over each output pixel; `batch`: frames one after another,
    one per index of launch dimension 2 (any number of them)."""
    space = space or SearchSpace.shipped(SPACE_FILE)
    filter_width = check_filter_width(filter_width)
    rows = check_filter_width(filter_height or filter_width, "filter height")
    anchor_y = anchor if anchor_y is None else anchor_y
    config = space.complete(config)
    shape = {"filter_width": filter_width, "channels": channels, "filter_height": filter_height}
    shape.update(border=border, dtype=dtype, out_dtype=out_dtype)
    reasons = space.violations(config, shape)
    if reasons:
        raise UsageError(f"invalid configuration: {reasons[0]}")
    literal = literal_filter(config)
    if literal and taps is None:
        raise UsageError("filter_space=literal compiles the filter's values into the kernel: give the filter")
    # Every knob reaches the template under its own name; these are the values derived
    # from them (templates/conv2d.cl.j2 lists what each one means).
    filter_local = config["filter_space"] == "local"
    # Rows of taps are read through a pointer of this type (a literal table is __constant).
    filter_row_type = "__local const float" if filter_local else filter_type(config)
    if literal:
        filter_row_type = "__constant float"
    tile_pitch = config["local_x"] * config["work_x"] + (filter_width - 1) * channels
    source = load_template(TEMPLATE_FILE).render(
        **config,
        config_json=json.dumps(space.comment_config(config), sort_keys=True),
        kernel_name=KERNEL_NAME,
        filter_width=filter_width,
        parameters=kernel_parameters(config, dtype, out_dtype, border),
        filter_rows="filter_copy" if filter_local else "filter",
        filter_row_type=filter_row_type,
        filter_values=_filter_rows(taps, (rows, filter_width)) if literal else None,
        filter_height=rows,
        rows="fw" if rows == filter_width else "fh",
        ROWS="FILTER_WIDTH" if rows == filter_width else "FILTER_HEIGHT",
        row_space="__local" if config["cache_local"] else "__global",
        # The __local tile's pitch is known when compiling; so is the column loop's step.
        tile_loads=_widest_read(config["image_vector"], tile_pitch),
        step_loads=_widest_read(4, config["vector"] * config["unroll"] * channels)
        if config["unroll"] != "full"
        else 4,
        channels=channels,
        pixel_type=PIXEL_TYPES[dtype],
        out_type=PIXEL_TYPES[out_dtype],
        border=border,
        anchor=anchor if border != "none" else 0,
        anchor_y=anchor_y if border != "none" else 0,
        edge_tile=keeps_edge_tile(config, rows, filter_width),
        # Where the image rows a work-item reads start ('same' output shifts them by the anchor).
        row_origin="y0" if border == "none" else "in_y0",
        column_origin="x0" if border == "none" else "in_x0",
        batch=batch,
    )
    render_key: dict[str, Any] = {"filter_width": filter_width}
    if (dtype, out_dtype, border, channels) != ("float32", "float32", "none", 1):
        render_key.update(dtype=dtype, out_dtype=out_dtype, border=border, channels=channels)
    if rows != filter_width:
        render_key["filter_height"] = rows
    if border != "none":
        render_key["anchor"] = anchor
        if anchor_y != anchor:
            render_key["anchor_y"] = anchor_y
    if batch:
        render_key["batch"] = True
    frames_dimension = (1,) if batch else ()
    return KernelVariant(
        source=source,
        kernel_name=KERNEL_NAME,
        local_size=(int(config["local_x"]), int(config["local_y"]), *frames_dimension),
        work_per_item=(int(config["work_x"]), int(config["work_y"]), *frames_dimension),
        build_options=(),
        config=dict(config),
        family="conv2d",
        render_key=render_key,
    )


def keeps_edge_tile(config: Config, rows: int, filter_width: int) -> bool:
    """Whether a 'same' kernel's tiles at the image edge keep the interior's register tile
    (else they loop over outputs and taps, rolled). Scalar tiles only up to
    EDGE_TILE_MAX_WIDTH: unrolled, their border reads raise the registers of every tile
    (on the H200 at F = 17: 127 against the interior's 40, 9x slower), and rolled loops are
    slow per tile only at small widths (1.3-2x at F = 3, 5). Explicit vectors (CPUs) gather
    their lanes through a table of the columns the border gives, sized when compiling
    (FILTER_WIDTH), at every width: on PoCL at 2048x2048 the whole kernel ran 1.16-2.46x
    faster with them than with the rolled edge loop at F = 9-33 (BENCHMARKS.md)."""
    if config["x_vector"] > 1:
        return config["filter_mode"] == "define"
    return max(rows, filter_width) <= EDGE_TILE_MAX_WIDTH
