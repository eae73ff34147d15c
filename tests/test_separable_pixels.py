"""The separable family on real images: pixel types read and written by the kernel,
'same' output with every border (read while the input tile is staged), anchors.

Kernels are verified by the measuring worker on a seeded sample; `convolve()` with the
separable form is compared with cv2.filter2D and scipy.ndimage, on host and device
arrays; the CLI tunes and exports such kinds.
"""

import json
import random
import re

import cv2
import numpy as np
import pyopencl.array as cl_array
import pytest
import scipy.ndimage as ndi

import autotune
from autotune.evaluate import Evaluator
from autotune.families.image import CV2_BORDERS
from autotune.families.separable import SEPARABLE, SeparableProblem
from tests.conftest import FAST, cli_json, device_vectors, run_cli
from tests.test_pixels import NO_DB

SAMPLE = random.Random(41)
CASES = [
    (
        SAMPLE.choice(["uint8", "uint16", "int16", "float16", "float32", "float64"]),
        SAMPLE.choice([False, True]),
        SAMPLE.choice(["none", "constant", "replicate", "reflect", "mirror", "wrap"]),
        SAMPLE.choice([1, 2, 3, 4, 5, 8, 9]),
        SAMPLE.choice([1, 2, 3]),
        SAMPLE.choice([(1, 1), (5, 3), (13, 7), (37, 19)]),
        seed,
    )
    for seed in range(24)
]


@pytest.fixture(scope="module")
def separable_evaluator():
    with Evaluator(0, SEPARABLE, policy=FAST, timeout_s=60) as evaluator:
        yield evaluator


def _config(rng: random.Random, problem: SeparableProblem) -> dict:
    while True:
        config = {name: rng.choice(knob.values) for name, knob in SEPARABLE.space.knobs.items()}
        config["local_x"], config["local_y"] = min(config["local_x"], 16), min(config["local_y"], 16)
        config = device_vectors(config, problem.dtype, problem.out_dtype)
        if not SEPARABLE.violations(config, problem):
            return config


@pytest.mark.parametrize("dtype,same_out,border,width,rank,size,seed", CASES)
def test_random_separable_kernels_of_any_pixels_verify(
    separable_evaluator, dtype, same_out, border, width, rank, size, seed
):
    rng = random.Random(seed)
    anchor = rng.randrange(width) if border != "none" else -1
    out_dtype = dtype if same_out else "float32"
    problem = SeparableProblem(
        width, rank, *size, dtype, seed=seed, out_dtype=out_dtype, border=border, anchor=anchor
    )
    config = _config(rng, problem)
    result = separable_evaluator.measure(SEPARABLE.render(config, problem), problem)
    assert result.status.value == "ok", f"{config} {problem.key()}: {result.error}"


def _stream_config(rng: random.Random) -> dict:
    x_vector = rng.choice([4, 8, 16])
    config = {"stream_rows": rng.choice([16, 32, 64]), "x_vector": x_vector}
    config |= {"work_x": x_vector * rng.choice([1, 2, 4]), "tap_space": rng.choice(["constant", "literal"])}
    return config | {"local_x": rng.choice([1, 2]), "local_y": rng.choice([1, 2])}


def _two_launch_config(rng: random.Random) -> dict:
    work_x = rng.choice([1, 2, 4, 8])
    config = {"passes": 2, "work_x": work_x, "work_y": rng.choice([1, 2, 4, 8, 16])}
    config |= {
        "row_columns": rng.choice(["strided", "contiguous"]),
        "tap_space": rng.choice(["constant", "literal"]),
    }
    if work_x % 4 == 0:
        config["column_vector"] = rng.choice([1, 4])
        if config["row_columns"] == "contiguous":
            config["row_loads"] = rng.choice([1, 4])
    return config | {"local_x": rng.choice([1, 2, 4, 8]), "local_y": rng.choice([1, 2, 4])}


# Forms with code paths for windows inside the image and past its edges: a config maker,
# and how much to grow the sample's sizes so there are windows inside it too.
def _stream_accumulators_config(rng: random.Random) -> dict:
    x_vector = rng.choice([4, 8, 16])
    config = {"stream_rows": rng.choice([16, 32, 64]), "x_vector": x_vector, "column_accumulators": True}
    config |= {"work_x": x_vector, "tap_space": rng.choice(["constant", "literal"])}  # F x 1 vectors
    return config | {"local_x": rng.choice([1, 2]), "local_y": rng.choice([1, 2])}


