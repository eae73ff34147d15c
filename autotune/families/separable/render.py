"""Code generation for the separable family: a pure function from (config, filter
width, rank) to a runnable kernel. With `tap_space=literal` the taps are part of the
input too: that kernel is compiled for one filter."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from autotune.errors import UsageError
from autotune.families.base import KernelVariant, Launch
from autotune.families.conv2d.render import check_filter_width
from autotune.families.image import PIXEL_TYPES
from autotune.families.rendering import float_literal, load_template
from autotune.families.separable.fast_fir import fast_fir_plan
from autotune.families.separable.problem import MAX_RANK
from autotune.space import Config, SearchSpace

KERNEL_NAME = "separable"
SPACE_FILE = "separable.toml"
TEMPLATE_FILE = "separable.cl.j2"
ROWS_KERNEL, COLUMNS_KERNEL = "separable_rows", "separable_columns"


def check_rank(rank: object) -> int:
    if type(rank) is not int or not 1 <= rank <= MAX_RANK:
        raise UsageError(f"rank must be an integer from 1 to {MAX_RANK}, got {rank!r}")
    return rank


def literal_taps(config: Config) -> bool:
    """Whether the kernel for `config` is compiled for one filter's taps."""
    return config.get("tap_space") == "literal"


def kernel_parameters(
    config: Config, dtype: str = "float32", out_dtype: str = "float32", border: str = "none"
) -> dict[str, list[str]]:
    """Each kernel's parameters as its source declares them, by kernel name (the one-launch
    kernel's, or with passes = 2 the row and column passes'): the templates write these and
    the export manifest lists them, so a host program reads the signatures the kernels have."""
    taps = "__constant float" if config["tap_space"] == "constant" else "__global const float"
    unused = "unused_" if literal_taps(config) else ""
    row_taps, column_taps = f"{taps} * restrict {unused}row_taps", f"{taps} * restrict {unused}column_taps"
    pixels, out = PIXEL_TYPES[dtype], PIXEL_TYPES[out_dtype]
    border_value = ["const float border_value"] if border != "none" else []
    if int(config["passes"]) != 2:
        return {
            KERNEL_NAME: [
                f"__global const {pixels} * restrict input",
                row_taps,
                column_taps,
                f"__global {out} * restrict output",
                *("const int in_width", "const int in_height", "const int out_width", "const int out_height"),
                *border_value,
            ]
        }
    return {
        ROWS_KERNEL: [
            f"__global const {pixels} * restrict input",
            row_taps,
            "__global float * restrict rows",
            *("const int in_width", "const int in_height", "const int out_width"),
            *border_value,
        ],
        COLUMNS_KERNEL: [
            "__global const float * restrict rows",
            column_taps,
            f"__global {out} * restrict output",
            *("const int in_height", "const int out_width", "const int out_height"),
            *border_value,
        ],
    }


def _tap_rows(taps: Any, rank: int, filter_width: int, name: str) -> list[list[str]]:
    values = np.asarray(taps, dtype=np.float32)
    if values.shape != (rank, filter_width):
        expected = (rank, filter_width)
        raise UsageError(f"tap_space=literal needs {name} of shape {expected}, got {values.shape}")
    return [[float_literal(float(v)) for v in row] for row in values]


def generate(
    config: Config,
    filter_width: int,
    rank: int,
    space: SearchSpace | None = None,
    taps: tuple[Any, Any] | None = None,
    *,
    dtype: str = "float32",
    out_dtype: str = "float32",
    border: str = "none",
    anchor: int = 0,
) -> KernelVariant:
    """Render one point of the space; raises UsageError for a point that cannot exist.

    `taps` (row_taps, column_taps), each rank x F, are what a `tap_space=literal` kernel
    is compiled for; other kernels read the tap arguments and ignore them. `dtype` /
    `out_dtype`: the pixel types read and written; `border`: `none` ('valid') or the
    'same' border, with the filter tap `anchor` over each output pixel."""
    space = space or SearchSpace.shipped(SPACE_FILE)
    filter_width, rank = check_filter_width(filter_width), check_rank(rank)
    config = space.complete(config)
    shape = {"filter_width": filter_width, "rank": rank, "border": border}
    shape.update(dtype=dtype, out_dtype=out_dtype)
    reasons = space.violations(config, shape)
    if reasons:
        raise UsageError(f"invalid configuration: {reasons[0]}")
    literal = literal_taps(config)
    if literal and taps is None:
        raise UsageError("tap_space=literal compiles the taps into the kernel: give the filter")
    two_passes = int(config["passes"]) == 2
    # The terms whose row-pass rows share one `__local` tile (as float2 pairs with paired_terms).
    pair = 2 if config.get("paired_terms") else 1
    term_groups = [list(range(k, min(k + pair, rank))) for k in range(0, rank, pair)]
    # With fast_fir, the plans of sums its passes render (fast_fir.py).
    window, work_y = int(config["row_window"]) or int(config["work_x"]), int(config["work_y"])
    row_plan = fast_fir_plan(filter_width, window) if config["fast_fir"] in ("rows", "both") else None
    column_plan = fast_fir_plan(filter_width, work_y) if config["fast_fir"] in ("columns", "both") else None
    source = load_template(TEMPLATE_FILE).render(
        **config,
        config_json=json.dumps(space.comment_config(config), sort_keys=True),
        kernel_name=KERNEL_NAME,
        filter_width=filter_width,
        rank=rank,
        term_groups=term_groups,
        row_plan=row_plan,
        column_plan=column_plan,
        parameters=kernel_parameters(config, dtype, out_dtype, border),
        row_values=_tap_rows(taps[0], rank, filter_width, "row taps") if literal and taps else None,
        column_values=_tap_rows(taps[1], rank, filter_width, "column taps") if literal and taps else None,
        pixel_type=PIXEL_TYPES[dtype],
        pixel_bytes=np.dtype(dtype).itemsize,
        out_type=PIXEL_TYPES[out_dtype],
        border=border,
        anchor=anchor if border != "none" else 0,
    )
    # A streaming work-item walks stream_rows rows; a tiled one has work_y per tile it walks.
    rows_per_item = int(config["stream_rows"]) or int(config["work_y"]) * int(config["tiles_down"])
    render_key: dict[str, Any] = {"filter_width": filter_width, "rank": rank}
    if (dtype, out_dtype, border) != ("float32", "float32", "none"):
        render_key.update(dtype=dtype, out_dtype=out_dtype, border=border)
    if border != "none":
        render_key["anchor"] = anchor
    local_size = (int(config["local_x"]), int(config["local_y"]))
    if two_passes:  # the row pass over every image row, then the column pass
        return KernelVariant(
            source=source,
            kernel_name=ROWS_KERNEL,
            local_size=local_size,
            work_per_item=(int(config["work_x"]), 1),
            config=dict(config),
            family="separable",
            render_key=render_key,
            later_launches=(
                Launch(COLUMNS_KERNEL, local_size, (int(config["work_x"]), int(config["work_y"]))),
            ),
        )
    return KernelVariant(
        source=source,
        kernel_name=KERNEL_NAME,
        local_size=local_size,
        work_per_item=(int(config["work_x"]), rows_per_item),
        build_options=(),
        config=dict(config),
        family="separable",
        render_key=render_key,
    )
