"""Real images: pixel types, output types and borders, against OpenCV and SciPy.

Kernels run through tests/opencl_runner.py (the documented ABI, plain pyopencl) and
`autotune.convolve()`; results are compared with cv2.filter2D and
scipy.ndimage.correlate / convolve, equal to them after the same rounding: an integer
output may differ by one only where the exact sum lies within float32 rounding of a
half-way point.
"""

import dataclasses
import itertools
import json
import random
from pathlib import Path

import cv2
import numpy as np
import pytest
import scipy.ndimage as ndi

import autotune
from autotune.devices import device_info
from autotune.errors import UsageError
from autotune.families.conv2d import CONV2D, NO_EDGE_ITEMS, Conv2DProblem
from autotune.families.conv2d.problem import tolerance
from autotune.families.image import BORDERS, PIXEL_TYPES, border_name
from tests.conftest import cli_json, device_vectors, run_cli
from tests.opencl_runner import run_pixels_kernel

SPACE = CONV2D.space
SCIPY_MODES = {
    "constant": "constant",
    "replicate": "nearest",
    "reflect": "reflect",
    "mirror": "mirror",
    "wrap": "wrap",
}
CV2_BORDERS = {
    "constant": cv2.BORDER_CONSTANT,
    "replicate": cv2.BORDER_REPLICATE,
    "reflect": cv2.BORDER_REFLECT,
    "mirror": cv2.BORDER_REFLECT_101,
}  # cv2.filter2D has no BORDER_WRAP
SAME_BORDERS = [b for b in BORDERS if b != "none"]
NO_DB = "sqlite://"


def image_of(dtype: str, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    kind = np.dtype(dtype)
    if kind.kind in "iu":
        info = np.iinfo(kind)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(kind)
    return rng.uniform(-1, 1, shape).astype(kind)


def filter_of(width: int, rng: np.random.Generator, out_dtype: str) -> np.ndarray:
    """Mixed signs; summing to 1 for integer output, so most outputs are in range."""
    taps = rng.uniform(-0.25, 1, (width, width))
    if np.dtype(out_dtype).kind in "iu":
        taps /= taps.sum()
    return taps.astype(np.float32)


def scipy_reference(
    image: np.ndarray, filt: np.ndarray, border: str, value: float = 0.0, flip=False, anchor=None
):
    correlate = ndi.convolve if flip else ndi.correlate
    origin = 0 if anchor is None else anchor - filt.shape[0] // 2
    image, filt = image.astype(np.float64), filt.astype(np.float64)
    return correlate(image, filt, mode=SCIPY_MODES[border], cval=value, origin=origin)


def assert_matches(
    got: np.ndarray, exact: np.ndarray, image: np.ndarray, filt: np.ndarray, what: str
) -> None:
    """`got` (of its own dtype) equals the float64 `exact` after the same rounding."""
    error = tolerance(image.astype(np.float64), filt)
    if got.dtype.kind in "iu":
        info = np.iinfo(got.dtype)
        rounded = np.clip(np.rint(exact), info.min, info.max)
        difference = np.abs(got.astype(np.float64) - rounded)
        halfway = np.abs(np.abs(exact - np.floor(exact)) - 0.5) <= error
        bad = (difference > 1) | ((difference == 1) & ~halfway)
        assert not bad.any(), f"{what}: got {got[bad][:5]}, exact {exact[bad][:5]}"
    else:
        if got.dtype == np.float16:
            error += float(np.abs(exact).max(initial=0)) * 2.0**-11 + 2.0**-24
        difference = np.abs(got.astype(np.float64) - exact)
        assert np.all(np.isfinite(got)), f"{what}: unwritten or non-finite outputs"
        assert difference.max() <= error, f"{what}: max error {difference.max()} > {error}"


def assert_verifies(evaluator, config: dict, problem: Conv2DProblem) -> None:
    """A valid config whose kernel the measuring worker verifies against the reference."""
    assert not CONV2D.violations(config, problem), config
    result = evaluator.measure(CONV2D.render(config, problem), problem)
    assert result.status.value == "ok", f"{config} {problem.key()}: {result.error}"


def random_config(rng: random.Random, problem: Conv2DProblem) -> dict:
    """Without edge work-groups (their own sample below): the edge tiles and staged tiles
    keep the coverage they had."""
    knobs = [(name, knob) for name, knob in SPACE.knobs.items() if name != "border_groups"]
    while True:
        config = {name: rng.choice(knob.values) for name, knob in knobs} | {"border_groups": False}
        config["local_x"], config["local_y"] = min(config["local_x"], 16), min(config["local_y"], 16)
        config = device_vectors(config, problem.dtype, problem.out_dtype)
        if not SPACE.violations(config, problem.key()):
            return config


# A seeded sample of pixel type x output type x border x filter width x image size x
# config, and the edge cases beside it: every border with the tile in __local memory
# and without, every alignment of the anchor with float4 reads, filters larger than
# the image, 1x1 images.
SAMPLE = random.Random(17)
CASES = [
    (
        SAMPLE.choice(list(PIXEL_TYPES)),
        SAMPLE.choice([False, True]),
        SAMPLE.choice(BORDERS),
        SAMPLE.choice([1, 2, 3, 4, 5, 8, 9]),
        SAMPLE.choice([(1, 1), (2, 3), (7, 13), (13, 7), (31, 17), (67, 5)]),
        seed,
    )
    for seed in range(40)
]


@pytest.mark.parametrize("dtype,same_out,border,width,size,seed", CASES)
def test_random_kernels_match_scipy(dtype, same_out, border, width, size, seed):
    out_dtype = dtype if same_out else "float32"
    rng = np.random.default_rng(seed)
    out_w, out_h = size
    grow = 0 if border != "none" else width - 1
    image = image_of(dtype, (out_h + grow, out_w + grow), rng)
    filt = filter_of(width, rng, out_dtype)
    problem = Conv2DProblem(width, out_w, out_h, dtype, out_dtype=out_dtype, border=border)
    config = random_config(random.Random(seed), problem)
    variant = CONV2D.render(config, problem, values=filt)
    got = run_pixels_kernel(variant, image, filt, np.dtype(out_dtype), same=border != "none")
    if border == "none":
        exact = scipy_reference(image, filt, "constant")[width // 2 :, width // 2 :][:out_h, :out_w]
    else:
        exact = scipy_reference(image, filt, border)
    assert_matches(got, exact, image, filt, f"{config} {dtype}->{out_dtype} {border} F={width} {size}")


@pytest.mark.parametrize("border", SAME_BORDERS)
@pytest.mark.parametrize("cache_local", [False, True])
@pytest.mark.parametrize("width,anchor", [(3, 1), (4, 2), (4, 1), (5, 0), (7, 3), (9, 4), (6, 5)])
def test_borders_with_float4_reads_at_every_anchor(border, cache_local, width, anchor):
    """Anchors 0 to 5 put the rows a work-item reads at every alignment; pitches 0, 2
    and 3 mod 4."""
    rng = np.random.default_rng(width)
    for out_w in (24, 26, 27):
        image = image_of("uint8", (19, out_w), rng)
        filt = filter_of(width, rng, "uint8")
        problem = Conv2DProblem(width, out_w, 19, "uint8", out_dtype="uint8", border=border, anchor=anchor)
        config = {"filter_mode": "define", "image_vector": 4, "work_x": 4, "work_y": 2, "local_x": 4}
        config |= {"local_y": 4, "cache_local": cache_local, "unroll": "full" if width > 4 else 2}
        variant = CONV2D.render(config, problem)
        got = run_pixels_kernel(variant, image, filt, np.dtype("uint8"), same=True, border_value=7.0)
        exact = scipy_reference(image, filt, border, 7.0, anchor=anchor)
        assert_matches(got, exact, image, filt, f"{border} {out_w}")


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "float32"])
@pytest.mark.parametrize("border", list(CV2_BORDERS))
def test_convolve_equals_cv2_filter2d(dtype, border):
    """ddepth=-1 (the image's type) and ddepth=CV_32F, odd and even widths, awkward sizes.
    Each case takes an odd width (1, 3, 7) and an even one (4, 2) in turn, so the widths
    meet every border and type across the cases without each case compiling all of them."""
    rng = np.random.default_rng(3)
    turn = list(CV2_BORDERS).index(border) + ["uint8", "uint16", "int16", "float32"].index(dtype)
    widths = [(1, 3, 7)[turn % 3], (4, 2)[turn % 2]]
    for width, (h, w) in itertools.product(widths, [(1, 1), (5, 3), (23, 41)]):
        image = image_of(dtype, (h, w), rng)
        filt = filter_of(width, rng, dtype)
        for out_dtype, depth in (("same", -1), (np.float32, cv2.CV_32F)):
            ours = autotune.convolve(image, filt, mode="same", border=border, out_dtype=out_dtype, db=NO_DB)
            theirs = cv2.filter2D(image, depth, filt, borderType=CV2_BORDERS[border])
            assert ours.dtype == theirs.dtype
            what = f"{dtype} {border} F={width} {h}x{w} ddepth={depth}"
            if ours.dtype.kind in "iu":
                difference = np.abs(ours.astype(np.int64) - theirs.astype(np.int64))
                exact = scipy_reference(image, filt, border)
                halfway = np.abs(np.abs(exact - np.floor(exact)) - 0.5) <= tolerance(
                    image.astype(float), filt
                )
                assert np.all((difference == 0) | ((difference == 1) & halfway)), what
            else:
                limit = tolerance(image.astype(np.float64), filt) * 2
                assert np.abs(ours.astype(np.float64) - theirs).max() <= limit, what


@pytest.mark.parametrize("border", SAME_BORDERS)
@pytest.mark.parametrize("flip", [False, True])
def test_convolve_equals_scipy_for_every_border(border, flip):
    """Filters wider than the image too (the border repeats past a whole image)."""
    rng = np.random.default_rng(5)
    for width, (h, w) in itertools.product([2, 3, 6, 11], [(1, 1), (1, 7), (4, 3), (29, 17)]):
        image = image_of("float32", (h, w), rng)
        filt = filter_of(width, rng, "float32")
        ours = autotune.convolve(
            image, filt, mode="same", border=border, border_value=-2.5, flip=flip, db=NO_DB
        )
        exact = scipy_reference(image, filt, border, -2.5, flip)
        assert_matches(ours, exact, image, filt, f"{border} flip={flip} F={width} {h}x{w}")


