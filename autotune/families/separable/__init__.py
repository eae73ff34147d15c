"""The separable family: a rank-r filter run as r (row pass, column pass) terms in one
kernel, so an F x F filter costs about 4rF operations per output instead of 2F².

Descriptor of the family: space (search_spaces/separable.toml), template
(templates/separable.cl.j2), problem (`SeparableProblem`: filter width, rank and output
size), rendering (`render.generate`), the kernel ABI, and the adapters lookup and
export use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from autotune.errors import UsageError
from autotune.families.base import KernelFamily, KernelVariant, Problem, Step
from autotune.families.c_header import HeaderLayout
from autotune.families.conv2d.inputs import default_image_size
from autotune.families.conv2d.render import check_filter_width
from autotune.families.image import LAUNCH, anchor_taps, pixel_words, shrink_work_group
from autotune.families.separable.problem import MAX_RANK, SeparableProblem
from autotune.families.separable.render import (
    SPACE_FILE,
    TEMPLATE_FILE,
    check_rank,
    generate,
    kernel_parameters,
    literal_taps,
)
from autotune.families.separable.terms import separable_terms
from autotune.space import Config


def scratch_pitch(out_width: int) -> int:
    """Floats from one row of a two-launch kernel's scratch buffer to the next: the
    output's width rounded up to a multiple of 4 (rows start 16-byte aligned)."""
    return -(-out_width // 4) * 4


def scratch_rows(problem: SeparableProblem) -> int:
    """Rows per term of a two-launch kernel's scratch buffer: the image's, and for 'same'
    output the F - 1 rows the border adds above and below."""
    return problem.in_height + (problem.filter_width - 1 if problem.same else 0)


SEPARABLE_HEADER = HeaderLayout(
    kernels="tuned OpenCL separable convolution kernels (rank-r filters as r row/column terms)",
    key_fields=("filter_width", "rank"),
    arguments=(
        " * Arguments: input, row_taps, column_taps (rank x F floats each, row-major; kernels",
        " * built for one filter ignore them), output, in_width, in_height, out_width, out_height",
        " * ('valid' correlation with sum_k outer(column_taps[k], row_taps[k]), float32, row-major). */",
    ),
    defines=("SEPARABLE 1  /* entries are keyed by (filter_width, rank) */",),
    second_launch=(
        "/* Entries with a second_kernel_name are two launches (passes = 2) on one queue, sharing a",
        " * scratch buffer `rows` of rank x in_height x pitch floats (pitch: out_width rounded up",
        " * to a multiple of 4):",
        " *   kernel_name: input, row_taps, rows, in_width, in_height, out_width;",
        " *     global = global_size(k, out_width, in_height)",
        " *   second_kernel_name: rows, column_taps, output, in_height, out_width, out_height;",
        " *     global = second_global_size(k, out_width, out_height), local = second_local_size */",
    ),
)


class Separable(KernelFamily):
    name: ClassVar[str] = "separable"
    algorithm: ClassVar[str] = "separable"
    header_layout: ClassVar[HeaderLayout] = SEPARABLE_HEADER
    space_file: ClassVar[str] = SPACE_FILE
    template: ClassVar[str] = TEMPLATE_FILE
    problem_type: ClassVar[type[Problem]] = SeparableProblem
    description: ClassVar[str] = "2D correlation with a rank-r F x F filter as r separable terms"

    one_input_kernel: ClassVar[str] = "has the taps compiled in"
    any_input_kernel: ClassVar[str] = "reads its tap arguments"
    values_option: ClassVar[str] = "--filter FILE.npy"
    values_needed: ClassVar[str] = "tap_space=literal compiles the taps into the kernel; give the filter"

    def kind(
        self,
        filter_width: int,
        rank: int = 1,
        dtype: str = "float32",
        out_dtype: str = "float32",
        border: str = "none",
        anchor: int = -1,
    ) -> dict[str, Any]:
        """The problem kind of a filter width, rank, pixel types, border and anchor tap (its
        key without the output size)."""
        problem = SeparableProblem(
            filter_width, rank, 1, 1, dtype, out_dtype=out_dtype, border=border, anchor=anchor
        )
        return problem.kind()

    def describe_kind(self, kind: Mapping[str, Any]) -> str:
        """`F=5,rank=1`, or with other pixels, a border or an anchor
        `F=5,rank=1 uint8->uint8 mirror anchor=1`."""
        return " ".join([f"F={kind['filter_width']},rank={kind['rank']}", *pixel_words(kind)])

    def kinds(
        self,
        filter_widths: Sequence[int | tuple[int, int]],
        ranks: Sequence[int] | None = None,
        pixels: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Every width at every rank (rank 1 when none is given), of the pixels, border and
        anchor given (channels and batches are the direct family's; the anchor (x, y) must
        name one tap in x and y)."""
        pixels = dict(pixels or {})
        anchor = pixels.pop("anchor", None)
        if set(pixels) - {"dtype", "out_dtype", "border"}:
            raise UsageError(
                "--channels and --frames are for the conv2d family: separable kernels filter one image"
            )
        if any(isinstance(w, tuple) for w in filter_widths):
            raise UsageError("the separable family tunes square filters: give widths F, not ROWSxF sizes")
        for width in filter_widths:  # a kernel may sum more terms than that; a filter never needs them
            too_high = [r for r in ranks or [] if isinstance(width, int) and r > width]
            if too_high:
                raise UsageError(f"a {width}x{width} filter has rank 1 to {width}, not {too_high[0]}")
        kinds = []
        for width in filter_widths:
            width = check_filter_width(width)
            placed = {}
            if anchor is not None:
                column, row = anchor_taps(anchor, (width, width))
                if column != row:
                    raise UsageError(
                        "the separable family anchors its filter at one tap in x and y: "
                        f"give --anchor X,X, not {anchor[0]},{anchor[1]}"
                    )
                placed = {"anchor": column}
            kinds += [self.kind(width, check_rank(r), **pixels, **placed) for r in ranks or [1]]
        return kinds

    def values_of_filter(
        self, filt: np.ndarray, pixels: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], Any]:
        """The filter's separable terms (its rank is part of the kind)."""
        if filt.shape[0] != filt.shape[1]:
            raise UsageError(
                f"the separable family takes square filters, got {filt.shape[0]}x{filt.shape[1]}"
            )
        terms = separable_terms(filt, MAX_RANK)
        if terms is None:
            raise UsageError(
                f"the filter is not separable: no sum of up to {MAX_RANK} row/column terms "
                "equals it within float32 rounding"
            )
        return self.kinds([filt.shape[0]], [terms[0].shape[0]], pixels)[0], terms

    def value_arrays(self, values: Any) -> dict[str, np.ndarray]:
        row_taps, column_taps = values
        return {"row_taps": row_taps, "column_taps": column_taps}

    def default_size(self, device: object) -> tuple[int, ...]:
        return default_image_size(device)

    def warm_start_distance(self, kind: Mapping[str, Any], other: Mapping[str, Any]) -> float:
        return abs(kind["filter_width"] - other["filter_width"]) + 8 * abs(kind["rank"] - other["rank"])

    def related_kind_distance(self, kind: Mapping[str, Any], other: Mapping[str, Any]) -> float | None:
        """Kernels tuned for the same width and rank with other pixel types or border:
        the fewer of those that differ, the nearer."""
        mine, theirs = (SeparableProblem(**{**k, "out_width": 1, "out_height": 1}) for k in (kind, other))
        if (mine.filter_width, mine.rank) != (theirs.filter_width, theirs.rank):
            return None
        return sum(getattr(mine, f) != getattr(theirs, f) for f in ("dtype", "out_dtype", "border", "anchor"))

    def adapt_related(self, config: Config, problem: Problem, device: object) -> Config:
        """A 'same' problem borrowing a 'valid' kernel stages its input tile (the border
        is read while staging); a float output writes with the built-in conversion."""
        assert isinstance(problem, SeparableProblem)
        config = self.output_written_as_it_can_be(config, problem, device)
        if not problem.same or config.get("cache_input"):
            return config
        staged = {**config, "cache_input": True}
        return config if self.violations(staged, problem, device) else staged

    def fit_warm_start(self, config: Config, problem: Problem, device: object) -> Config:
        """A winner whose tiles do not fit here (another rank's, whose terms each keep
        their rows in `__local` memory) computes fewer columns a work-item, halving
        `work_x` until it is valid: the work-group's width, and the rest of its layout, stay.
        At `work_x = 1` the tile narrows instead, its work-items moved from x to y
        (`local_x` halved, `local_y` doubled, `work_y` halved): the group's size and the
        rows a tile adds stay. On the H200 the F = 33 rank-1 winner (32x4 groups of 2x8)
        repaired by the search to 16x4 groups of 2x8 took 0.132 ms at rank 2, halved to 1x8
        0.113; at rank 3 the rank-2 winner (64x2 of 1x16) repaired to 32x2 of 1x16 0.174,
        narrowed to 32x4 of 1x8 0.156 (BENCHMARKS.md). Halved to one column, a winner
        with `column_pairs` leaves them; a winner's `fast_fir` that does not hold here (a
        narrower filter, fewer outputs in a pass) is left out."""
        if not self.violations(config, problem, device):
            return config
        fitted = self._fast_fir_fitted(dict(config), problem, device)
        if not self.violations(fitted, problem, device):
            return fitted
        while int(fitted.get("work_x", 1)) > 1:
            fitted["work_x"] = int(fitted["work_x"]) // 2
            if fitted["work_x"] == 1:
                fitted["column_pairs"] = False  # pairs of columns need two a work-item
            fitted = self._fast_fir_fitted(fitted, problem, device)
            if not self.violations(fitted, problem, device):
                return fitted
        heights = self.space.knobs["local_y"].values
        width, height, rows = (int(fitted[name]) for name in ("local_x", "local_y", "work_y"))
        while width > 1 and rows > 1 and 2 * height in heights:
            width, height, rows = width // 2, 2 * height, rows // 2
            fitted.update(local_x=width, local_y=height, work_y=rows)
            fitted = self._fast_fir_fitted(fitted, problem, device)
            if not self.violations(fitted, problem, device):
                return fitted
        return config

    def _fast_fir_fitted(self, config: dict, problem: Problem, device: object) -> dict:
        """`config` with as much of its `fast_fir` as holds here: `both` keeps the pass
        whose pairs still pay (rows, else columns), else the knob is off."""
        value = config.get("fast_fir", "none")
        kept_values = [value, "rows", "columns"] if value == "both" else [value]
        for kept in kept_values:
            candidate = {**config, "fast_fir": kept}
            # the knob breaks a rule where the config breaks more rules with it than without
            without = len(self.violations({**candidate, "fast_fir": "none"}, problem, device))
            if len(self.violations(candidate, problem, device)) <= without:
                return candidate
        return {**config, "fast_fir": "none"}

    def t4_fields(self, key: Mapping[str, Any]) -> dict[str, Any]:
        return {"filter_width": key["filter_width"], "rank": key["rank"]}

    def render(self, config: Config, problem: Problem, values: Any = None) -> KernelVariant:
        """`values`: the (row_taps, column_taps) a literal kernel is compiled for
        (default: the problem's seeded taps, the ones it is verified and timed with)."""
        assert isinstance(problem, SeparableProblem)
        if values is None and literal_taps(config):
            values = problem.taps()
        return generate(
            config,
            problem.filter_width,
            problem.rank,
            self.space,
            values,
            dtype=problem.dtype,
            out_dtype=problem.out_dtype,
            border=problem.border,
            anchor=problem.anchor_tap,
        )

    def arguments(self, variant: KernelVariant, problem: Problem, buffers: Mapping[str, Any]) -> tuple:
        assert isinstance(problem, SeparableProblem)
        assert not variant.later_launches, "a two-launch kernel's arguments are its steps'"
        sizes = (problem.in_width, problem.in_height, problem.out_width, problem.out_height)
        taps = (buffers["row_taps"], buffers["column_taps"])
        arguments = (buffers["input"], *taps, buffers["output"], *(np.int32(n) for n in sizes))
        if problem.same:
            return (*arguments, np.float32(buffers.get("border_value", 0.0)))
        return arguments

    def steps(self, variant: KernelVariant, problem: Problem, buffers: Mapping[str, Any]) -> list[Step]:
        """One launch, or with passes = 2 the row pass into the `rows` scratch buffer and
        the column pass from it (render.kernel_parameters)."""
        if not variant.later_launches:
            return super().steps(variant, problem, buffers)
        assert isinstance(problem, SeparableProblem)
        row_pass, column_pass = variant.launches
        sizes = (problem.in_width, problem.in_height, problem.out_width, problem.out_height)
        in_width, in_height, out_width, out_height = (np.int32(n) for n in sizes)
        # 'same' output: both kernels take the border value last
        border_value = (np.float32(buffers.get("border_value", 0.0)),) if problem.same else ()
        row_arguments = (
            buffers["input"],
            buffers["row_taps"],
            buffers["rows"],
            in_width,
            in_height,
            out_width,
        )
        column_arguments = (
            buffers["rows"],
            buffers["column_taps"],
            buffers["output"],
            in_height,
            out_width,
            out_height,
        )
        return [
            Step(
                row_pass.kernel_name,
                row_pass.global_size((problem.out_width, scratch_rows(problem))),
                row_pass.local_size,
                (*row_arguments, *border_value),
            ),
            Step(
                column_pass.kernel_name,
                column_pass.global_size((problem.out_width, problem.out_height)),
                column_pass.local_size,
                (*column_arguments, *border_value),
            ),
        ]

    def scratch(self, variant: KernelVariant, problem: Problem) -> dict[str, int]:
        """passes = 2: every term's row-pass values of every image row, as floats, rows
        `scratch_pitch` apart."""
        if not variant.later_launches:
            return {}
        assert isinstance(problem, SeparableProblem)
        return {"rows": 4 * problem.rank * scratch_rows(problem) * scratch_pitch(problem.out_width)}

    def serves_any_data(self, config: Config) -> bool:
        return not literal_taps(config)

    def any_data_twin(self, config: Config, problem: Problem, device: object) -> Config:
        twin = {**config, "tap_space": "constant"}
        if self.violations(twin, problem, device):
            twin["tap_space"] = "global"
        return twin

    def fallback(self, problem: Problem, device: object) -> Config:
        """The space's fallback (staging its input tile for 'same' output), its work-group
        halved until the device accepts it."""
        config = super().fallback(problem, device)
        if getattr(problem, "same", False):
            config["cache_input"] = True
        return shrink_work_group(config, lambda c: bool(self.violations(c, problem, device)))

    def manifest_fields(self, variant: KernelVariant) -> dict[str, Any]:
        key = variant.render_key
        border = key.get("border", "none")
        return {
            "filter_width": key["filter_width"],
            "rank": key["rank"],
            "dtype": key.get("dtype", "float32"),
            "out_dtype": key.get("out_dtype", "float32"),
            # none: 'valid' output; else 'same' output (in_width, in_height = out_width,
            # out_height), the image read past its edge this way
            "border": border,
            # 'same' output: the filter tap over each output pixel, in x and y
            **({"anchor": key["anchor"]} if border != "none" else {}),
            # True: the taps are in the source and the tap arguments are ignored.
            "taps_compiled_in": literal_taps(variant.config),
            **self._launch_fields(variant, border),
        }

    @staticmethod
    def _launch_fields(variant: KernelVariant, border: str) -> dict[str, Any]:
        """How a host runs it: one kernel, or (passes = 2) two in order with the scratch
        buffer between them; each with its parameters as the source declares them."""
        key = variant.render_key
        dtypes = (key.get("dtype", "float32"), key.get("out_dtype", "float32"))
        parameters = kernel_parameters(variant.config, *dtypes, border)
        if not variant.later_launches:
            return {
                "arguments": parameters[variant.kernel_name],
                "launch": LAUNCH,
            }
        row_pass, column_pass = variant.launches
        return {
            "scratch": {
                "rows": "rank * scratch_rows * pitch floats, scratch_rows = in_height (+ filter_width - 1 "
                "for 'same' output), pitch = out_width rounded up to a multiple of 4; made by the host, "
                "written by the first launch"
            },
            "launches": [
                {
                    "kernel_name": launch.kernel_name,
                    "local_size": list(launch.local_size),
                    "work_per_item": list(launch.work_per_item),
                    "extent": extent,
                    "arguments": parameters[launch.kernel_name],
                }
                for launch, extent in (
                    (row_pass, ["out_width", "scratch_rows"]),
                    (column_pass, ["out_width", "out_height"]),
                )
            ],
            "launch": "each launch in order on one queue: "
            "global[d] = roundup(ceil(extent[d] / work_per_item[d]), local_size[d])",
        }

    def export_stem(self, variant: KernelVariant) -> str:
        key = variant.render_key
        stem = f"separable_f{key['filter_width']}_r{key['rank']}"
        if "border" not in key:
            return stem
        stem += f"_{key['dtype']}_{key['out_dtype']}_{key['border']}"
        anchor = key.get("anchor", key["filter_width"] // 2)
        return stem if anchor == key["filter_width"] // 2 else f"{stem}_anchor{anchor}"


SEPARABLE = Separable()

__all__ = ["SEPARABLE", "Separable", "SeparableProblem"]