FORMS = {
    "streaming": (_stream_config, (41, 5)),
    "streaming, accumulators": (_stream_accumulators_config, (41, 5)),
    "two launches": (_two_launch_config, (41, 23)),
}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype,same_out,border,width,rank,size,seed", CASES[:14])
def test_streaming_and_two_launch_kernels_of_any_pixels_verify(
    separable_evaluator, form, dtype, same_out, border, width, rank, size, seed
):
    """The streaming and two-launch forms on the same sample: strips or windows at the
    image edge read through the border (streaming: from a copied line), those inside it
    read whole vectors or plain values of the pixel type."""
    make_config, grow = FORMS[form]
    rng = random.Random(seed)
    anchor = rng.randrange(width) if border != "none" else -1
    out_dtype = dtype if same_out else "float32"
    size = (size[0] + grow[0], size[1] + grow[1])
    problem = SeparableProblem(
        width, rank, *size, dtype, seed=seed, out_dtype=out_dtype, border=border, anchor=anchor
    )
    config = SEPARABLE.space.complete(device_vectors(make_config(rng), dtype, out_dtype))
    assert not SEPARABLE.violations(config, problem)
    result = separable_evaluator.measure(SEPARABLE.render(config, problem), problem)
    assert result.status.value == "ok", f"{config} {problem.key()}: {result.error}"


def _verified(evaluator, config: dict, border: str, dtype: str, width: int, rank: int, size: tuple):
    """Render `config` for a problem of these pixels (the filter centred for 'same'),
    check that it verifies, and return the variant and problem."""
    anchor = -1 if border == "none" else width // 2
    problem = SeparableProblem(
        width, rank, *size, dtype, seed=width, out_dtype=dtype, border=border, anchor=anchor
    )
    assert not SEPARABLE.violations(config, problem), SEPARABLE.violations(config, problem)
    variant = SEPARABLE.render(config, problem)
    result = evaluator.measure(variant, problem)
    assert result.status.value == "ok", f"{config} {problem.key()}: {result.error}"
    return variant, problem


def _measured_as(evaluator, variant, source: str, problem):
    """The measuring worker's result for `variant` with its source replaced."""
    assert source != variant.source
    return evaluator.measure(type(variant)(**{**variant.__dict__, "source": source}), problem)


# (border, pixel type, filter width, rank, output size, knobs) for `column_accumulators`:
# strips of one and two vectors, walks of fewer rows than F and of a multiple of F, the
# last strip's outputs past the image's right edge, an even width.
ACCUMULATOR_CASES = [
    ("none", "float32", 5, 1, (45, 37), {"x_vector": 8, "work_x": 16, "stream_rows": 16}),
    ("mirror", "uint8", 3, 2, (70, 9), {"x_vector": 16, "work_x": 16, "stream_rows": 32}),
    ("constant", "float16", 4, 1, (23, 3), {"x_vector": 4, "work_x": 8, "stream_rows": 16}),
    ("reflect", "uint16", 9, 3, (40, 90), {"x_vector": 4, "work_x": 4, "stream_rows": 16}),
]


@pytest.mark.parametrize("border,dtype,width,rank,size,changes", ACCUMULATOR_CASES)
def test_streams_that_sum_outputs_in_registers_verify(
    separable_evaluator, border, dtype, width, rank, size, changes
):
    """`column_accumulators`: each row-pass row is added to the F output rows it feeds,
    kept in registers. It verifies; with one tap added to the wrong output row it fails."""
    changes = device_vectors(changes, dtype, dtype)
    config = SEPARABLE.space.complete({"column_accumulators": True, "local_x": 1, "local_y": 1} | changes)
    variant, problem = _verified(separable_evaluator, config, border, dtype, width, rank, size)
    broken = variant.source.replace("acc_0_0 += ", "acc_1_0 += ", 1)  # the first row's tap 0
    wrong = _measured_as(separable_evaluator, variant, broken, problem)
    assert wrong.status.value == "wrong_result", wrong.error


PREFETCH_CASES = [
    ("none", "float32", 1, {"local_x": 16, "local_y": 2, "work_y": 4, "tiles_down": 8}),
    ("constant", "uint8", 2, {"local_x": 8, "local_y": 4, "work_y": 2, "tiles_down": 4}),
    ("replicate", "float16", 1, {"row_columns": "transposed", "row_window": 4, "row_loads": 4}),
    ("reflect", "uint16", 3, {"local_x": 4, "local_y": 8, "work_x": 2, "tiles_down": 2}),
    ("mirror", "uint8", 1, {"row_columns": "transposed", "work_x": 2, "row_window": 8, "row_loads": 4}),
    ("wrap", "int16", 2, {"row_columns": "contiguous", "work_x": 2, "tiles_down": 8}),
]