@pytest.mark.parametrize("algorithm", ["direct", "separable"])
def test_a_pixel_that_is_not_finite_reaches_every_output_whose_window_holds_it(algorithm):
    """Each output is the sum of every tap's product (cv2.filter2D's documented formula),
    so an infinite or NaN pixel under a zero tap gives NaN (0 x inf): Sobel's middle
    column here. scipy.ndimage and cv2.filter2D's direct path leave zero taps out of the
    sum, and give a finite value or +-inf there instead (README); elsewhere all agree."""
    sobel = np.outer([1, 2, 1], [-1, 0, 1]).astype(np.float32)
    image = np.random.default_rng(4).uniform(-1, 1, (9, 11)).astype(np.float32)
    image[3, 4], image[6, 8] = np.inf, np.nan
    got = autotune.convolve(image, sobel, mode="same", border="mirror", algorithm=algorithm, db=NO_DB)
    window = np.zeros(image.shape, bool)  # outputs whose 3x3 window holds a pixel that is not finite
    window[2:5, 3:6] = window[5:8, 7:10] = True
    assert np.isnan(got[2:5, 4]).all() and np.isnan(got[5:8, 7:10]).all()
    assert (got[2:5, 3] == np.inf).all() and (got[2:5, 5] == -np.inf).all()
    exact = scipy_reference(image, sobel, "mirror")
    np.testing.assert_allclose(got[~window], exact[~window], atol=2e-5)
    assert np.isfinite(exact[2:5, 4]).all()  # SciPy's sum leaves the zero taps out: finite where ours is NaN


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16"])
def test_integer_output_saturates_and_rounds_to_nearest_even(dtype):
    info = np.iinfo(dtype)
    image = np.array([[info.max, info.min, 3, 5, 1]], dtype=dtype)
    for gain, expected in (
        (2.0, [info.max, info.min, 6, 10, 2]),
        (0.5, [info.max // 2 + 0.5, info.min / 2, 1.5, 2.5, 0.5]),
    ):
        got = autotune.convolve(image, np.array([[gain]], np.float32), out_dtype="same", db=NO_DB)
        want = np.clip(np.rint(np.array(expected, dtype=np.float64)), info.min, info.max).astype(dtype)
        assert got.dtype == np.dtype(dtype)
        assert np.array_equal(got[0], want), (got, want)
    negative = autotune.convolve(image, np.array([[-1.0]], np.float32), out_dtype="same", db=NO_DB)
    assert negative[0, 0] == max(info.min, -int(info.max)) and negative[0, 1] == min(info.max, -int(info.min))


@pytest.mark.parametrize("out_dtype", ["uint8", "uint16", "int16"])
@pytest.mark.parametrize(
    "layout",
    [
        {"x_vector": 8, "work_x": 8, "work_y": 2},  # vector stores, lanes one by one at the edge
        {"image_vector": 4, "work_x": 4},  # float4 stores
        {"work_x": 2, "cache_local": True, "filter_mode": "define"},  # checked scalar stores
    ],
)
def test_bit_conversion_rounds_and_saturates_as_the_builtin(out_dtype, layout):
    """A 1x1 filter of 1 passes each float through unchanged, so every output is the
    conversion alone: half-way values, values just past either end, NaN (0, as OpenCL's
    saturating conversions say) and infinities."""
    info = np.iinfo(out_dtype)
    rng = np.random.default_rng(5)
    edges = [info.min, info.max]
    special = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 127.5]
    special += [e + d for e in edges for d in (-1.5, -1.0, -0.5, -0.49999997, 0.0, 0.49999997, 0.5, 1.0, 1.5)]
    image = rng.uniform(info.min - 300, info.max + 300, (7, 43)).astype(np.float32)
    halves = rng.random(image.shape) < 0.3
    image[halves] = np.floor(image[halves]) + 0.5
    image.flat[: len(special)] = special
    problem = Conv2DProblem(1, 43, 7, "float32", out_dtype=out_dtype)
    with np.errstate(invalid="ignore"):
        want = np.clip(np.nan_to_num(np.rint(image.astype(np.float64)), nan=0.0), info.min, info.max)
    for conversion in ("builtin", "bits"):
        config = {"local_x": 2, "local_y": 2, **layout, "output_conversion": conversion}
        variant = CONV2D.render(config, problem, values=np.ones((1, 1), np.float32))
        assert ("_sat_rte(" in variant.source) == (conversion == "builtin")
        got = run_pixels_kernel(variant, image, np.ones((1, 1), np.float32), np.dtype(out_dtype))
        bad = got != want.astype(out_dtype)
        if conversion == "builtin" and out_dtype == "int16":  # PoCL 3.0's vector form: NaN -> -32768
            bad &= ~np.isnan(image)
        assert not bad.any(), f"{conversion} {layout}: {image[bad][:6]} gave {got[bad][:6]}"


@pytest.mark.parametrize(
    "preset", [n for n, p in SPACE.presets.items() if p.config["output_conversion"] == "bits"]
)
@pytest.mark.parametrize("width,size", [(1, (1, 1)), (3, (37, 23)), (5, (70, 9)), (9, (19, 40))])
def test_presets_for_integer_outputs_match_scipy(preset, width, size):
    rng = np.random.default_rng(width)
    image = image_of("uint8", (size[1], size[0]), rng)
    filt = filter_of(width, rng, "uint8")
    problem = Conv2DProblem(width, *size, "uint8", out_dtype="uint8", border="mirror", anchor=width // 2)
    config = device_vectors(SPACE.presets[preset].config, "uint8", "uint8")
    assert not SPACE.violations(config, problem.key(), device_info(0))
    got = run_pixels_kernel(
        CONV2D.render(config, problem, values=filt), image, filt, np.dtype("uint8"), same=True
    )
    assert_matches(got, scipy_reference(image, filt, "mirror"), image, filt, f"{preset} F={width} {size}")


# Presets for narrow pixels on GPUs (their `when`): verified here on PoCL by the measuring
# worker, 'valid' and 'same', one and three channels, on sizes smaller than their tiles.
GPU_NARROW_PRESETS = sorted(n for n, p in SPACE.presets.items() if "dtype" in p.when)


@pytest.mark.parametrize("preset", GPU_NARROW_PRESETS)
@pytest.mark.parametrize(
    "dtype,border,channels,width,size",
    [
        ("uint8", "none", 1, 9, (37, 23)),
        ("uint8", "mirror", 3, 5, (70, 9)),
        ("uint16", "reflect", 1, 4, (1, 1)),
        ("int16", "none", 3, 3, (129, 67)),
        ("uint8", "constant", 1, 17, (19, 40)),
    ],
)
def test_gpu_presets_for_narrow_pixels_verify_against_the_reference(
    evaluator, preset, dtype, border, channels, width, size
):
    problem = Conv2DProblem(width, *size, dtype, out_dtype=dtype, border=border, channels=channels)
    config = SPACE.presets[preset].config
    if config["border_groups"] and border == "none":  # edge work-groups are for 'same' output
        assert SPACE.violations(config, problem.key(), device_info(0))
        return
    if config["work_x"] % 3 == 0 and channels != 3:  # tiles of whole pixels of three channels
        assert SPACE.violations(config, problem.key(), device_info(0))
        return
    if config["channel_items"] and (channels == 1 or border != "none" and not config["border_groups"]):
        assert SPACE.violations(config, problem.key(), device_info(0))
        return
    assert not SPACE.violations(config, problem.key(), device_info(0))
    result = evaluator.measure(CONV2D.render(config, problem), problem)
    assert result.status.value == "ok", f"{preset} {problem.key()}: {result.error}"


# Tiles of whole pixels of three channels (`work_x` 3, 6, 12, 24 values): every border
# and 'valid', read through the __local tile and from __global with scalar, float2 and
# float4 reads, at every anchor column, on sizes narrower than one tile and prime ones.
PIXEL_TILE_SAMPLE = random.Random(43)
PIXEL_TILE_CASES = [
    (
        work_x,
        PIXEL_TILE_SAMPLE.choice(["none", *SAME_BORDERS]),
        PIXEL_TILE_SAMPLE.choice([1, 2, 3, 4, 5, 9]),
        PIXEL_TILE_SAMPLE.choice([(1, 1), (2, 3), (7, 13), (13, 7), (31, 17), (67, 5)]),
        seed,
    )
    for seed, work_x in enumerate([3, 6, 12, 24] * 4)
]


@pytest.mark.parametrize("work_x,border,width,size,seed", PIXEL_TILE_CASES)
def test_tiles_of_whole_pixels_verify_against_the_reference(evaluator, work_x, border, width, size, seed):
    rng = random.Random(seed)
    dtype = rng.choice(list(PIXEL_TYPES))
    anchor = {"anchor": rng.randrange(width)} if border != "none" else {}
    problem = Conv2DProblem(
        width, *size, dtype, seed=seed, out_dtype=rng.choice([dtype, "float32"]), border=border, channels=3,
        **anchor,
    )  # fmt: skip
    vectors = [v for v in (1, 2, 4) if work_x % v == 0]
    config = SPACE.complete({
        "filter_mode": "define",
        "filter_space": rng.choice(["constant", "literal"]),
        "unroll": rng.choice([1, 2, "full"]),
        "work_x": work_x,
        "work_y": rng.choice([1, 2, 4]),
        "local_x": rng.choice([2, 4, 8]),
        "local_y": rng.choice([1, 2, 4]),
        "image_vector": vectors[seed % len(vectors)],
        "cache_local": seed % 2 == 1,
    })  # fmt: skip
    assert_verifies(evaluator, config, problem)


# Work-items of one channel's pixels (`channel_items`): 2, 3 and 4 channels, rows whose
# pixels fill no whole block (the last values one at a time), sizes narrower than one
# work-item, every pixel type, rolled and unrolled taps.
CHANNEL_ITEM_SAMPLE = random.Random(47)
CHANNEL_ITEM_CASES = [
    (
        channels,
        CHANNEL_ITEM_SAMPLE.choice([1, 2, 4, 8]),
        CHANNEL_ITEM_SAMPLE.choice([1, 2, 3, 5, 9]),
        CHANNEL_ITEM_SAMPLE.choice([(1, 1), (2, 3), (7, 13), (13, 7), (31, 17), (67, 5), (32, 9)]),
        seed,
    )
    for seed, channels in enumerate([2, 3, 4] * 5)
]


def _channel_items_config(rng: random.Random, work_x: int, literal: bool, **fields) -> dict:
    """A seeded config of work-items of one channel: rolled or unrolled taps, group shapes;
    `literal`: taps compiled in where the width is."""
    config = SPACE.complete({
        "filter_mode": rng.choice(["define", "arg"]),
        "unroll": rng.choice([1, 2, 4]),
        "work_x": work_x,
        "work_y": rng.choice([1, 2, 4]),
        "local_x": rng.choice([1, 2, 4, 8]),
        "local_y": rng.choice([1, 2, 4]),
        "channel_items": True,
        **fields,
    })  # fmt: skip
    if config["filter_mode"] == "define" and literal:
        config |= {"filter_space": "literal", "unroll": "full"}
    return config


@pytest.mark.parametrize("channels,work_x,width,size,seed", CHANNEL_ITEM_CASES)
def test_work_items_of_one_channel_verify_against_the_reference(
    evaluator, channels, work_x, width, size, seed
):
    rng = random.Random(seed)
    dtype = rng.choice(list(PIXEL_TYPES))
    problem = Conv2DProblem(
        width, *size, dtype, seed=seed, out_dtype=rng.choice([dtype, "float32"]), channels=channels,
        frames=rng.choice([1, 1, 2]),
    )  # fmt: skip
    config = _channel_items_config(rng, work_x, literal=seed % 2 == 1)
    assert_verifies(evaluator, config, problem)


# Work-items of one channel with 'same' output: the edge outputs in work-groups of their
# own, the interior box counted in blocks of work_x pixels of every channel; every
# border, anchors, sizes narrower than a block, thinner than the filter, and prime.
GROUPED_CHANNEL_ITEM_SAMPLE = random.Random(53)
GROUPED_CHANNEL_ITEM_CASES = [
    (
        channels,
        GROUPED_CHANNEL_ITEM_SAMPLE.choice(SAME_BORDERS),
        GROUPED_CHANNEL_ITEM_SAMPLE.choice([1, 2, 4, 8]),
        GROUPED_CHANNEL_ITEM_SAMPLE.choice([(1, 1), (3, 3), (2, 5), (5, 2), (9, 9), (3, 7)]),
        GROUPED_CHANNEL_ITEM_SAMPLE.choice([(1, 1), (2, 3), (7, 13), (13, 7), (31, 17), (67, 5), (40, 40)]),
        seed,
    )
    for seed, channels in enumerate([2, 3, 4, 3] * 3)
]


@pytest.mark.parametrize("channels,border,work_x,shape,size,seed", GROUPED_CHANNEL_ITEM_CASES)
def test_work_items_of_one_channel_with_edge_groups_verify_against_the_reference(
    evaluator, channels, border, work_x, shape, size, seed
):
    rows, width = shape
    rng = random.Random(seed)
    dtype = rng.choice(list(PIXEL_TYPES))
    problem = Conv2DProblem(
        width, *size, dtype, seed=seed, out_dtype=rng.choice([dtype, "float32"]), border=border,
        channels=channels, frames=rng.choice([1, 1, 2]), filter_height=rows, anchor=rng.randrange(width),
        anchor_y=rng.randrange(rows),
    )  # fmt: skip
    config = _channel_items_config(rng, work_x, literal=seed % 2 == 1, border_groups=True)
    assert_verifies(evaluator, config, problem)


@pytest.mark.parametrize("border", ["mirror", "constant"])
def test_work_items_of_one_channel_with_edge_groups_equal_scipy_through_the_manifest(border):
    """Launched from the manifest's `border_groups` rule with its `tile_values` (a block of
    work_x pixels of every channel), every channel against scipy.ndimage on its plane."""
    rng = np.random.default_rng(5)
    for channels, width, anchor, work_x in ((3, 3, 1, 8), (3, 5, 4, 4), (2, 9, 2, 2), (4, 4, 0, 4)):
        image = image_of("uint8", (29, 37, channels), rng)
        filt = filter_of(width, rng, "uint8")
        problem = Conv2DProblem(
            width, 37, 29, "uint8", out_dtype="uint8", border=border, anchor=anchor, channels=channels
        )
        config = {"filter_mode": "define", "work_x": work_x, "work_y": 2, "local_x": 4, "local_y": 2}
        config |= {"unroll": "full", "channel_items": True, "border_groups": True}
        variant = CONV2D.render(config, problem)
        manifest = CONV2D.manifest_fields(variant)
        assert manifest["tile_values"] == work_x * channels
        got = run_pixels_kernel(
            variant, image, filt, np.dtype("uint8"), same=True, border_value=7.0, manifest=manifest
        )
        for channel in range(channels):
            plane = image[:, :, channel]
            exact = scipy_reference(plane, filt, border, 7.0, anchor=anchor)
            assert_matches(
                got[:, :, channel], exact, plane, filt, f"{channels}ch {border} F={width} {anchor}"
            )


@pytest.mark.parametrize("channels", [2, 3, 4])
def test_work_items_of_one_channel_equal_scipy_through_the_manifest_launch(channels):
    """Launched as a host program would (the family's launch rule, no extra rows), on rows
    whose pixels fill whole blocks and rows with a remainder; each channel against
    scipy.ndimage on its own plane."""
    rng = np.random.default_rng(channels)
    for width, (out_w, out_h), work_x in ((3, (32, 9), 8), (5, (37, 11), 4), (9, (13, 6), 2)):
        image = image_of("uint8", (out_h + width - 1, out_w + width - 1, channels), rng)
        filt = filter_of(width, rng, "uint8")
        problem = Conv2DProblem(width, out_w, out_h, "uint8", out_dtype="uint8", channels=channels)
        config = {"filter_mode": "define", "work_x": work_x, "work_y": 2, "local_x": 4, "local_y": 2}
        variant = CONV2D.render({**config, "unroll": "full", "channel_items": True}, problem)
        got = run_pixels_kernel(variant, image, filt, np.dtype("uint8")).reshape(out_h, out_w, channels)
        for channel in range(channels):
            plane = image[:, :, channel]
            exact = scipy_reference(plane, filt, "constant")[width // 2 :, width // 2 :][:out_h, :out_w]
            assert_matches(got[:, :, channel], exact, plane, filt, f"{channels} channels F={width} {out_w}")


def test_work_items_of_one_channel_are_for_interleaved_channels_with_valid_output_or_edge_groups():
    base = SPACE.complete({"filter_mode": "define", "work_x": 4, "channel_items": True})
    same = {"filter_width": 5, "channels": 3, "border": "mirror"}
    assert SPACE.violations(base, {"filter_width": 5, "channels": 3}) == []
    assert SPACE.violations({**base, "border_groups": True}, same) == []
    for problem in ({"filter_width": 5}, same):
        assert SPACE.violations(base, problem)
    for change in ({"image_vector": 4}, {"cache_local": True}, {"work_x": 12}):
        assert SPACE.violations({**base, **change}, {"filter_width": 5, "channels": 3}), change


def test_a_search_measures_the_narrow_pixel_presets_first_only_where_they_apply(tmp_path):
    """The loop queues a preset only where its `when` holds: a device that reads as a GPU
    (one lane) measures the GPU layouts for uint8 among its presets, PoCL as itself does
    not. (Both measure on PoCL, where those layouts are valid too.)"""
    from autotune.store import Store, config_key
    from autotune.tune import Budget, Tuner

    problem = Conv2DProblem(3, 24, 16, "uint8", out_dtype="uint8")
    narrow = {config_key(p.config): n for n, p in SPACE.presets.items() if "dtype" in p.when}
    cpu = device_info(0)
    gpu = dataclasses.replace(cpu, type="GPU", native_vector_width=1)
    measured = {}
    for label, device in (("gpu", gpu), ("cpu", cpu)):
        store = Store(f"sqlite:///{tmp_path / (label + '.db')}")
        try:
            tuner = Tuner(store, 0, device, CONV2D, [problem], sampler="random", budget=Budget(trials=14))
            tuner.run()
            trials = store.trials(run_id=tuner.run_id)
            measured[label] = {
                narrow[t.config_key] for t in trials if t.origin == "preset" and t.config_key in narrow
            }
            presets = min(9, len(CONV2D.presets_for(problem, device)))  # each a search here measures
            assert sum(t.origin == "preset" for t in trials) >= presets, label
        finally:
            store.close()
    assert measured == {"gpu": {"gpu_narrow_bytes", "gpu_narrow_staged", "gpu_gray_bytes_8x8"}, "cpu": set()}


def test_a_config_lent_to_a_float_output_writes_with_the_builtin_conversion():
    """A CPU winner of a uint8 -> uint8 kind (they take `bits`) still serves a uint8 ->
    float32 kind, in both families: only the conversion changes."""
    from autotune.families.separable import SEPARABLE, SeparableProblem

    cpu = dataclasses.replace(device_info(0), widest_vector_bytes=128)  # the presets' 16 lanes
    for family, integer, floating in (
        (CONV2D, Conv2DProblem(3, 32, 24, "uint8", out_dtype="uint8"), Conv2DProblem(3, 32, 24, "uint8")),
        (
            SEPARABLE,
            SeparableProblem(3, 1, 32, 24, "uint8", out_dtype="uint8"),
            SeparableProblem(3, 1, 32, 24, "uint8"),
        ),
    ):
        preset = next(
            p.config for p in family.space.presets.values() if p.config["output_conversion"] == "bits"
        )
        assert family.adapt_related(preset, integer, cpu) == preset
        lent = family.adapt_related(preset, floating, cpu)
        assert lent == {**preset, "output_conversion": "builtin"}, family.name
        assert not family.violations(lent, floating, cpu)


def test_bit_conversion_is_only_for_integer_outputs_on_devices_with_simd_lanes():
    problem = Conv2DProblem(3, 16, 16, "uint8", out_dtype="float32")
    config = SPACE.complete({"output_conversion": "bits"})
    cpu = device_info(0)  # PoCL: SIMD lanes
    integer_out = dataclasses.replace(problem, out_dtype="int16").key()
    assert SPACE.violations(config, problem.key(), cpu)
    assert not SPACE.violations(config, integer_out, cpu)
    gpu = dataclasses.replace(cpu, native_vector_width=1)  # one lane per work-item
    assert SPACE.violations(config, integer_out, gpu)
    for float_out in ("float16", "float64"):
        assert SPACE.violations(config, dataclasses.replace(problem, out_dtype=float_out).key(), cpu)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_nan_and_inf_pass_through_in_float_types(dtype):
    image = np.zeros((9, 9), dtype=dtype)
    image[2, 2], image[6, 6] = np.nan, np.inf
    got = autotune.convolve(
        image, np.ones((3, 3), np.float32), mode="same", border="mirror", out_dtype="same", db=NO_DB
    )
    assert got.dtype == np.dtype(dtype)
    assert np.isnan(got[1:4, 1:4]).all() and np.isinf(got[5:8, 5:8]).all()
    assert np.isfinite(got[0, 5:]).all() and (got[0, 5:] == 0).all()


def test_float64_is_read_as_it_is_and_other_integers_run_as_float32_in_their_type():
    rng = np.random.default_rng(9)
    filt = filter_of(3, rng, "float32")
    image64 = rng.uniform(-1, 1, (12, 10))
    options = {"mode": "same", "border": "reflect", "out_dtype": "same", "db": NO_DB}
    # PoCL has double precision: the kernel reads and writes float64 itself
    assert autotune.plan(image64.shape, 3, dtype=np.float64, **options).problem.dtype == "float64"
    got = autotune.convolve(image64, filt, **options)
    assert got.dtype == np.float64
    assert_matches(
        got.astype(np.float32), scipy_reference(image64, filt, "reflect"), image64, filt, "float64"
    )
    # the documented bound: (rows * F + 2) * 2^-24 * sum|filter| * max|image| of the float64 result
    exact = scipy_reference(image64, filt, "reflect")
    bound = (filt.size + 2) * 2.0**-24 * np.abs(filt).sum() * np.abs(image64).max()
    assert np.abs(got - exact).max() <= bound
    image32 = rng.integers(-100, 100, (12, 10)).astype(np.int32)
    got = autotune.convolve(image32, filt / filt.sum(), out_dtype=-1, db=NO_DB)
    assert got.dtype == np.int32 and got.shape == (10, 8)
    # big-endian data (FITS, say) reads as the same numbers
    native = autotune.convolve(image64, filt, **options)
    swapped = autotune.convolve(image64.astype(">f8"), filt, **options)
    assert swapped.dtype == np.dtype(">f8") and np.array_equal(swapped, native)  # the image's dtype
    wide = rng.integers(0, 65535, (12, 10)).astype(np.uint16)
    same_out = {**options, "border": "mirror"}
    assert np.array_equal(
        autotune.convolve(wide.astype(">u2"), filt, **same_out), autotune.convolve(wide, filt, **same_out)
    )
    # a Convolver reading float64 as it is still refuses values past float32's range
    convolver = autotune.Convolver(image64.shape, filt, dtype=np.float64, **options)
    assert np.array_equal(convolver(image64), native)
    with pytest.raises(ValueError, match="beyond float32's range"):
        convolver(np.where(image64 > 0.9, 1e300, image64))
    # the separable form reads and writes float64 too
    gauss = np.outer([1.0, 2.0, 1.0], [1.0, 2.0, 1.0]) / 16
    got = autotune.convolve(image64, gauss, algorithm="separable", **options)
    assert got.dtype == np.float64
    assert np.abs(got - scipy_reference(image64, gauss, "reflect")).max() <= 1e-6


def test_argument_errors_come_before_the_device_is_opened():
    with pytest.raises(ValueError, match="image is empty"):
        autotune.convolve(np.zeros((0, 0), np.float32), np.ones((3, 3)), device=7, db=NO_DB)
    with pytest.raises(ValueError, match="mode must be"):
        autotune.convolve(np.zeros((8, 8), np.uint8), np.ones((3, 3)), mode="full", device=7, db=NO_DB)


def test_float64_on_a_device_without_double_precision_converts_on_the_host():
    """A device without cl_khr_fp64 gets float32 pixels: the rule keeps float64 kernels off
    it, and a call converts on the host and casts the result back."""
    from autotune.call_arguments import as_pixels, pixels_of

    problem = Conv2DProblem(3, 40, 24, "float64", out_dtype="float64", border="mirror")
    config = dict(SPACE.fallback.config)
    device = {"max_work_group_size": 1024, "max_work_item_sizes": [1024, 1024, 64],
              "local_mem_size": 65536, "max_constant_buffer_size": 65536}  # fmt: skip
    assert any("double precision" in v for v in SPACE.violations(config, problem.key(), device))
    assert not SPACE.violations(config, problem.key(), {**device, "double_precision": True})
    without = pixels_of(np.float64, "same", "same", "mirror", double_precision=False)
    assert (without.dtype, without.out_dtype, without.result) == ("float32", "float32", np.float64)
    with_double = pixels_of(np.float64, "same", "same", "mirror", double_precision=True)
    assert (with_double.dtype, with_double.out_dtype) == ("float64", "float64")
    image = np.linspace(0, 1, 12).reshape(3, 4)
    assert as_pixels(image).dtype == np.float32
    assert as_pixels(image, double_precision=True).dtype == np.float64


@pytest.mark.parametrize(
    "image,filt,options,message",
    [
        (np.zeros((8, 8), np.uint8), np.ones((3, 3), np.complex64), {}, "filter must hold real numbers"),
        (np.zeros((8, 8, 5), np.uint8), np.ones((3, 3)), {}, "C from 1 to 4 channels"),
        (np.zeros((8, 8), np.uint8), np.ones((0, 0)), {}, "filter is empty"),
        (
            np.zeros((8, 8), np.uint8),
            np.ones((3, 3)),
            {"mode": "same", "border": "bogus"},
            "border must be one of",
        ),
        (np.zeros((8, 8), np.uint8), np.ones((3, 3)), {"out_dtype": np.int16}, "out_dtype must be"),
        (np.zeros((8, 8), np.uint8), np.ones((3, 3)), {"mode": "full"}, "mode must be"),
    ],
)
def test_bad_combinations_get_one_clear_error(image, filt, options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        autotune.convolve(image, filt, db=NO_DB, **options)


def test_border_names_of_opencv_and_scipy():
    assert (
        border_name(cv2.BORDER_REFLECT_101) == border_name("reflect_101") == border_name("mirror") == "mirror"
    )
    assert border_name("nearest") == border_name(cv2.BORDER_REPLICATE) == "replicate"
    assert border_name("BORDER_REFLECT") == border_name("symmetric") == "reflect"
    assert border_name(cv2.BORDER_WRAP) == border_name("grid-wrap") == "wrap"
    with pytest.raises(ValueError):
        border_name("none")


def test_keys_of_float32_valid_problems_are_unchanged():
    """Problems stored before pixel types and borders keep their keys (and so their tuned rows)."""
    assert Conv2DProblem(5, 64, 32).key() == {
        "filter_width": 5,
        "out_width": 64,
        "out_height": 32,
        "dtype": "float32",
    }
    problem = Conv2DProblem(5, 64, 32, "uint8", out_dtype="uint8", border="mirror")
    assert CONV2D.problem(problem.key()) == problem
    assert CONV2D.problem(Conv2DProblem(5, 64, 32).key()) == Conv2DProblem(5, 64, 32)
    with pytest.raises(UsageError, match="border must be"):
        Conv2DProblem(5, 64, 32, border="sideways")


def test_measured_problem_verifies_integer_output(evaluator):
    """The measuring path verifies a uint8 'same' kernel against its reference, and
    catches one that writes the wrong thing."""
    problem = Conv2DProblem(3, 45, 29, "uint8", out_dtype="uint8", border="mirror")
    variant = CONV2D.render({"work_x": 2, "work_y": 2, "local_x": 8, "local_y": 8}, problem)
    assert evaluator.measure(variant, problem).status.value == "ok"
    broken = variant.source.replace("x0 - ANCHOR_X;", "x0 - ANCHOR_X + 1;", 1)
    assert broken != variant.source
    wrong = evaluator.measure(type(variant)(**{**variant.__dict__, "source": broken}), problem)
    assert wrong.status.value == "wrong_result"


@pytest.fixture(scope="module")
def pixels_db(tmp_path_factory):
    """A real search of a uint8 'same' problem with a mirror border, and of float32 'valid'."""
    path = tmp_path_factory.mktemp("db") / "pixels.db"
    common = ("-d", "0", "-s", "40x24", "--trials", "6", "--sampler", "random", "--db", f"sqlite:///{path}")
    for extra in (
        ("-f", "3", "--dtype", "uint8", "--out-dtype", "same", "--border", "reflect_101"),
        ("-f", "5"),
    ):
        result = run_cli("search", *common, *extra)
        assert result.returncode == 0, result.stderr
    return f"sqlite:///{path}"


def test_search_best_and_export_know_pixel_types_and_borders(pixels_db, tmp_path):
    tuned = cli_json("best", "--db", pixels_db)["kernels"]
    assert {k["problem"] for k in tuned} == {"F=3 uint8->uint8 mirror", "F=5"}
    (kernel,) = cli_json(
        "best",
        "-d",
        "0",
        "-f",
        "3",
        "--dtype",
        "uint8",
        "--out-dtype",
        "same",
        "--border",
        "mirror",
        "--db",
        pixels_db,
    )["kernels"]
    assert kernel["fallback"] == "exact" and kernel["border"] == "mirror" and kernel["dtype"] == "uint8"
    # a kind never tuned borrows the same width's kernel of other pixels or border
    (related,) = cli_json(
        "best", "-d", "0", "-f", "5", "--dtype", "uint16", "--border", "wrap", "--db", pixels_db
    )["kernels"]
    assert related["fallback"] == "related_kind"
    out = tmp_path / "kernels"
    manifest = _export_uint8_mirror(pixels_db, out)
    assert (manifest["dtype"], manifest["out_dtype"], manifest["border"]) == ("uint8", "uint8", "mirror")
    assert manifest["arguments"][-1] == "const float border_value" and manifest["anchor"] == 1
    # a host that knows only the manifest runs it, and gets cv2's answer
    variant = _manifest_variant(out, manifest)
    rng = np.random.default_rng(1)
    image = image_of("uint8", (33, 47), rng)
    filt = filter_of(3, rng, "uint8")
    got = run_pixels_kernel(variant, image, filt, np.dtype("uint8"), same=True, manifest=manifest)
    theirs = cv2.filter2D(image, -1, filt, borderType=cv2.BORDER_REFLECT_101)
    assert np.abs(got.astype(int) - theirs.astype(int)).max() <= 1
    header = run_cli(
        "export", "-d", "0", "-f", "3", "--dtype", "uint8", "--out-dtype", "same", "--border", "mirror",
        "--format", "header", "--out", str(tmp_path / "h"), "--db", pixels_db,
    )  # fmt: skip
    assert header.returncode == 0, header.stderr
    text = (tmp_path / "h" / "autotune_kernels.h").read_text()
    assert '"uint8",\n    "uint8",\n    "mirror",\n    1,\n    1,\n' in text  # looked up by kind


def test_convolve_runs_the_kernel_tuned_for_its_pixels(pixels_db):
    choice = autotune.plan(
        (24, 40), 3, dtype=np.uint8, out_dtype="same", mode="same", border="mirror", db=pixels_db
    )
    assert choice.level == "exact" and choice.problem.border == "mirror"
    rng = np.random.default_rng(2)
    image = image_of("uint8", (24, 40), rng)
    filt = filter_of(3, rng, "uint8")
    ours = autotune.convolve(image, filt, mode="same", border="mirror", out_dtype="same", db=pixels_db)
    theirs = cv2.filter2D(image, -1, filt)
    assert ours.dtype == np.uint8 and np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1


def make_best_use_edge_groups(db: str, border: str = "mirror", changes: dict | None = None) -> dict:
    """The best kernel of the (first) kind with this border, with its edge outputs given
    work-groups of their own (and `changes`), stored as a trial and made the best (a GPU
    search would find it; on the CPU the search seldom keeps it)."""
    import sqlalchemy as sa

    from autotune.store import Best, ProblemRow, Store, Trial
    from autotune.store.models import config_key

    store = Store(db)
    try:
        with store.session() as s:
            best, row = next(
                (b, p)
                for b, p in s.execute(
                    sa.select(Best, ProblemRow).join(ProblemRow, Best.problem_id == ProblemRow.id)
                )
                if json.loads(p.key).get("border") == border
            )
            trial = s.get(Trial, best.trial_id)
        config = {**json.loads(trial.config), "border_groups": True, "cache_local": False, **(changes or {})}
        problem = CONV2D.problem(json.loads(row.key))
        assert not CONV2D.violations(config, problem)
        fields = {c.name: getattr(trial, c.name) for c in Trial.__table__.columns if c.name != "id"}
        fields |= {
            "number": trial.number + 1000,
            "config": json.dumps(config),
            "config_key": config_key(config),
        }
        fields["kernel_sha"] = CONV2D.render(config, problem).fingerprint
        grouped = store.add_trial(**fields)
        store.set_best(best.device_id, best.problem_id, grouped, grouped.time_ms / 2)
    finally:
        store.close()
    return config


def test_a_stored_kernel_with_edge_groups_runs_everywhere(pixels_db, tmp_path):
    """convolve(), a Convolver (whole and in chunks of rows) and an exported kernel run by
    a host that knows only the manifest all give cv2's answer."""
    db_path = tmp_path / "groups.db"
    db_path.write_bytes(Path(pixels_db.removeprefix("sqlite:///")).read_bytes())
    db = f"sqlite:///{db_path}"
    make_best_use_edge_groups(db)
    options = {"mode": "same", "border": "mirror", "out_dtype": "same", "db": db}
    choice = autotune.plan((24, 40), 3, dtype=np.uint8, **options)
    assert choice.level == "exact" and choice.config["border_groups"] is True
    rng = np.random.default_rng(8)
    filt = filter_of(3, rng, "uint8")
    for shape in ((24, 40), (37, 61)):
        image = image_of("uint8", shape, rng)
        theirs = cv2.filter2D(image, -1, filt).astype(int)
        assert np.abs(autotune.convolve(image, filt, **options).astype(int) - theirs).max() <= 1
        for chunks in (1, 3):
            convolver = autotune.Convolver(
                shape, filt, dtype=np.uint8, zero_copy=False, chunks=chunks, **options
            )
            assert convolver.plan.config["border_groups"] is True
            assert np.abs(convolver(image).astype(int) - theirs).max() <= 1
    # 'valid' output of the same pixels borrows that kernel without its edge groups
    lent = autotune.plan((24, 40), 3, dtype=np.uint8, out_dtype="same", db=db)
    assert lent.level == "related_kind" and lent.config["border_groups"] is False
    image = image_of("uint8", (26, 42), rng)
    exact = scipy_reference(image, filt, "constant")[1:-1, 1:-1]
    got = autotune.convolve(image, filt, out_dtype="same", db=db)
    assert_matches(got, exact, image, filt, "'valid' output lent a 'same' kernel")
    out = tmp_path / "kernels"
    manifest = _export_uint8_mirror(db, out)
    assert "border_groups" in manifest and manifest["config"]["border_groups"] is True
    variant = _manifest_variant(out, manifest)
    image = image_of("uint8", (33, 47), rng)
    got = run_pixels_kernel(variant, image, filt, np.dtype("uint8"), same=True, manifest=manifest)
    assert np.abs(got.astype(int) - cv2.filter2D(image, -1, filt).astype(int)).max() <= 1


def _export_uint8_mirror(db: str, out: Path) -> dict:
    """`autotune export` of the uint8 mirror F = 3 kernel: its manifest."""
    result = run_cli(
        "export", "-d", "0", "-f", "3", "--dtype", "uint8", "--out-dtype", "same", "--border", "mirror",
        "--out", str(out), "--db", db,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (manifest_path,) = out.glob("*.json")
    return json.loads(manifest_path.read_text())


def _manifest_variant(out: Path, manifest: dict):
    """What a host reads from an exported manifest to launch the kernel."""
    from autotune.families.base import KernelVariant

    anchors = {"anchor": manifest["anchor"], "anchor_y": manifest["anchor_y"]} if "anchor" in manifest else {}
    return KernelVariant(
        (out / manifest["source"]).read_text(),
        manifest["kernel_name"],
        tuple(manifest["local_size"]),
        tuple(manifest["work_per_item"]),
        config={"border_groups": True} if "border_groups" in manifest else {},
        render_key=anchors,
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (("--dtype", "int8"), "Invalid value for '--dtype'"),
        (("--border", "sideways"), "Invalid value for '--border'"),
        (("--family", "separable", "--channels", "3"), "are for the conv2d family"),
    ],
)
def test_pixel_options_refuse_what_they_cannot_do(args, message, tmp_path):
    result = run_cli("search", "-d", "0", "-f", "3", "-s", "16x16", "--trials", "1", *args,
                     "--db", f"sqlite:///{tmp_path / 'x.db'}")  # fmt: skip
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "x.db").exists()


def test_wide_filters_borrowed_for_same_output_stage_their_tile():
    config = CONV2D.space.complete(
        {"filter_mode": "define", "work_x": 4, "work_y": 2, "local_x": 32, "local_y": 4}
    )
    wide = Conv2DProblem(9, 64, 64, border="mirror")
    assert CONV2D.adapt_related(config, wide, None)["cache_local"] is True
    for problem in (Conv2DProblem(5, 64, 64, border="mirror"), Conv2DProblem(9, 64, 64)):
        assert CONV2D.adapt_related(config, problem, None) == config
    # a scalar edge tile takes filters up to 8 rows too: a taller one is staged
    tall = Conv2DProblem(5, 64, 64, border="mirror", filter_height=9)
    assert CONV2D.adapt_related(config, tall, None)["cache_local"] is True


def test_kernels_borrowed_for_same_output_on_a_gpu_give_edges_work_groups():
    """On a GPU up to F = 9 the borrowed kernel's edge outputs get work-groups of their
    own; wider filters stage their tile; a CPU keeps the config it borrowed."""
    config = CONV2D.space.complete(
        {"filter_mode": "define", "work_x": 4, "work_y": 2, "local_x": 32, "local_y": 4}
    )
    cpu = device_info(0)  # PoCL
    gpu = dataclasses.replace(cpu, type="GPU")
    for width in (3, 9):
        problem = Conv2DProblem(width, 64, 64, border="mirror")
        assert CONV2D.adapt_related(config, problem, gpu) == {**config, "border_groups": True}
    assert CONV2D.adapt_related(config, Conv2DProblem(5, 64, 64, border="mirror"), cpu) == config
    wide = CONV2D.adapt_related(config, Conv2DProblem(17, 64, 64, border="mirror"), gpu)
    assert wide["cache_local"] is True and not wide["border_groups"]
    assert CONV2D.adapt_related(config, Conv2DProblem(3, 64, 64), gpu) == config  # 'valid': nothing
    # a 'same' kernel with several outputs an edge work-item, lent to 'valid' output: neither
    valid = Conv2DProblem(5, 64, 64, "uint8", out_dtype="uint8")
    for adjacent in (False, True):
        grouped = {**config, "border_groups": True, "edge_outputs_per_item": 4}
        lent = CONV2D.adapt_related(grouped | {"adjacent_edge_outputs": adjacent}, valid, gpu)
        assert lent == {**config, "border_groups": False} | NO_EDGE_ITEMS
        assert CONV2D.violations(lent, valid, gpu) == []


def test_work_items_of_one_channel_borrowed_for_same_output_stay_valid():
    """A 'valid' RGB kernel of one channel's work-items lent to 'same' output keeps them with
    edge groups (a GPU, F <= 9); elsewhere its tile computes adjacent values."""
    items = CONV2D.space.presets["gpu_rgb_channel_items"].config
    cpu = device_info(0)  # PoCL
    gpu = dataclasses.replace(cpu, type="GPU", native_vector_width=1)
    for width, device, kept in ((9, gpu, True), (11, gpu, False), (9, cpu, False), (5, cpu, False)):
        problem = Conv2DProblem(width, 64, 64, "uint8", out_dtype="uint8", border="mirror", channels=3)
        lent = CONV2D.adapt_related(items, problem, device)
        assert lent["channel_items"] is kept and lent["border_groups"] is kept, (width, device.type)
        assert CONV2D.violations(lent, problem, device) == [], (width, device.type)


def test_a_same_search_on_a_gpu_starts_from_the_valid_winner_with_edge_groups(tmp_path):
    """The warm start lends a related kind's winner as the lookup would (edge work-groups
    on a GPU), then as it is; a CPU gets it as it is."""
    from autotune.store import Store
    from autotune.tune import Tuner

    db = f"sqlite:///{tmp_path / 'warm.db'}"
    pixels = ("--dtype", "uint8", "--out-dtype", "same")
    result = run_cli("search", "-d", "0", "-f", "3", "-s", "40x24", "--trials", "6", *pixels, "--db", db)
    assert result.returncode == 0, result.stderr
    (winner,) = cli_json("best", "--db", db)["kernels"]
    winner = CONV2D.read_config(winner["config"])
    same = Conv2DProblem(3, 40, 24, "uint8", out_dtype="uint8", border="mirror")
    cpu = device_info(0)
    gpu = dataclasses.replace(cpu, type="GPU")
    grouped = CONV2D.adapt_related(winner, same, gpu)
    assert grouped["border_groups"] is True or winner["cache_local"]
    store = Store(db)
    try:
        for device, first in ((gpu, grouped), (cpu, winner)):
            tuner = Tuner(store, 0, device, CONV2D, [same])
            tuner.device_id = store.device_id(device)
            warm = tuner._winners_elsewhere(same)
            assert warm[0] == first and winner in warm
    finally:
        store.close()


def _tiles_cover(problem: Conv2DProblem, config: dict) -> np.ndarray:
    """Which output values the interior tiles of a launch write, tile by tile as the
    kernel's first condition decides (in values along x), found by walking every tile."""
    rows, width = problem.filter_shape
    channels, anchor_x, anchor_y = problem.channels, problem.anchor_column, problem.anchor_row
    values, height = problem.out_width * channels, problem.out_height
    covered = np.zeros((height, values), bool)
    if config.get("channel_items"):
        return _channel_items_cover(problem, config, covered)
    for y0 in range(0, height, config["work_y"]):
        for x0 in range(0, values, config["work_x"]):
            in_x0, in_y0 = x0 - anchor_x * channels, y0 - anchor_y
            if (
                x0 + config["work_x"] <= values
                and y0 + config["work_y"] <= height
                and in_x0 >= 0
                and in_y0 >= 0
                and in_x0 + config["work_x"] + (width - 1) * channels <= values
                and in_y0 + config["work_y"] + rows - 1 <= height
            ):
                covered[y0 : y0 + config["work_y"], x0 : x0 + config["work_x"]] = True
    return covered


def _channel_items_cover(problem: Conv2DProblem, config: dict, covered: np.ndarray) -> np.ndarray:
    """`_tiles_cover` for work-items of one channel's pixels, work-item by work-item: the
    first `blocks` of a row take `work_x` pixels of one channel, the rest no tile."""
    rows, width = problem.filter_shape
    channels, anchor_x, anchor_y = problem.channels, problem.anchor_column, problem.anchor_row
    height, values = covered.shape
    work_x, work_y = config["work_x"], config["work_y"]
    blocks = values // (channels * work_x) * channels
    for y0 in range(0, height, work_y):
        for item in range(blocks):
            block, channel = divmod(item, channels)
            x0 = block * channels * work_x + channel
            in_x0, in_y0 = x0 - anchor_x * channels, y0 - anchor_y
            if (
                y0 + work_y <= height
                and in_x0 >= 0
                and in_y0 >= 0
                and in_x0 + (work_x + width - 2) * channels < values
                and in_y0 + work_y + rows - 1 <= height
            ):
                covered[y0 : y0 + work_y, x0 : x0 + work_x * channels : channels] = True
    return covered


@pytest.mark.parametrize("seed", range(40))
def test_edge_groups_count_every_output_the_tiles_leave(seed):
    """The interior box the host sizes the edge rows by is exactly what the tiles write
    (tiles of adjacent values, and blocks of work-items of one channel each)."""
    from autotune.families.conv2d.geometry import interior_box, tile_values

    rng = random.Random(seed)
    rows, width = rng.choice([(1, 1), (3, 3), (2, 5), (5, 2), (9, 9), (4, 4), (17, 17)])
    problem = Conv2DProblem(
        width, rng.randint(1, 40), rng.randint(1, 40), border="mirror", channels=rng.choice([1, 3]),
        anchor=rng.randrange(width), anchor_y=rng.randrange(rows), filter_height=rows,
    )  # fmt: skip
    config = {"work_x": rng.choice([1, 2, 4, 8]), "work_y": rng.choice([1, 2, 4])}
    config["channel_items"] = problem.channels > 1 and seed % 2 == 1
    covered = _tiles_cover(problem, config)
    values = problem.out_width * problem.channels
    step = tile_values(config, problem.channels)
    box = interior_box(
        values, problem.out_height, (step, config["work_y"]), problem.filter_shape,
        (problem.anchor_column, problem.anchor_row), problem.channels,
    )  # fmt: skip
    assert box.edge_outputs(values, problem.out_height) == int((~covered).sum())
    inside = np.zeros_like(covered)
    inside[box.y0 : box.y0 + box.height, box.x0 : box.x0 + box.width] = True
    assert np.array_equal(inside, covered)


# Edge work-groups (`border_groups`): a seeded sample of pixel type x border x channels x
# filter shape x anchor x size (1x1, thinner than the filter, prime, smaller than a tile)
# x frames, verified by the measuring worker against the float64 reference.
GROUP_SAMPLE = random.Random(31)
# outputs an edge work-item computes, and whether they are adjacent (else edge items apart)
EDGE_ITEMS = [(1, False), (2, False), (4, False), (2, True), (4, True), (8, True), (16, True)]
GROUP_CASES = [
    (
        GROUP_SAMPLE.choice(list(PIXEL_TYPES)),
        GROUP_SAMPLE.choice(SAME_BORDERS),
        GROUP_SAMPLE.choice([1, 1, 2, 3, 4]),
        GROUP_SAMPLE.choice([(1, 1), (3, 3), (2, 5), (5, 2), (4, 4), (9, 9), (3, 7)]),
        GROUP_SAMPLE.choice([(1, 1), (2, 3), (7, 13), (13, 7), (31, 17), (67, 5), (40, 40)]),
        GROUP_SAMPLE.choice([1, 1, 3]),
        seed,
    )
    for seed in range(30)
]


@pytest.mark.parametrize("dtype,border,channels,shape,size,frames,seed", GROUP_CASES)
def test_edge_work_groups_verify_against_the_reference(
    evaluator, dtype, border, channels, shape, size, frames, seed
):
    rows, width = shape
    rng = random.Random(seed)
    problem = Conv2DProblem(
        width, *size, dtype, seed=seed, out_dtype=dtype if seed % 2 else "float32", border=border,
        channels=channels, frames=frames, filter_height=rows, anchor=rng.randrange(width),
        anchor_y=rng.randrange(rows),
    )  # fmt: skip
    while True:
        config = {**random_config(rng, problem), "border_groups": True, "cache_local": False}
        if not CONV2D.violations(config, problem):
            break
    per_item, adjacent = random.Random(seed + 1000).choice(EDGE_ITEMS)
    config |= {"edge_outputs_per_item": per_item, "adjacent_edge_outputs": adjacent}
    if adjacent:  # a row's values in registers: the taps' width compiled in
        config["filter_mode"] = "define"
    assert_verifies(evaluator, config, problem)


@pytest.mark.parametrize("border", SAME_BORDERS)
@pytest.mark.parametrize("channels", [1, 3])
def test_edge_work_groups_equal_scipy_through_the_manifest_launch_rule(border, channels):
    """Run as a host program would from the manifest's `border_groups` rule (not the
    package's own geometry), against scipy.ndimage with a border value, every anchor."""
    rng = np.random.default_rng(channels)
    cases = ((3, 1, 4, False), (4, 0, 2, False), (5, 4, 1, False), (8, 3, 4, False))
    cases += ((3, 2, 8, True), (5, 1, 4, True))  # adjacent outputs an edge work-item
    for width, anchor, per_item, adjacent in cases:
        image = image_of("uint8", (29, 37, channels) if channels > 1 else (29, 37), rng)
        filt = filter_of(width, rng, "uint8")
        problem = Conv2DProblem(
            width, 37, 29, "uint8", out_dtype="uint8", border=border, anchor=anchor, channels=channels
        )
        config = {"filter_mode": "define", "image_vector": 4 if channels == 1 else 1, "work_x": 4}
        config |= {"work_y": 2, "local_x": 4, "local_y": 4, "unroll": "full", "border_groups": True}
        config |= {"edge_outputs_per_item": per_item, "adjacent_edge_outputs": adjacent}
        variant = CONV2D.render(config, problem)
        manifest = CONV2D.manifest_fields(variant)
        assert "border_groups" in manifest and manifest["edge_outputs_per_item"] == per_item
        got = run_pixels_kernel(
            variant, image, filt, np.dtype("uint8"), same=True, border_value=7.0, manifest=manifest
        )
        got, planes = got.reshape(29, 37, channels), image.reshape(29, 37, channels)
        for channel in range(channels):
            plane = planes[:, :, channel]
            exact = scipy_reference(plane, filt, border, 7.0, anchor=anchor)
            assert_matches(got[:, :, channel], exact, plane, filt, f"{border} F={width} anchor {anchor}")


@pytest.mark.parametrize("per_item,adjacent", [(1, False), (4, False), (8, True)])
def test_edge_work_groups_are_what_writes_the_edge(evaluator, per_item, adjacent):
    """A kernel whose edge work-groups do nothing fails verification: the sample above
    cannot pass with the tiles alone; nor can several outputs an edge work-item where each
    computes only its first, nor adjacent ones that each take the first one's taps."""
    problem = Conv2DProblem(3, 45, 29, "uint8", out_dtype="uint8", border="mirror")
    config = {"work_x": 4, "work_y": 2, "local_x": 8, "local_y": 4, "border_groups": True}
    config |= {"filter_mode": "define", "edge_outputs_per_item": per_item, "adjacent_edge_outputs": adjacent}
    variant = CONV2D.render(config, problem)
    assert CONV2D.global_size(variant, problem)[1] > variant.global_size(problem.launch_extent)[1]
    assert evaluator.measure(variant, problem).status.value == "ok"
    mutations = [("if ((int)get_global_id(1) < edge_rows) {", "if (false) {")]
    if per_item > 1:
        mutations.append((f"#define EDGE_OUTPUTS {per_item}", "#define EDGE_OUTPUTS 1"))
    if adjacent:
        mutations.append(("* values[o + c];", "* values[c];"))
    for old, new in mutations:
        assert_wrong(evaluator, variant, problem, old, new)


def assert_wrong(evaluator, variant, problem: Conv2DProblem, old: str, new: str) -> None:
    """The kernel with `old` replaced by `new` in its source fails verification."""
    broken = variant.source.replace(old, new, 1)
    assert broken != variant.source, old
    wrong = evaluator.measure(type(variant)(**{**variant.__dict__, "source": broken}), problem)
    assert wrong.status.value == "wrong_result", old


def test_adjacent_edge_outputs_that_cross_a_row_end_are_computed_one_at_a_time(evaluator):
    """A run of consecutive edge outputs whose last lies K - 1 values on but in the next row
    (rows of 4 values, the box 2 wide: runs of 4 start mid-row) is no run: taken as one, it
    writes the wrong outputs."""
    problem = Conv2DProblem(3, 4, 2, border="mirror", filter_height=1, anchor=1, anchor_y=0)
    config = {"filter_mode": "define", "work_x": 1, "work_y": 1, "local_x": 2, "local_y": 1}
    config |= {"border_groups": True, "edge_outputs_per_item": 4, "adjacent_edge_outputs": True}
    variant = CONV2D.render(config, problem)
    assert evaluator.measure(variant, problem).status.value == "ok"
    assert_wrong(evaluator, variant, problem, "adjacent = y == run_y && ", "adjacent = ")


def test_convolve_command_takes_borders_and_pixel_types(tmp_path):
    rng = np.random.default_rng(4)
    images = [image_of("uint8", (31, 45), rng), image_of("uint8", (20, 9), rng)]
    for index, image in enumerate(images):
        np.save(tmp_path / f"in{index}.npy", image)
    out = tmp_path / "out"
    inputs = [str(tmp_path / f"in{index}.npy") for index in range(2)]
    result = run_cli(
        "convolve", *inputs, str(out), "--filter", "box:3", "--mode", "same", "--border", "reflect_101",
        "--out-dtype", "same", "--db", NO_DB,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    box = np.full((3, 3), 1 / 9, np.float32)
    for index, image in enumerate(images):
        got = np.load(out / f"in{index}.npy")
        theirs = cv2.filter2D(image, -1, box, borderType=cv2.BORDER_REFLECT_101)
        assert got.dtype == np.uint8 and np.abs(got.astype(int) - theirs.astype(int)).max() <= 1
    bad = run_cli("convolve", inputs[0], str(tmp_path / "x.npy"), "--filter", "box:3", "--mode", "same",
                  "--border", "sideways", "--db", NO_DB)  # fmt: skip
    assert bad.returncode == 2 and "border must be one of" in bad.stderr and not (tmp_path / "x.npy").exists()


def test_convolve_command_reads_and_writes_png_and_tiff(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(6)
    grey = image_of("uint8", (40, 33), rng)
    deep = image_of("uint16", (21, 30), rng)
    Image.fromarray(grey).save(tmp_path / "grey.png")
    Image.fromarray(deep).save(tmp_path / "deep.tif")
    gaussian = cv2.getGaussianKernel(5, -1) @ cv2.getGaussianKernel(5, -1).T
    for name, image in (("grey.png", grey), ("deep.tif", deep)):
        result = run_cli(
            "convolve", str(tmp_path / name), str(tmp_path / f"out_{name}"), "--filter", "gaussian:5",
            "--mode", "same", "--border", "mirror", "--out-dtype", "same", "--db", NO_DB,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        got = np.asarray(Image.open(tmp_path / f"out_{name}"))
        theirs = cv2.filter2D(image, -1, gaussian.astype(np.float32))
        assert got.dtype == image.dtype and np.abs(got.astype(int) - theirs.astype(int)).max() <= 1
    as_float = run_cli("convolve", str(tmp_path / "grey.png"), str(tmp_path / "f.tif"), "--filter", "box:3",
                       "--db", NO_DB)  # fmt: skip
    assert as_float.returncode == 0 and np.asarray(Image.open(tmp_path / "f.tif")).dtype == np.float32
    refused = run_cli("convolve", str(tmp_path / "grey.png"), str(tmp_path / "x.png"), "--filter", "box:3",
                      "--db", NO_DB)  # fmt: skip
    assert (
        refused.returncode == 2 and "--out-dtype same" in refused.stderr and not (tmp_path / "x.png").exists()
    )
    # colour: RGB, RGBA and a palette image, every channel filtered alike, as cv2 does
    rgb = image_of("uint8", (23, 31, 3), rng)
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    Image.fromarray(image_of("uint8", (17, 12, 4), rng)).save(tmp_path / "rgba.png")
    Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE, colors=16).save(
        tmp_path / "palette.png"
    )
    same = ("--filter", "gaussian:5", "--mode", "same", "--border", "replicate", "--out-dtype", "same")
    for name in ("rgb.png", "rgba.png", "palette.png"):
        result = run_cli(
            "convolve", str(tmp_path / name), str(tmp_path / f"out_{name}"), *same, "--db", NO_DB
        )
        assert result.returncode == 0, result.stderr
        opened = Image.open(tmp_path / name)
        image = np.asarray(opened.convert("RGB") if name == "palette.png" else opened)
        got = np.asarray(Image.open(tmp_path / f"out_{name}"))
        theirs = cv2.filter2D(image, -1, gaussian.astype(np.float32), borderType=cv2.BORDER_REPLICATE)
        assert got.shape == image.shape and np.abs(got.astype(int) - theirs.astype(int)).max() <= 1, name
    as_float = run_cli("convolve", str(tmp_path / "rgb.png"), str(tmp_path / "z.tif"), "--filter", "box:3",
                       "--db", NO_DB)  # fmt: skip
    assert as_float.returncode == 2 and "channels of uint8" in as_float.stderr
    assert not (tmp_path / "z.tif").exists()


CHANNEL_BORDERS = ["none", "constant", "replicate", "reflect", "mirror", "wrap"]


# Every border with two of the channel counts 2, 3, 4 in turn: 12 of the 18 pairs, each count
# with four borders.
@pytest.mark.parametrize(
    "channels,border", [(2 + (i + k) % 3, border) for i, border in enumerate(CHANNEL_BORDERS) for k in (0, 1)]
)
def test_interleaved_channels_match_scipy_per_channel(channels, border):
    """Each channel filtered alike, every border, with and without the __local tile,
    odd and even widths, anchors at every alignment."""
    rng = np.random.default_rng(channels)
    sample = random.Random(f"{channels}{border}")
    for width, (out_w, out_h), cache_local in ((3, (13, 7), False), (4, (9, 5), True), (6, (2, 3), False)):
        dtype = sample.choice(list(PIXEL_TYPES))
        out_dtype = sample.choice([dtype, "float32"])
        same = border != "none"
        anchor = sample.randrange(width) if same else -1
        grow = 0 if same else width - 1
        image = image_of(dtype, (out_h + grow, out_w + grow, channels), rng)
        filt = filter_of(width, rng, out_dtype)
        problem = Conv2DProblem(width, out_w, out_h, dtype, out_dtype=out_dtype, border=border, anchor=anchor,
                                channels=channels)  # fmt: skip
        config = {"filter_mode": "define", "work_x": 4, "work_y": 2, "local_x": 4, "local_y": 2}
        config |= {"cache_local": cache_local, "image_vector": sample.choice([1, 2, 4]), "unroll": "full"}
        variant = CONV2D.render(config, problem, values=filt)
        got = run_pixels_kernel(variant, image, filt, np.dtype(out_dtype), same=same)
        assert_channels_match(got, image, filt, border, anchor, f"{border} F={width} {dtype}")


def assert_channels_match(got, image, filt, border, anchor, what) -> None:
    """Each channel of `got` (out_h x out_w*C or x C) equals SciPy on that channel's plane."""
    width, channels = filt.shape[1], image.shape[2]
    out_h, out_w = (image.shape[0], image.shape[1]) if border != "none" else (
        image.shape[0] - width + 1, image.shape[1] - width + 1)  # fmt: skip
    got = got.reshape(out_h, out_w, channels)
    for channel in range(channels):
        plane = image[:, :, channel]
        if border != "none":
            exact = scipy_reference(plane, filt, border, anchor=anchor)
        else:
            exact = scipy_reference(plane, filt, "constant")[width // 2 :, width // 2 :][:out_h, :out_w]
        assert_matches(got[:, :, channel], exact, plane, filt, f"{what} channel {channel}")


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_colour_images_equal_cv2_filter2d(channels):
    rng = np.random.default_rng(8)
    image = image_of("uint8", (37, 29, channels), rng)
    for width in (3, 5):
        filt = filter_of(width, rng, "uint8")
        ours = autotune.convolve(image, filt, mode="same", border="mirror", out_dtype="same", db=NO_DB)
        theirs = cv2.filter2D(image, -1, filt).reshape(image.shape)
        assert ours.shape == image.shape and ours.dtype == np.uint8
        assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1
    valid = autotune.convolve(image.astype(np.float32), filt, db=NO_DB)
    assert valid.shape == (33, 25, channels)
    if channels > 1:
        with pytest.raises(ValueError, match="separable form filters one channel"):
            autotune.convolve(image, filt, algorithm="separable", db=NO_DB)
    else:  # (H, W, 1): one channel, any form
        separable = autotune.convolve(
            image, filt, algorithm="separable", mode="same", out_dtype="same", db=NO_DB
        )
        assert separable.shape == image.shape


def test_exports_of_other_channel_counts_do_not_share_a_name():
    stems = {
        CONV2D.export_stem(
            CONV2D.render({}, Conv2DProblem(3, 8, 8, "uint8", out_dtype="uint8", border=b, channels=c))
        )
        for b in ("mirror", "wrap")
        for c in (1, 3)
    }
    assert len(stems) == 4 and CONV2D.export_stem(CONV2D.render({}, Conv2DProblem(3, 8, 8))) == "convolve_f3"
    kinds = [Conv2DProblem(4, 8, 8, border="mirror", anchor=anchor) for anchor in (-1, 1, 2)]
    assert len({CONV2D.export_stem(CONV2D.render({}, k)) for k in kinds}) == 2  # -1 is 2, the centre
    assert len({CONV2D.describe_kind(k.kind()) for k in kinds}) == 2  # one problem, whichever way named


# Explicit vectors along x (the CPU layout): a seeded sample of pixel type x output type x
# border x channels x vector width x outputs along x, on images narrower than one vector,
# rows that end mid-vector and tiles that straddle the edge.
VECTOR_SAMPLE = random.Random(20)
VECTOR_CASES = [
    (
        VECTOR_SAMPLE.choice(list(PIXEL_TYPES)),
        VECTOR_SAMPLE.choice([False, True]),
        VECTOR_SAMPLE.choice(BORDERS),
        VECTOR_SAMPLE.choice([1, 2, 3, 4]),
        VECTOR_SAMPLE.choice([1, 2, 3, 5, 9]),
        VECTOR_SAMPLE.choice([(4, 8), (4, 16), (8, 8), (8, 32), (16, 16), (16, 32), (16, 64)]),
        VECTOR_SAMPLE.choice([(1, 1), (5, 3), (70, 13), (131, 6), (203, 5), (260, 4)]),
        seed,
    )
    for seed in range(24)
]


@pytest.mark.parametrize("dtype,same_out,border,channels,width,vector_work,size,seed", VECTOR_CASES)
def test_explicit_vectors_match_scipy(dtype, same_out, border, channels, width, vector_work, size, seed):
    out_dtype = dtype if same_out else "float32"
    x_vector, work_x = vector_work
    rng = np.random.default_rng(seed)
    out_w, out_h = size
    same = border != "none"
    grow = 0 if same else width - 1
    image = image_of(dtype, (out_h + grow, out_w + grow, channels), rng)
    filt = filter_of(width, rng, out_dtype)
    anchor = random.Random(seed).randrange(width) if same else -1
    problem = Conv2DProblem(width, out_w, out_h, dtype, out_dtype=out_dtype, border=border, anchor=anchor,
                            channels=channels)  # fmt: skip
    config = {"filter_mode": "define", "x_vector": x_vector, "work_x": work_x, "local_x": 1, "local_y": 2}
    config = device_vectors(config, dtype, out_dtype)
    shape = random.Random(seed)
    config |= {"work_y": shape.choice([1, 2, 4]), "unroll": shape.choice([1, 4, "full"])}
    variant = CONV2D.render(config, problem, values=filt)
    got = run_pixels_kernel(variant, image, filt, np.dtype(out_dtype), same=same)
    what = f"{config} {dtype}->{out_dtype} {border} F={width}"
    assert_channels_match(got, image, filt, border, anchor, what)


# Explicit vectors with filters wider than a scalar edge tile takes (F > 8): the tiles at
# the image edge keep their vectors at every width, each lane read through the table of
# the columns the border gives. Sizes thinner than the filter, prime, 1x1; a random anchor.
WIDE_SAMPLE = random.Random(41)
WIDE_VECTOR_CASES = [
    (
        WIDE_SAMPLE.choice(list(PIXEL_TYPES)),
        WIDE_SAMPLE.choice(SAME_BORDERS),
        WIDE_SAMPLE.choice([1, 2, 3, 4]),
        WIDE_SAMPLE.choice([9, 10, 13, 17]),
        WIDE_SAMPLE.choice([(4, 8), (8, 8), (8, 16), (16, 16), (16, 32)]),
        WIDE_SAMPLE.choice([(1, 1), (3, 20), (23, 29), (70, 13), (131, 6)]),
        seed,
    )
    for seed in range(10)
]


@pytest.mark.parametrize("dtype,border,channels,width,vector_work,size,seed", WIDE_VECTOR_CASES)
def test_explicit_vectors_keep_their_edge_tiles_at_wide_filters(
    dtype, border, channels, width, vector_work, size, seed
):
    x_vector, work_x = vector_work
    rng = np.random.default_rng(seed)
    out_w, out_h = size
    image = image_of(dtype, (out_h, out_w, channels), rng)
    out_dtype = dtype if seed % 2 else "float32"
    filt = filter_of(width, rng, out_dtype)
    anchor = random.Random(seed).randrange(width)
    problem = Conv2DProblem(width, out_w, out_h, dtype, out_dtype=out_dtype, border=border, anchor=anchor,
                            channels=channels)  # fmt: skip
    shape = random.Random(seed)
    config = {"filter_mode": "define", "x_vector": x_vector, "work_x": work_x, "local_x": 1, "local_y": 2}
    config = device_vectors(config, dtype, out_dtype)
    config |= {"work_y": shape.choice([1, 2, 4]), "unroll": shape.choice([1, 4, "full"])}
    variant = CONV2D.render(config, problem, values=filt)
    assert "their lanes gathered from the columns" in variant.source  # the vector edge tile
    got = run_pixels_kernel(variant, image, filt, np.dtype(out_dtype), same=True, border_value=3.0)
    what = f"{config} {dtype}->{out_dtype} {border} F={width}"
    if border == "constant":  # SciPy's constant value is the one the kernel was given
        got = got.reshape(out_h, out_w, channels)
        for channel in range(channels):
            plane = image[:, :, channel]
            exact = scipy_reference(plane, filt, border, 3.0, anchor=anchor)
            assert_matches(got[:, :, channel], exact, plane, filt, f"{what} channel {channel}")
    else:
        assert_channels_match(got, image, filt, border, anchor, what)


@pytest.mark.parametrize("dtype", list(PIXEL_TYPES))
def test_explicit_vectors_read_the_constant_border_at_wide_filters(dtype):
    """The constant border's edge reads (made inside the image, the border value selected
    after) for every pixel type, both outputs, 1-4 channels, F = 9-17."""
    rng = np.random.default_rng(len(dtype))
    for channels, width in ((1, 9), (2, 12), (3, 17), (4, 10)):
        out_dtype = dtype if channels % 2 else "float32"
        image = image_of(dtype, (13, 7, channels), rng)
        filt = filter_of(width, rng, out_dtype)
        anchor = int(rng.integers(width))
        problem = Conv2DProblem(width, 7, 13, dtype, out_dtype=out_dtype, border="constant", anchor=anchor,
                                channels=channels)  # fmt: skip
        config = {
            "filter_mode": "define",
            "x_vector": 4,
            "work_x": 8,
            "work_y": 2,
            "local_x": 1,
            "local_y": 2,
        }
        variant = CONV2D.render(config, problem, values=filt)
        assert "their lanes gathered from the columns" in variant.source
        got = run_pixels_kernel(variant, image, filt, np.dtype(out_dtype), same=True, border_value=3.0)
        got = got.reshape(13, 7, channels)
        for channel in range(channels):
            plane = image[:, :, channel]
            exact = scipy_reference(plane, filt, "constant", 3.0, anchor=anchor)
            assert_matches(
                got[:, :, channel], exact, plane, filt, f"{dtype}->{out_dtype} F={width} C={channels}"
            )


@pytest.mark.parametrize("shape", [(9, 3), (3, 11), (12, 17), (17, 9)])
def test_explicit_vectors_keep_their_edge_tiles_for_tall_and_wide_filters(evaluator, shape):
    """Rectangular filters with either side past a scalar edge tile's widths, every
    border, one and three channels, verified by the measuring worker."""
    rows, width = shape
    rng = random.Random(rows * 100 + width)
    for border in SAME_BORDERS:
        problem = Conv2DProblem(
            width, rng.choice([7, 29, 40]), rng.choice([5, 23]), "uint8", out_dtype="uint8", border=border,
            channels=rng.choice([1, 3]), filter_height=rows, anchor=rng.randrange(width),
            anchor_y=rng.randrange(rows),
        )  # fmt: skip
        config = {"filter_mode": "define", "x_vector": 8, "work_x": 16, "work_y": 2}
        config |= {"local_x": 2, "local_y": 2}
        variant = CONV2D.render(config, problem)
        assert "their lanes gathered from the columns" in variant.source
        result = evaluator.measure(variant, problem)
        assert result.status.value == "ok", f"{config} {problem.key()}: {result.error}"
