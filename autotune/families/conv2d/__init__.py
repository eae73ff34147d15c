"""The direct 2D correlation family: float32 image, F x F filter, 'valid' output.

Descriptor of the family: space (search_spaces/conv2d.toml), template
(templates/conv2d.cl.j2), problem (`Conv2DProblem`: filter width and output size),
rendering (`render.generate`), the kernel ABI, and the adapters the run-time and
export use: which configs serve any filter, their argument-reading twins, what a
manifest says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from autotune.errors import UsageError
from autotune.families.base import KernelFamily, KernelVariant, Problem
from autotune.families.c_header import HeaderLayout, KindField
from autotune.families.conv2d.geometry import edge_rows, interior_box, tile_values
from autotune.families.conv2d.inputs import default_image_size
from autotune.families.conv2d.problem import Conv2DProblem
from autotune.families.conv2d.render import (
    BORDER_GROUPS_MAX_WIDTH,
    SPACE_FILE,
    TEMPLATE_FILE,
    check_filter_width,
    generate,
    keeps_edge_tile,
    kernel_parameters,
    literal_filter,
)
from autotune.families.image import LAUNCH, anchor_taps, pixel_words, shrink_work_group
from autotune.space import Config

# What a 'same' kernel lent to 'valid' output drops with its edge work-groups.
NO_EDGE_ITEMS = {"edge_outputs_per_item": 1, "adjacent_edge_outputs": False}
# How a host launches a kernel whose edge outputs have work-groups of their own.
BORDER_GROUPS = (
    "global[1] += ceil(edge_outputs / (global[0] * local[1] * p)) * local[1], p the manifest's "
    "edge_outputs_per_item: rows of work-groups that come first and write the outputs no tile does "
    "(the kernel takes every launch row before the last ceil(ceil(H / work_y) / local[1]) * local[1] "
    "as theirs). edge_outputs = W * H - box_w * box_h, "
    "W = out_width * channels, H = out_height, t = the manifest's tile_values (work_x, or work_x * "
    "channels where work-items compute pixels of one channel), "
    "box_x = min(ceil(anchor * channels / t) * t, W), "
    "box_w = max(floor(max(W - (filter_width - 1 - anchor) * channels, 0) / t) * t - box_x, 0); "
    "box_y, box_h the same over rows with anchor_y, filter_height, work_y and no channels"
)

# The C header holds kernels of every kind: `<prefix>_find_kernel_of` looks one up by
# these fields, and `<prefix>_launch_size` works out its launch (edge rows included).
CONVOLUTION_HEADER = HeaderLayout(
    kernels="tuned OpenCL convolution kernels",
    key_fields=("filter_width",),
    arguments=(
        " * (no border_groups; out_width in values: pixels x channels), or for any {p}_launch_size(k,",
        " * out_width, out_height, frames, global) (out_width in pixels), on k->batch ? 3 : 2",
        " * dimensions with local[2] = 1.",
        " * Arguments: input, filter, output, in_width, out_width, out_height, filter_width,",
        " * and for 'same' kinds (border other than none) border_value: images of dtype and out_dtype",
        " * (OpenCL uchar, ushort, short, half, float, double), channels interleaved, frames one after",
        " * another; widths count values (pixels x channels); the filter is filter_height x",
        " * filter_width floats, row-major. 'valid' output is (W - filter_width + 1) x",
        " * (H - filter_height + 1); 'same' output is W x H. */",
    ),
    kind_fields=(
        KindField(
            "filter_height",
            "int",
            "rows of taps",
            lambda v: v.render_key.get("filter_height", v.render_key["filter_width"]),
            "filter_width",
        ),
        KindField(
            "dtype",
            "const char *",
            "input pixels: uint8, uint16, int16, float16, float32, float64",
            lambda v: v.render_key.get("dtype", "float32"),
            '"float32"',
        ),
        KindField(
            "out_dtype",
            "const char *",
            "output pixels",
            lambda v: v.render_key.get("out_dtype", "float32"),
            '"float32"',
        ),
        KindField(
            "border",
            "const char *",
            "none: 'valid'; else 'same', the image read past its edge this way",
            lambda v: v.render_key.get("border", "none"),
            '"none"',
        ),
        KindField(
            "anchor",
            "int",
            "'same': the column of taps over each output (cv2: filter_width / 2); -1 'valid'",
            lambda v: v.render_key.get("anchor", -1),
            "-1",
        ),
        KindField(
            "anchor_y",
            "int",
            "'same': the row of taps over each output (cv2: filter_height / 2); -1 'valid'",
            lambda v: v.render_key.get("anchor_y", v.render_key.get("anchor", -1)),
            "-1",
        ),
        KindField(
            "channels", "int", "interleaved channels, 1-4", lambda v: v.render_key.get("channels", 1), "1"
        ),
        KindField(
            "batch",
            "int",
            "1: frames of one size in one launch, one per index of dimension 2",
            lambda v: int(v.render_key.get("batch", False)),
            "0",
        ),
        KindField(
            "border_groups",
            "int",
            "1: rows of work-groups for the edge outputs come first ({p}_launch_size)",
            lambda v: int(bool(v.config.get("border_groups"))),
            in_kind=False,
        ),
        KindField(
            "tile_values",
            "int",
            "values along x the edge rows' interior box counts in: work_x, or work_x * channels",
            lambda v: tile_values(v.config, v.render_key.get("channels", 1)),
            in_kind=False,
        ),
        KindField(
            "edge_outputs_per_item",
            "int",
            "outputs each work-item of the edge rows computes",
            lambda v: int(v.config.get("edge_outputs_per_item", 1)),
            in_kind=False,
        ),
    ),
    launch_helper=(
        "/* The global size of entry k over out_width x out_height pixels and `frames` of them",
        " * (1 unless k->batch): widths count values (pixels x channels), and with border_groups",
        " * the rows of work-groups for the outputs no tile writes come first. */",
        "static inline void {p}_launch_size(const {p}_kernel *k, size_t out_width, size_t out_height,",
        "                                   size_t frames, size_t global_size[3]) {",
        "    size_t values = out_width * (size_t)k->channels;",
        "    {p}_global_size(k, values, out_height, global_size);",
        "    global_size[2] = frames;",
        "    if (!k->border_groups) return;",
        "    /* The interior box: whole tiles whose inputs lie inside the image. */",
        "    long long w = (long long)values, h = (long long)out_height, c = k->channels;",
        "    long long tile_x = k->tile_values, work_y = (long long)k->work_per_item[1];",
        "    long long x0 = (k->anchor * c + tile_x - 1) / tile_x * tile_x;",
        "    long long y0 = (k->anchor_y + work_y - 1) / work_y * work_y;",
        "    long long x1 = w - (k->filter_width - 1 - k->anchor) * c;",
        "    long long y1 = h - (k->filter_height - 1 - k->anchor_y);",
        "    x0 = x0 < w ? x0 : w;",
        "    y0 = y0 < h ? y0 : h;",
        "    x1 = (x1 > 0 ? x1 : 0) / tile_x * tile_x;",
        "    y1 = (y1 > 0 ? y1 : 0) / work_y * work_y;",
        "    long long box_w = x1 > x0 ? x1 - x0 : 0, box_h = y1 > y0 ? y1 - y0 : 0;",
        "    size_t edge_outputs = (size_t)((h - box_h) * w + box_h * (w - box_w));",
        "    size_t per_row = global_size[0] * k->local_size[1] * (size_t)k->edge_outputs_per_item;",
        "    global_size[1] += (edge_outputs + per_row - 1) / per_row * k->local_size[1];",
        "}",
        "",
    ),
)


class Conv2D(KernelFamily):
    name: ClassVar[str] = "conv2d"
    header_layout: ClassVar[HeaderLayout] = CONVOLUTION_HEADER
    algorithm: ClassVar[str] = "direct"
    space_file: ClassVar[str] = SPACE_FILE
    template: ClassVar[str] = TEMPLATE_FILE
    problem_type: ClassVar[type[Problem]] = Conv2DProblem
    description: ClassVar[str] = "2D 'valid' correlation, float32, F x F filter"

    one_input_kernel: ClassVar[str] = "has the filter compiled in"
    any_input_kernel: ClassVar[str] = "reads its filter argument"
    values_option: ClassVar[str] = "--filter FILE.npy"
    values_needed: ClassVar[str] = (
        "filter_space=literal compiles the filter's values into the kernel; give them with --filter FILE.npy"
    )

    def kind(
        self,
        filter_width: int,
        dtype: str = "float32",
        out_dtype: str = "float32",
        border: str = "none",
        channels: int = 1,
        filter_height: int = 0,
        frames: int = 1,
        anchor: int = -1,
        anchor_y: int = -1,
    ) -> dict[str, Any]:
        """The problem kind of a filter size, pixel types, border, channels and anchor (its
        key without the output size)."""
        problem = Conv2DProblem(
            filter_width,
            1,
            1,
            dtype,
            out_dtype=out_dtype,
            border=border,
            channels=channels,
            filter_height=filter_height,
            frames=frames,
            anchor=anchor,
            anchor_y=anchor_y,
        )
        return problem.kind()

    def describe_kind(self, kind: Mapping[str, Any]) -> str:
        """`F=5`, or with another height, other pixels, a border, an anchor or channels
        `F=3x4 uint8->uint8 mirror anchor=1 3ch` (unique per kind)."""
        height = f"{kind['filter_height']}x" if kind.get("filter_height", 0) else ""
        words = [f"F={height}{kind['filter_width']}", *pixel_words(kind)]
        if kind.get("anchor_y", -1) != -1:
            words.append(f"anchor_y={kind['anchor_y']}")
        if kind.get("channels", 1) != 1:
            words.append(f"{kind['channels']}ch")
        if kind.get("frames", 1) != 1:
            words.append(f"x{kind['frames']}")
        return " ".join(words)

    def kinds(
        self,
        filter_widths: Sequence[int | tuple[int, int]],
        ranks: Sequence[int] | None = None,
        pixels: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """A kind per filter width F, or per (rows, F) size. `pixels` may hold an `anchor`
        (x, y) as cv2 takes it (-1: the filter's centre column or row)."""
        if ranks:
            raise UsageError("--rank is for --family separable: the direct family runs any filter as it is")
        pixels = dict(pixels or {})
        anchor = pixels.pop("anchor", None)
        kinds = []
        for size in filter_widths:
            rows, width = size if isinstance(size, tuple) else (0, size)
            width = check_filter_width(width)
            placed = {}
            if anchor is not None:
                column, row = anchor_taps(anchor, (rows or width, width))
                placed = {"anchor": column, "anchor_y": row}
            kinds.append(self.kind(width, filter_height=rows, **pixels, **placed))
        return kinds

    def values_of_filter(
        self, filt: np.ndarray, pixels: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], Any]:
        rows = check_filter_width(filt.shape[0], "filter height")
        return self.kinds([(rows, check_filter_width(filt.shape[1]))], None, pixels)[0], filt

    def value_arrays(self, values: Any) -> dict[str, np.ndarray]:
        return {"filter": values}

    def default_size(self, device: object) -> tuple[int, ...]:
        return default_image_size(device)

    def run_key(self, problems: list[Problem]) -> dict[str, Any]:
        # The key release 0.1.0 gave a search, so its runs are still resumed and reported.
        sizes = {p.size for p in problems}
        assert len(sizes) == 1, "one search tunes one output size"
        widths = [p.key()["filter_width"] for p in problems]
        key: dict[str, Any] = {"widths": widths, "size": list(sizes.pop())}
        kinds = [self.describe_kind(p.kind()) for p in problems]
        if kinds != [f"F={width}" for width in key["widths"]]:  # other pixel types or borders
            key["problems"] = kinds
        return key

    def warm_start_distance(self, kind: Mapping[str, Any], other: Mapping[str, Any]) -> float:
        return abs(kind["filter_width"] - other["filter_width"])

    def related_kind_distance(self, kind: Mapping[str, Any], other: Mapping[str, Any]) -> float | None:
        """Kernels tuned for the same filter width with other pixel types or border: the
        fewer of those that differ, the nearer (a border changes edge tiles only)."""
        mine, theirs = (Conv2DProblem(**{**k, "out_width": 1, "out_height": 1}) for k in (kind, other))
        if mine.filter_width != theirs.filter_width:
            return None
        fields = ("dtype", "out_dtype", "border", "anchor", "channels", "frames", "filter_height", "anchor_y")
        return sum(getattr(mine, f) != getattr(theirs, f) for f in fields) - 0.5 * (
            mine.border != theirs.border
        )

    def adapt_related(self, config: Config, problem: Problem, device: object) -> Config:
        """A 'same' problem borrowing another kind's kernel on a GPU gives its edge outputs
        work-groups of their own up to F = 9 (uint8 on the H200: 'same' 1.00-1.30x the
        'valid' time of the same config, against 1.06-14x with tiles reading the border), and
        stages a wider filter's tile in __local memory, where the border costs nothing per
        tap (F = 17: staged 1.10x, groups 1.25-1.33x). On a CPU (PoCL) edge groups lost up to
        2.2x, so a CPU keeps the config (BENCHMARKS.md, "Edge outputs in work-groups of their
        own"), unless its edge tiles would loop over outputs (`keeps_edge_tile`: a scalar
        tile and a filter wider or taller than 8), where it stages too. A 'valid' problem
        borrowing a 'same' kernel drops its edge groups; a float output writes with the
        built-in conversion. Work-items of one channel need edge groups in 'same' output:
        where those are not given, the same tile computes adjacent values."""
        assert isinstance(problem, Conv2DProblem)
        config = self.output_written_as_it_can_be(config, problem, device)
        if not problem.same:  # a 'same' kernel lent to 'valid' output: no border to group
            if not config.get("border_groups"):
                return config
            return {**config, "border_groups": False, **NO_EDGE_ITEMS}
        if config.get("cache_local") or config.get("border_groups"):
            return config
        on_cpu = getattr(device, "is_cpu", True)  # no device known: as on a CPU
        if not on_cpu and max(problem.filter_shape) <= BORDER_GROUPS_MAX_WIDTH:
            grouped = {**config, "border_groups": True}
            return config if self.violations(grouped, problem, device) else grouped
        if config.get("channel_items"):  # 'same' without edge groups: the tile of adjacent values
            config = {**config, "channel_items": False}
        if keeps_edge_tile(self.space.complete(config), *problem.filter_shape):
            return config
        staged = {**config, "cache_local": True, "filter_mode": "define"}
        return config if self.violations(staged, problem, device) else staged

    def t4_fields(self, key: Mapping[str, Any]) -> dict[str, Any]:
        return {"filter_width": key["filter_width"]}

    def render(self, config: Config, problem: Problem, values: Any = None) -> KernelVariant:
        """`values`: the filter a literal kernel is compiled for (default: the problem's
        seeded filter, the one it is verified and timed with)."""
        assert isinstance(problem, Conv2DProblem)
        if values is None and literal_filter(config):
            values = problem.taps()
        return generate(
            config,
            problem.filter_width,
            self.space,
            values,
            dtype=problem.dtype,
            out_dtype=problem.out_dtype,
            border=problem.border,
            anchor=problem.anchor_column,
            anchor_y=problem.anchor_row,
            channels=problem.channels,
            batch=problem.frames > 1,
            filter_height=problem.filter_height,
        )

    def arguments(self, variant: KernelVariant, problem: Problem, buffers: Mapping[str, Any]) -> tuple:
        assert isinstance(problem, Conv2DProblem)
        channels = problem.channels
        sizes = (
            problem.in_width * channels,
            problem.out_width * channels,
            problem.out_height,
            problem.filter_width,
        )
        arguments = (buffers["input"], buffers["filter"], buffers["output"], *(np.int32(n) for n in sizes))
        if problem.same:
            return (*arguments, np.float32(buffers.get("border_value", 0.0)))
        return arguments

    def global_size(self, variant: KernelVariant, problem: Problem) -> tuple[int, ...]:
        """With `border_groups`, rows of work-groups for the outputs outside the interior
        tiles come before the tiles' (autotune/families/conv2d/geometry.py)."""
        size = variant.global_size(problem.launch_extent)
        if not variant.config.get("border_groups"):
            return size
        assert isinstance(problem, Conv2DProblem)
        row_values = problem.out_width * problem.channels
        box = interior_box(
            row_values,
            problem.out_height,
            (tile_values(variant.config, problem.channels), variant.work_per_item[1]),
            problem.filter_shape,
            (problem.anchor_column, problem.anchor_row),
            problem.channels,
        )
        per_item = int(variant.config.get("edge_outputs_per_item", 1))
        extra = edge_rows(
            box.edge_outputs(row_values, problem.out_height), size[0], variant.local_size[1], per_item
        )
        return (size[0], size[1] + extra, *size[2:])

    def serves_any_data(self, config: Config) -> bool:
        return not literal_filter(config)

    def any_data_twin(self, config: Config, problem: Problem, device: object) -> Config:
        """The same kernel reading its taps from the filter argument (`__constant` where
        the device takes the filter there)."""
        twin = {**config, "filter_space": "constant"}
        if self.violations(twin, problem, device):
            twin["filter_space"] = "global"
        return twin

    def fallback(self, problem: Problem, device: object) -> Config:
        """The space's fallback, shrunk until the device accepts it: the filter moves to
        __global, then the work-group halves."""
        config = super().fallback(problem, device)
        if self.violations(config, problem, device):
            config["filter_space"] = "global"
        return shrink_work_group(config, lambda c: bool(self.violations(c, problem, device)))

    def manifest_fields(self, variant: KernelVariant) -> dict[str, Any]:
        key = variant.render_key
        border = key.get("border", "none")
        anchors = (
            {"anchor": key["anchor"], "anchor_y": key.get("anchor_y", key["anchor"])}
            if border != "none"
            else {}
        )
        return {
            "filter_width": key["filter_width"],
            # rows of taps: the filter argument is filter_height x filter_width floats, row by row
            "filter_height": key.get("filter_height", key["filter_width"]),
            "dtype": key.get("dtype", "float32"),
            "out_dtype": key.get("out_dtype", "float32"),
            # none: 'valid' output; else 'same' output, the image read past its edge this way
            "border": border,
            # 'same' output: the column (anchor) and row (anchor_y) of taps over each output pixel
            **anchors,
            # interleaved channels: widths and the launch's x extent count values (pixels x channels)
            "channels": key.get("channels", 1),
            # True: frames of one size one after another in input and output, one per
            # index of launch dimension 2 (global[2] = frames, local[2] = 1).
            "batch": key.get("batch", False),
            # True: the taps are in the source and the filter argument is ignored.
            "filter_compiled_in": literal_filter(variant.config),
            # The kernel's parameters as its source declares them (input and output of `dtype`
            # and `out_dtype`; 'same' kernels take border_value last).
            "arguments": kernel_parameters(
                variant.config, key.get("dtype", "float32"), key.get("out_dtype", "float32"), border
            ),
            "launch": LAUNCH,
            **(
                {
                    "border_groups": BORDER_GROUPS,
                    "tile_values": tile_values(variant.config, key.get("channels", 1)),
                    "edge_outputs_per_item": int(variant.config.get("edge_outputs_per_item", 1)),
                }
                if variant.config.get("border_groups")
                else {}
            ),
        }

    def export_stem(self, variant: KernelVariant) -> str:
        """`convolve_f5`, `convolve_f3x5` (rows x width), then what is not the default:
        pixel types and border, the anchor (`_anchor1`: column and row 1; `_anchor1y2`:
        column 1, row 2), channels, `_batch`."""
        key = variant.render_key
        width, rows = key["filter_width"], key.get("filter_height", key["filter_width"])
        stem = f"convolve_f{width}" if rows == width else f"convolve_f{rows}x{width}"
        if "border" in key:
            stem += f"_{key['dtype']}_{key['out_dtype']}_{key['border']}"
            if "anchor" in key:  # 'same' output; 'valid' kernels have no anchor
                anchor = key["anchor"]
                anchor_y = key.get("anchor_y", anchor)
                if (anchor, anchor_y) != (width // 2, rows // 2):
                    stem += f"_anchor{anchor}" + (f"y{anchor_y}" if anchor_y != anchor else "")
            if key.get("channels", 1) != 1:
                stem += f"_{key['channels']}ch"
        return f"{stem}_batch" if key.get("batch") else stem


CONV2D = Conv2D()

__all__ = ["CONV2D", "Conv2D", "Conv2DProblem"]