@pytest.mark.parametrize("border,dtype,rank,changes", PREFETCH_CASES)
def test_tiles_that_read_the_next_tiles_rows_ahead_verify(separable_evaluator, border, dtype, rank, changes):
    """`prefetch`: the rows tile step + 1 adds are read while step filters, through the
    border where that tile reaches past the image (its first and last groups, its left and
    right columns) and straight from it elsewhere; walks end past the last row or inside it."""
    config = {"cache_input": True, "local_x": 4, "local_y": 4, "work_y": 4, "tiles_down": 4, "prefetch": True}
    config = SEPARABLE.space.complete(config | changes)
    anchor = -1 if border == "none" else rank
    pixels = {"out_dtype": dtype, "border": border, "anchor": anchor}
    problem = SeparableProblem(5, rank, 45, 70, dtype, seed=rank, **pixels)
    assert not SEPARABLE.violations(config, problem), SEPARABLE.violations(config, problem)
    variant = SEPARABLE.render(config, problem)
    assert "next_0 = " in variant.source
    result = separable_evaluator.measure(variant, problem)
    assert result.status.value == "ok", f"{config} {problem.key()}: {result.error}"


# (border, pixel type, filter width, rank, output size, knobs, whether some work-group reads
# whole vectors): rows 4-pixel aligned inside the image with an anchor that is a multiple
# of 4, and widths, anchors or images that never are.
STAGE_VECTOR_CASES = [
    ("none", "float32", 5, 1, (64, 70), {"tiles_down": 4, "prefetch": True}, True),
    ("none", "float32", 5, 2, (64, 70), {"tiles_down": 8, "prefetch": True}, True),
    ("none", "uint16", 9, 2, (64, 40), {"tiles_down": 4, "prefetch": True}, True),
    ("reflect", "int16", 9, 1, (48, 45), {"tiles_down": 2}, True),
    ("wrap", "float64", 9, 1, (52, 37), {"tiles_down": 4, "prefetch": True}, True),
    ("replicate", "float16", 9, 2, (64, 37), {}, True),
    ("mirror", "uint8", 17, 1, (76, 45), {"tiles_down": 2, "prefetch": True}, True),
    ("none", "uint8", 3, 2, (45, 33), {"tiles_down": 2}, False),
    ("constant", "uint16", 4, 1, (40, 21), {"tiles_down": 2, "prefetch": True}, False),
    ("wrap", "float64", 9, 1, (3, 90), {"tiles_down": 4, "prefetch": True}, False),
]
# The vector reads of every pixel type, as the template writes them after an `=`.
VECTOR_READ = re.compile(
    r"= (\*\(__global const float4 \*\)\(input \+ |vload_half4\(0, input \+ "
    r"|convert_float4\(\*\(__global const \w+4 \*\)\(input \+ )"
)


@pytest.mark.parametrize("border,dtype,width,rank,size,changes,vectors", STAGE_VECTOR_CASES)
def test_tiles_staged_in_vectors_of_four_pixels_verify(
    separable_evaluator, border, dtype, width, rank, size, changes, vectors
):
    """`stage_vectors`: a work-group whose staged columns lie inside the image and start
    aligned reads them as vectors; the others (the image's edges, unaligned widths, a
    filter's anchor off a multiple of 4) fill each vector pixel by pixel, through the border
    for 'same'. The kernel with its vector reads off by 7 fails where they run and passes
    where none does."""
    config = {"cache_input": True, "row_columns": "transposed", "row_window": 4, "row_loads": 4}
    config |= {"local_x": 4, "local_y": 4, "work_y": 4, "stage_vectors": True}
    config = SEPARABLE.space.complete(config | changes)
    variant, problem = _verified(separable_evaluator, config, border, dtype, width, rank, size)
    off = VECTOR_READ.sub(lambda m: "= 7.0f + " + m.group(1), variant.source)
    result = _measured_as(separable_evaluator, variant, off, problem)
    assert result.status.value == ("wrong_result" if vectors else "ok"), result.error


# (filter width, rank, knobs): each work-item moves rows ly, ly + local_y, ... of its own
# columns; F - 1 = 7 rows by 2 (the last row by half the group), 16 rows of 8 columns by
# one row of work-items (a loop: more than 64 values), transposed rows of 2 columns.
MOVE_CASES = [
    (8, 2, {"local_x": 4, "local_y": 2, "work_y": 4, "tiles_down": 4}),
    (17, 1, {"local_x": 4, "local_y": 1, "work_x": 8, "work_y": 16, "tiles_down": 2}),
    (9, 3, {"row_columns": "transposed", "work_x": 2, "row_window": 4, "tiles_down": 4, "prefetch": True}),
]


@pytest.mark.parametrize("width,rank,changes", MOVE_CASES)
def test_walks_move_the_shared_rows_and_verify(separable_evaluator, width, rank, changes):
    """A walk's next tile starts from the F - 1 row-pass rows moved up from the last one:
    the kernel verifies, and with the moved rows read one row too high it does not."""
    config = {"cache_input": True, "local_x": 8, "local_y": 4, "work_y": 2} | changes
    config = SEPARABLE.space.complete(config)
    problem = SeparableProblem(width, rank, 37, 75, "float32", seed=width)
    assert not SEPARABLE.violations(config, problem), SEPARABLE.violations(config, problem)
    variant = SEPARABLE.render(config, problem)
    assert separable_evaluator.measure(variant, problem).status.value == "ok"
    moved = "+ LOCAL_Y * WORK_Y) * ROWS_PITCH"
    broken = variant.source.replace(moved, "+ LOCAL_Y * WORK_Y - 1) * ROWS_PITCH")
    assert broken != variant.source and ("for (int r = ly;" in broken) == (width == 17)
    wrong = separable_evaluator.measure(type(variant)(**{**variant.__dict__, "source": broken}), problem)
    assert wrong.status.value == "wrong_result"


# (border, pixel type, filter width, rank, output size, knobs) for `stage_new_rows`: the
# step before the first tile's whole (F - 1 = local_y * work_y) or partly above it
# (F - 1 < local_y * work_y; for 'valid' above the image), with and without prefetch, rows
# transposed and contiguous, walks ending inside the image and past it.
NEW_ROWS_CASES = [
    ("none", "float32", 17, 1, (40, 70), {"local_y": 4, "work_y": 4, "prefetch": True}),
    ("mirror", "uint8", 10, 2, (45, 53), {"local_y": 2, "work_y": 8, "prefetch": True}),
    ("constant", "float16", 3, 1, (37, 90), {"local_y": 2, "work_y": 4}),
    ("wrap", "float32", 5, 3, (64, 41), {"row_columns": "contiguous", "local_y": 4, "work_y": 1}),
    ("none", "uint16", 9, 2, (33, 29), {"work_x": 2, "row_window": 8, "prefetch": True}),
    ("none", "float32", 4, 1, (20, 75), {"local_x": 8, "local_y": 2, "work_y": 4}),
]


@pytest.mark.parametrize("border,dtype,width,rank,size,changes", NEW_ROWS_CASES)
def test_walks_that_stage_only_the_new_rows_verify(
    separable_evaluator, border, dtype, width, rank, size, changes
):
    """`stage_new_rows`: the staged tile holds a step's new input rows, and the walk starts
    a step early for the first tile's shared rows. It verifies; walks that start on the
    first tile, or stage each step's rows one row low, fail."""
    config = {"cache_input": True, "row_columns": "transposed", "row_window": 4, "row_loads": 4}
    config |= {"local_x": 4, "local_y": 4, "work_y": 4, "stage_vectors": True, "tiles_down": 4}
    config = SEPARABLE.space.complete(config | {"stage_new_rows": True} | changes)
    variant, problem = _verified(separable_evaluator, config, border, dtype, width, rank, size)
    for old, new in (("int step = -1;", "int step = 0;"), ("FILTER_WIDTH - 1 + r", "FILTER_WIDTH + r")):
        wrong = _measured_as(separable_evaluator, variant, variant.source.replace(old, new), problem)
        assert wrong.status.value == "wrong_result", (old, wrong.status, wrong.error)


@pytest.mark.parametrize("border,width,size", [("mirror", 9, (48, 70)), ("none", 5, (44, 70))])
def test_walks_that_stage_only_the_new_rows_read_whole_vectors_and_verify(
    separable_evaluator, border, width, size
):
    """`stage_new_rows` where a work-group's columns are read as whole vectors (rows of 48
    pixels, an anchor of 4): the staged rows and the next tile's prefetched rows start F - 1
    rows below the tile; either read one row lower fails."""
    config = {"cache_input": True, "row_columns": "transposed", "row_window": 4, "row_loads": 4}
    config |= {"local_x": 4, "local_y": 2, "work_x": 4, "work_y": 4, "stage_vectors": True, "tiles_down": 4}
    config = SEPARABLE.space.complete(config | {"stage_new_rows": True, "prefetch": True})
    variant, problem = _verified(separable_evaluator, config, border, "float32", width, 1, size)
    vector_read = "*(__global const float4 *)(input + "

    def staged_lower(line: str) -> str:  # the staged tile's vector reads one row lower
        return line.replace("FILTER_WIDTH - 1 + r", "FILTER_WIDTH + r") if vector_read in line else line

    lines = variant.source.split("\n")
    for broken in (
        "\n".join(staged_lower(line) for line in lines),
        re.sub(r"(next_g?y0 \+ FILTER_WIDTH) - 1\) \* in_width", r"\1) * in_width", variant.source),
    ):
        wrong = _measured_as(separable_evaluator, variant, broken, problem)
        assert wrong.status.value == "wrong_result", (wrong.status, wrong.error)


# (border, pixel type, filter width, rank, output size, knobs) for `paired_terms`: pairs in
# walks (with and without stage_new_rows, prefetch) and in single tiles, a lone last term
# (rank 3) in its own tile and in the .x parts of the pairs' tile, contiguous and
# transposed rows.
PAIRING_WALK = {"cache_input": True, "row_columns": "transposed", "row_window": 4, "row_loads": 4}
PAIRING_WALK |= {"local_x": 4, "local_y": 4, "work_y": 2, "stage_vectors": True, "tiles_down": 4}
PAIRING_WALK |= {"tap_space": "literal"}  # small walks staged in vectors, the pairings' base
PAIRED_CASES = [
    ("none", "float32", 9, 2, (40, 70), {"stage_new_rows": True, "prefetch": True, "work_y": 4}),
    ("mirror", "uint8", 6, 3, (45, 53), {"local_y": 2, "work_y": 4}),
    ("constant", "float16", 5, 2, (37, 19), {"tiles_down": 1, "row_columns": "contiguous"}),
    ("wrap", "float32", 3, 3, (30, 41), {"tiles_down": 1, "work_x": 2, "row_window": 8}),
    ("none", "uint16", 7, 4, (33, 29), {"row_columns": "contiguous", "prefetch": True}),
]


@pytest.mark.parametrize("border,dtype,width,rank,size,changes", PAIRED_CASES)
def test_terms_paired_in_float2_rows_verify(separable_evaluator, border, dtype, width, rank, size, changes):
    """`paired_terms`: two terms' row-pass values side by side in one `__local` tile. It
    verifies; with a pair's values swapped in the row pass, or the column pass reading one
    term's part for both, it fails."""
    config = SEPARABLE.space.complete(PAIRING_WALK | {"paired_terms": True} | changes)
    variant, problem = _verified(separable_evaluator, config, border, dtype, width, rank, size)
    swapped = variant.source.replace("(float2)(sum_0, pair_sum_0)", "(float2)(pair_sum_0, sum_0)")
    one_part = re.sub(r"(\* u_\d+)\.y;", r"\1.x;", variant.source)
    _each_fails(separable_evaluator, variant, problem, (swapped, one_part))


def _each_fails(evaluator, variant, problem, sources) -> None:
    """Each of these sources in place of the variant's is measured as a wrong result."""
    for broken in sources:
        wrong = _measured_as(evaluator, variant, broken, problem)
        assert wrong.status.value == "wrong_result", (wrong.status, wrong.error)


# (border, pixel type, filter width, rank, output size, knobs) for `column_pairs`: walks
# (with stage_new_rows and prefetch) and single tiles, windows of contiguous and transposed
# rows, two pairs a work-item, tiles past the right edge at odd and even widths.
UNSTAGED = {"tiles_down": 1, "row_columns": "contiguous", "row_loads": 1, "stage_vectors": False}
COLUMN_PAIR_CASES = [
    ("none", "float32", 9, 1, (41, 70), {"stage_new_rows": True, "prefetch": True, "work_y": 4}),
    ("mirror", "uint8", 6, 1, (45, 53), {"local_y": 2, "work_y": 4}),
    ("constant", "float16", 5, 1, (38, 19), UNSTAGED),
    ("wrap", "float32", 3, 2, (30, 41), {"tiles_down": 1, "work_x": 4, "row_window": 8}),
    ("none", "uint16", 7, 3, (33, 29), {"row_columns": "contiguous", "prefetch": True}),
]


@pytest.mark.parametrize("border,dtype,width,rank,size,changes", COLUMN_PAIR_CASES)
def test_row_pass_values_in_column_pairs_verify(
    separable_evaluator, border, dtype, width, rank, size, changes
):
    """`column_pairs`: two adjacent columns' row-pass values as one float2. It verifies; with
    a pair's columns swapped in the row pass, or an output pair stored the wrong way round,
    it fails."""
    config = SEPARABLE.space.complete(PAIRING_WALK | {"column_pairs": True, "work_x": 2} | changes)
    variant, problem = _verified(separable_evaluator, config, border, dtype, width, rank, size)
    swapped = variant.source.replace("(float2)(sum_0, sum_1)", "(float2)(sum_1, sum_0)")
    stored = re.sub(r"(acc_\d+_\d+)\.y\b", r"\1.x", variant.source)
    _each_fails(separable_evaluator, variant, problem, (swapped, stored))


# (border, pixel type, filter width, rank, output size, knobs) for `fast_fir`: both passes or
# one, walks and single tiles, odd and even widths, with column_pairs, with paired_terms
# (a lone last term too), windows of work_x columns, carry_rows, tap arguments and taps
# compiled in.
WALK_AHEAD = {"stage_new_rows": True}
WIDE, TAP_ARGUMENTS = {"work_x": 2, "row_window": 8, "work_y": 8}, {"tap_space": "constant"}
UNWINDOWED = {"row_columns": "contiguous", "work_x": 8, "row_window": 0}
UNWINDOWED |= {"row_loads": 1, "stage_vectors": False}
FAST_FIR_CASES = [
    ("none", "float32", 17, 1, (41, 70), WIDE | WALK_AHEAD | {"fast_fir": "both", "local_y": 2}),
    ("mirror", "uint8", 18, 2, (45, 53), WIDE | {"fast_fir": "both", "column_pairs": True}),
    ("constant", "float16", 19, 3, (38, 19), UNSTAGED | WIDE | TAP_ARGUMENTS | {"fast_fir": "columns"}),
    ("wrap", "float32", 20, 3, (30, 41), WIDE | {"fast_fir": "both", "paired_terms": True}),
    ("none", "uint16", 17, 3, (33, 29), WIDE | {"fast_fir": "both", "paired_terms": True, "tiles_down": 1}),
    ("reflect", "float32", 17, 2, (37, 31), UNWINDOWED | {"fast_fir": "both", "work_y": 8, "tiles_down": 1}),
    ("none", "float32", 17, 1, (37, 45), UNWINDOWED | {"fast_fir": "rows", "carry_rows": True, "local_y": 1}),
]


@pytest.mark.parametrize("border,dtype,width,rank,size,changes", FAST_FIR_CASES)
def test_outputs_in_pairs_by_the_fast_fir_algorithm_verify(
    separable_evaluator, border, dtype, width, rank, size, changes
):
    """`fast_fir`: two outputs of a pass from three half-length sums. Each pass it names
    renders its sums (the row pass once per term group, the column pass once per group and
    column); the kernel verifies; with the next pair's
    even-tap sum added instead of subtracted in the first or the last pass, or an input pair
    summed from one input twice, it fails."""
    config = SEPARABLE.space.complete(PAIRING_WALK | changes)
    variant, problem = _verified(separable_evaluator, config, border, dtype, width, rank, size)
    groups = (rank + 1) // 2 if config["paired_terms"] else rank
    columns = config["work_x"] // 2 if config["column_pairs"] else config["work_x"]  # a work-item's
    rows_sums = groups if config["fast_fir"] in ("rows", "both") else 0
    column_sums = groups * columns if config["fast_fir"] in ("columns", "both") else 0
    assert variant.source.count("Two-parallel fast FIR") == rows_sums + column_sums
    subtracted = [m.start() for m in re.finditer(r" - even_\d+", variant.source)]
    first_plus = variant.source[: subtracted[0]] + " + " + variant.source[subtracted[0] + 3 :]
    last_plus = variant.source[: subtracted[-1]] + " + " + variant.source[subtracted[-1] + 3 :]
    one_input = re.sub(r"(pair_\d+ = (\w+_\d+)) \+ \w+_\d+;", r"\1 + \2;", variant.source, count=1)
    assert variant.source not in (first_plus, last_plus, one_input)
    _each_fails(separable_evaluator, variant, problem, (first_plus, last_plus, one_input))


def test_fast_fir_needs_wide_filters_and_many_outputs_a_pass():
    config = SEPARABLE.space.complete(PAIRING_WALK | WIDE | {"fast_fir": "both"})
    problem = SeparableProblem(17, 1, 20, 20, "float32")
    assert not SEPARABLE.violations(config, problem)
    assert not SEPARABLE.violations(config | {"fast_fir": "rows", "work_y": 2, "tiles_down": 1}, problem)
    strided = UNWINDOWED | {"row_columns": "strided", "work_x": 2}  # rows without windows
    assert not SEPARABLE.violations(config | strided | {"fast_fir": "columns"}, problem)
    for refused, refused_problem in [
        (config, SeparableProblem(15, 1, 20, 20, "float32")),  # narrower: it costs as much as it saves
        (config | {"work_y": 4}, problem),  # two pairs a column
        (config | {"fast_fir": "rows", "row_window": 4}, problem),
        (config | {"fast_fir": "rows", "row_columns": "strided", "row_window": 0}, problem),
        (config | {"fast_fir": "columns", "carry_rows": True, "local_y": 1}, problem),
        (config | {"stream_rows": 16}, problem),
    ]:
        assert any("fast_fir" in reason for reason in SEPARABLE.violations(refused, refused_problem)), refused


def test_paired_terms_need_two_terms_and_windows():
    problem = SeparableProblem(5, 1, 20, 20, "float32")
    config = SEPARABLE.space.complete({"paired_terms": True, "row_columns": "contiguous"})
    assert any("paired_terms" in reason for reason in SEPARABLE.violations(config, problem))
    problem = SeparableProblem(5, 2, 20, 20, "float32")
    assert not SEPARABLE.violations(config, problem)
    strided = config | {"row_columns": "strided"}
    assert any("paired_terms" in reason for reason in SEPARABLE.violations(strided, problem))


@pytest.mark.parametrize(
    "changes,pixels",
    [
        ({"row_columns": "transposed", "row_window": 4, "row_loads": 4, "tiles_down": 4}, {}),
        ({"row_columns": "strided", "work_y": 2}, {"dtype": "uint8", "out_dtype": "uint8"}),
        ({"row_columns": "contiguous", "local_y": 1, "work_y": 4, "tiles_down": 4, "carry_rows": True}, {}),
        (
            {"row_columns": "contiguous"},
            {"dtype": "uint8", "out_dtype": "float16", "border": "reflect", "anchor": 1},
        ),
    ],
)
def test_tiles_inside_the_output_store_unchecked_and_verify(separable_evaluator, changes, pixels):
    """A tile wholly inside the output stores without per-output checks (the tiles at the
    right and bottom edges check each output): a wrong index there fails."""
    config = {"cache_input": True, "local_x": 4, "local_y": 4, "work_x": 2} | changes
    config = SEPARABLE.space.complete(config)
    pixels = dict(pixels)
    problem = SeparableProblem(5, 1, 64, 70, pixels.pop("dtype", "float32"), seed=1, **pixels)
    assert not SEPARABLE.violations(config, problem), SEPARABLE.violations(config, problem)
    variant = SEPARABLE.render(config, problem)
    assert separable_evaluator.measure(variant, problem).status.value == "ok"
    first = "const int first = (y0 + ly * WORK_Y) * out_width + x0 + lx;"
    broken = variant.source.replace(first, first.replace("+ lx;", "+ lx + 1;"), 1)
    assert broken != variant.source
    wrong = separable_evaluator.measure(type(variant)(**{**variant.__dict__, "source": broken}), problem)
    assert wrong.status.value == "wrong_result"


@pytest.mark.parametrize("preset_name", ["walk_prefetch", "walk_new_rows"])
def test_the_walk_presets_walk_many_tiles_and_verify(separable_evaluator, preset_name):
    """The presets' 32-row tiles walk 16 down: tall images take them through many steps, one
    walk ending inside the image (300 rows) and one group of a single step (530 rows)."""
    preset = SEPARABLE.space.presets[preset_name].config
    for problem in (
        SeparableProblem(7, 2, 70, 300, "float32", seed=3),
        SeparableProblem(5, 1, 131, 530, "uint8", seed=4, out_dtype="uint8", border="reflect", anchor=1),
    ):
        assert not SEPARABLE.violations(preset, problem)
        result = separable_evaluator.measure(SEPARABLE.render(preset, problem), problem)
        assert result.status.value == "ok", f"{problem.key()}: {result.error}"


@pytest.mark.parametrize("out_dtype", ["uint8", "uint16", "int16"])
@pytest.mark.parametrize("form", ["tiled", *FORMS])
def test_bit_conversion_of_integer_outputs_verifies(separable_evaluator, form, out_dtype):
    """`output_conversion = bits` in every form (the conversion itself: tests/test_pixels.py)."""
    rng = random.Random(len(form) + len(out_dtype))
    problem = SeparableProblem(5, 2, 45, 27, "float32", out_dtype=out_dtype, border="mirror", anchor=1)
    config = FORMS[form][0](rng) if form in FORMS else {"cache_input": True, "local_x": 8, "local_y": 4}
    config = device_vectors(config, "float32", out_dtype)
    config = SEPARABLE.space.complete({**config, "output_conversion": "bits"})
    variant = SEPARABLE.render(config, problem)
    assert "_sat_rte(" not in variant.source  # no built-in conversion left
    result = separable_evaluator.measure(variant, problem)
    assert result.status.value == "ok", f"{config} {problem.key()}: {result.error}"


def test_a_wrong_border_is_caught(separable_evaluator):
    problem = SeparableProblem(5, 1, 17, 11, "uint8", out_dtype="uint8", border="mirror")
    variant = SEPARABLE.render({"cache_input": True, "local_x": 8, "local_y": 4}, problem)
    assert separable_evaluator.measure(variant, problem).status.value == "ok"
    broken = variant.source.replace("2 * n - 2 - i;", "2 * n - 1 - i;", 1)  # mirror read as reflect
    assert broken != variant.source
    wrong = separable_evaluator.measure(type(variant)(**{**variant.__dict__, "source": broken}), problem)
    assert wrong.status.value == "wrong_result"


@pytest.mark.parametrize("border", ["constant", "replicate", "reflect", "mirror", "wrap"])
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "float32"])
def test_separable_convolve_equals_cv2(border, dtype):
    rng = np.random.default_rng(len(border))
    info = np.iinfo(dtype) if dtype != "float32" else None
    image = (
        rng.integers(0, info.max, (29, 41), endpoint=True).astype(dtype)
        if info
        else rng.uniform(-1, 1, (29, 41)).astype(dtype)
    )
    taps = cv2.getGaussianKernel(7, -1)
    filt = (taps @ taps.T).astype(np.float32)
    same_type = dtype != "float32"
    options = {
        "mode": "same",
        "border": border,
        "out_dtype": "same" if same_type else np.float32,
        "db": NO_DB,
    }
    got = autotune.convolve(image, filt, algorithm="separable", **options)
    code = {name: value for value, name in CV2_BORDERS.items()}[border]
    padded = cv2.copyMakeBorder(image, 3, 3, 3, 3, code, value=0)
    expected = cv2.filter2D(padded, -1 if same_type else cv2.CV_32F, filt)[3:-3, 3:-3]
    if same_type:
        assert np.abs(got.astype(np.int64) - expected.astype(np.int64)).max() <= 1
    else:
        np.testing.assert_allclose(got, expected, atol=1e-5)
    convolver = autotune.Convolver(image.shape, filt, dtype=image.dtype, algorithm="separable", **options)
    assert convolver.plan.algorithm == "separable"
    if same_type:
        on_device = convolver(cl_array.to_device(convolver.queue, image)).get()
        np.testing.assert_array_equal(
            on_device, autotune.convolve(image, filt, algorithm="separable", **options)
        )


def test_separable_convolve_flips_even_filters_as_scipy():
    rng = np.random.default_rng(12)
    image = rng.uniform(-1, 1, (23, 18)).astype(np.float32)
    filt = np.outer(rng.uniform(0, 1, 6), rng.uniform(0, 1, 6)).astype(np.float32)
    for mode in ("reflect", "mirror", "nearest", "wrap"):
        got = autotune.convolve(
            image, filt, mode="same", border=mode, flip=True, algorithm="separable", db=NO_DB
        )
        expected = ndi.convolve(image.astype(np.float64), filt.astype(np.float64), mode=mode)
        np.testing.assert_allclose(got, expected, atol=2e-5)
    with pytest.raises(ValueError, match="one tap in x and y"):
        autotune.convolve(image, filt, mode="same", anchor=(1, 2), algorithm="separable", db=NO_DB)


def test_cli_tunes_and_exports_separable_kinds_of_real_images(tmp_path):
    db = f"sqlite:///{tmp_path / 'sep.db'}"
    pixels = ("--dtype", "uint8", "--out-dtype", "same", "--border", "mirror")
    search = run_cli(
        "search",
        "--family",
        "separable",
        "-d",
        "0",
        "-f",
        "5",
        "-s",
        "40x24",
        "--trials",
        "4",
        *pixels,
        "--db",
        db,
    )
    assert search.returncode == 0, search.stderr
    (record,) = cli_json("best", "--family", "separable", "--db", db)["kernels"]
    assert record["problem"] == "F=5,rank=1 uint8->uint8 mirror"
    # 'same' output reads the border while staging the tile, in the streaming form's copied
    # lines, or in two launches where a window passes an edge
    config = record["config"]
    assert config["cache_input"] is True or config["stream_rows"] > 0 or config["passes"] == 2
    export = run_cli("export", "--family", "separable", "-d", "0", "--db", db, "--out", str(tmp_path / "out"))
    assert export.returncode == 0, export.stderr
    manifest = json.loads((tmp_path / "out" / "separable_f5_r1_uint8_uint8_mirror.json").read_text())
    assert (manifest["dtype"], manifest["border"]) == ("uint8", "mirror")
    # one launch, or (passes = 2, which a short search on a CPU may pick) two in order
    launches = manifest.get("launches", [manifest])
    assert len(launches) == (2 if config["passes"] == 2 else 1), manifest
    assert all(launch["arguments"][-1] == "const float border_value" for launch in launches)
    # the tuned kernel is what convolve() runs for such an image when it was measured faster here
    image = np.random.default_rng(3).integers(0, 256, (24, 40), dtype=np.uint8)
    taps = cv2.getGaussianKernel(5, -1)
    plan = autotune.plan(
        image.shape,
        5,
        filter=(taps @ taps.T),
        mode="same",
        border="mirror",
        dtype=np.uint8,
        out_dtype="same",
        db=db,
    )
    assert plan.compared["separable"] is not None, plan.reason
