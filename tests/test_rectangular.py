"""Filters of other height than width (rows x F), with OpenCV's anchor and SciPy's origin.

Kernels are verified by the measuring worker against the float64 reference on a seeded
sample of shapes, pixel types, borders, anchors, channels and configs; `convolve()` is
compared with cv2.filter2D at every anchor and with scipy.ndimage; the CLI tunes,
answers for and exports ROWSxF kinds.
"""

import json
import random

import cv2
import numpy as np
import pytest
import scipy.ndimage as ndi

import autotune
from autotune.call_arguments import same_padding
from autotune.errors import UsageError
from autotune.families.c_header import holds_in_header
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.image import CV2_BORDERS
from tests.conftest import cli_json, run_cli
from tests.test_pixels import NO_DB, random_config

SAMPLE = random.Random(31)
SHAPES = [(1, 5), (5, 1), (2, 3), (3, 2), (3, 8), (8, 3), (1, 9), (7, 4), (9, 2)]
CASES = []
for seed in range(18):
    rows, width = SAMPLE.choice(SHAPES)
    border = SAMPLE.choice(["none", "constant", "replicate", "reflect", "mirror", "wrap"])
    anchors = (SAMPLE.randrange(width), SAMPLE.randrange(rows)) if border != "none" else (-1, -1)
    CASES.append(
        (
            (rows, width),
            SAMPLE.choice(["uint8", "uint16", "int16", "float16", "float32"]),
            border,
            anchors,
            SAMPLE.choice([1, 1, 3]),
            SAMPLE.choice([(1, 1), (6, 4), (13, 7), (31, 9)]),
            seed,
        )
    )


@pytest.mark.parametrize("shape,dtype,border,anchors,channels,size,seed", CASES)
def test_random_kernels_of_rectangular_filters_verify(
    evaluator, shape, dtype, border, anchors, channels, size, seed
):
    rows, width = shape
    problem = Conv2DProblem(
        width,
        *size,
        dtype,
        seed=seed,
        out_dtype=dtype if seed % 2 else "float32",
        border=border,
        channels=channels,
        filter_height=rows,
        anchor=anchors[0],
        anchor_y=anchors[1],
    )
    assert (problem.anchor_column, problem.anchor_row) == (
        anchors if border != "none" else (width // 2, rows // 2)
    )
    config = random_config(random.Random(seed), problem)
    variant = CONV2D.render(config, problem)
    if rows != width:
        assert f"#define FILTER_HEIGHT {rows}" in variant.source
    result = evaluator.measure(variant, problem)
    assert result.status.value == "ok", f"{config} {problem.key()}: {result.error}"


def test_a_kernel_that_reads_the_wrong_rows_is_caught(evaluator):
    problem = Conv2DProblem(5, 17, 11, "uint8", out_dtype="uint8", border="reflect", filter_height=3)
    variant = CONV2D.render({"work_x": 2, "work_y": 2, "local_x": 8, "local_y": 4}, problem)
    assert evaluator.measure(variant, problem).status.value == "ok"
    broken = variant.source.replace("#define FILTER_HEIGHT 3", "#define FILTER_HEIGHT 2", 1)
    assert broken != variant.source
    wrong = evaluator.measure(type(variant)(**{**variant.__dict__, "source": broken}), problem)
    assert wrong.status.value == "wrong_result"


def _cv2_same(
    image: np.ndarray, filt: np.ndarray, border: str, anchor: tuple[int, int], ddepth: int
) -> np.ndarray:
    """cv2.filter2D with `anchor`; wrap (which filter2D lacks) through copyMakeBorder."""
    code = {name: value for value, name in CV2_BORDERS.items()}[border]
    if border != "wrap":
        return cv2.filter2D(image, ddepth, filt, anchor=anchor, borderType=code)
    rows, width = filt.shape
    x = width // 2 if anchor[0] == -1 else anchor[0]
    y = rows // 2 if anchor[1] == -1 else anchor[1]
    padded = cv2.copyMakeBorder(image, y, rows - 1 - y, x, width - 1 - x, code)
    full = cv2.filter2D(padded, ddepth, filt, anchor=(0, 0), borderType=cv2.BORDER_CONSTANT)
    return full[: image.shape[0], : image.shape[1]]


@pytest.mark.parametrize("shape", [(3, 5), (1, 4), (6, 1), (2, 2)])
@pytest.mark.parametrize("border", ["replicate", "mirror", "wrap"])
def test_convolve_equals_cv2_filter2d_at_the_corner_anchors_and_a_sample(shape, border):
    rng = np.random.default_rng(sum(shape))
    image = rng.integers(0, 256, (19, 23), dtype=np.uint8)
    filt = rng.uniform(0, 1, shape).astype(np.float32)
    filt /= filt.sum()
    worst = 0
    # Each anchor is compiled in: the centre (-1), every corner, and three more at random.
    every = [(x, y) for x in range(-1, shape[1]) for y in range(-1, shape[0])]
    corners = {(-1, -1), (0, 0), (shape[1] - 1, 0), (0, shape[0] - 1), (shape[1] - 1, shape[0] - 1)}
    rest = [a for a in every if a not in corners]
    for x, y in sorted(corners) + random.Random(f"{shape}{border}").sample(rest, min(3, len(rest))):
        anchored = {"border": border, "out_dtype": "same", "anchor": (x, y)}
        got = autotune.convolve(image, filt, mode="same", db=NO_DB, **anchored)
        expected = _cv2_same(image, filt, border, (x, y), -1)
        worst = max(worst, int(np.abs(got.astype(int) - expected.astype(int)).max()))
    assert worst <= 1  # a sum within float32 rounding of a half may round the other way
    # plan() answers for the same anchored kind convolve() runs
    anchored = autotune.plan(image.shape, shape, mode="same", border=border, anchor=(0, 0), db=NO_DB).problem
    assert (anchored.anchor_column, anchored.anchor_row) == (0, 0)


@pytest.mark.parametrize("shape", [(3, 6), (4, 1), (2, 5)])
@pytest.mark.parametrize("mode", ["reflect", "mirror", "nearest", "constant", "wrap"])
def test_flipped_and_shifted_filters_equal_scipy(shape, mode):
    rng = np.random.default_rng(7)
    image = rng.uniform(-1, 1, (17, 14, 3)).astype(np.float32)
    filt = rng.uniform(-1, 1, shape).astype(np.float32)
    convolved = autotune.convolve(image, filt, mode="same", border=mode, flip=True, db=NO_DB)
    for channel in range(3):
        expected = ndi.convolve(image[..., channel].astype(np.float64), filt.astype(np.float64), mode=mode)
        np.testing.assert_allclose(convolved[..., channel], expected, atol=2e-5)
    # SciPy's origin (oy, ox) is cv2's anchor (F // 2 + ox, rows // 2 + oy)
    origin = (-(shape[0] // 2), (shape[1] - 1) - shape[1] // 2)
    shifted = autotune.convolve(
        image[..., 0],
        filt,
        mode="same",
        border=mode,
        anchor=(shape[1] // 2 + origin[1], shape[0] // 2 + origin[0]),
        db=NO_DB,
    )
    expected = ndi.correlate(
        image[..., 0].astype(np.float64), filt.astype(np.float64), mode=mode, origin=origin
    )
    np.testing.assert_allclose(shifted, expected, atol=2e-5)


@pytest.mark.parametrize("shape", [(3, 6), (4, 1), (5, 2), (4, 4)])
def test_a_flipped_filters_anchor_names_a_tap_of_the_filter_as_given(shape):
    """cv2's anchor names a tap of the kernel as given, and a true convolution flips the
    anchor with the kernel (OpenCV's docs), so flip=True with anchor=(x, y) equals
    scipy.ndimage.convolve with origin (y - rows // 2, x - F // 2) and cv2.filter2D of
    the flipped filter at (F - 1 - x, rows - 1 - y). Before, the tap (x, y) of the flipped
    filter was put over each output: every output off by F - 1 - 2x columns."""
    rng = np.random.default_rng(11)
    image = rng.uniform(-1, 1, (13, 11)).astype(np.float32)
    rows, width = shape
    filt = np.outer(rng.uniform(0.5, 1, rows), rng.uniform(-1, 1, width)).astype(np.float32)  # rank 1
    flipped = np.ascontiguousarray(filt[::-1, ::-1])
    for x, y in sorted({(0, 0), (width - 1, rows - 1), (0, rows - 1), (width // 2, rows // 2)}):
        call = {"mode": "same", "border": "mirror", "flip": True, "anchor": (x, y), "db": NO_DB}
        got = autotune.convolve(image, filt, **call)
        origin = (y - rows // 2, x - width // 2)
        expected = ndi.convolve(
            image.astype(np.float64), filt.astype(np.float64), mode="mirror", origin=origin
        )
        np.testing.assert_allclose(got, expected, atol=2e-5, err_msg=f"anchor {(x, y)}")
        moved = (width - 1 - x, rows - 1 - y)
        theirs = cv2.filter2D(image, -1, flipped, anchor=moved, borderType=cv2.BORDER_REFLECT_101)
        np.testing.assert_allclose(got, theirs, atol=2e-5, err_msg=f"anchor {(x, y)}")
        assert np.array_equal(autotune.Convolver(image.shape, filt, **call)(image), got)
        problem = autotune.plan(image.shape, shape, filter=filt, **call).problem
        assert (problem.anchor_column, problem.anchor_row) == moved
        if rows == width and x == y:  # the separable form anchors it alike
            separable = autotune.convolve(image, filt, algorithm="separable", **call)
            np.testing.assert_allclose(separable, expected, atol=2e-5, err_msg=f"separable {(x, y)}")
    # the default anchor is the filter's centre tap, named or not, flipped or not
    centre = {"mode": "same", "flip": True, "db": NO_DB}
    default = autotune.convolve(image, filt, **centre)
    assert np.array_equal(default, autotune.convolve(image, filt, anchor=(width // 2, rows // 2), **centre))


def test_valid_output_of_a_rectangular_filter_and_a_batch_of_them():
    rng = np.random.default_rng(3)
    frames = rng.uniform(-1, 1, (3, 12, 20)).astype(np.float32)
    filt = rng.uniform(-1, 1, (2, 7)).astype(np.float32)
    got = autotune.convolve(frames, filt, batch=True, db=NO_DB)
    assert got.shape == (3, 11, 14)
    for index, frame in enumerate(frames):
        expected = cv2.filter2D(frame, cv2.CV_32F, filt, anchor=(0, 0), borderType=cv2.BORDER_CONSTANT)
        np.testing.assert_allclose(got[index], expected[:11, :14], atol=1e-5)


IMAGE = np.zeros((9, 9))
convolve = autotune.convolve


@pytest.mark.parametrize(
    "call,error,message",
    [
        (lambda: convolve(IMAGE, np.ones((3, 5)), mode="same", anchor=(5, 0)), ValueError, "outside the 3x5"),
        (lambda: convolve(IMAGE, np.ones((3, 5)), anchor=(1, 1)), ValueError, "'valid' output has none"),
        (
            lambda: convolve(IMAGE, np.ones((3, 5)), mode="same", anchor=1),
            TypeError,
            r"anchor must be \(x, y\)",
        ),
        (lambda: convolve(np.zeros((4, 9)), np.ones((5, 3))), ValueError, "smaller than the 5x3 filter"),
        (lambda: convolve(IMAGE, np.ones((0, 3))), ValueError, "empty"),
        (
            lambda: convolve(np.zeros((9, 300)), np.ones((1, 256))),
            ValueError,
            "each side must be from 1 to 255",
        ),
        (lambda: convolve(IMAGE, np.ones((1, 3)), algorithm="separable"), ValueError, "not a 1x3 filter"),
        (lambda: autotune.plan((9, 9), (3, 5), filter=np.ones((5, 3)), db=NO_DB), ValueError, "5x3, not 3x5"),
    ],
)
def test_bad_filters_and_anchors_get_one_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_keys_name_a_square_filter_by_its_width_and_each_anchor_once():
    assert Conv2DProblem(5, 64, 32, filter_height=5).key() == Conv2DProblem(5, 64, 32).key()
    assert Conv2DProblem(5, 64, 32, filter_height=3).key()["filter_height"] == 3
    centred = Conv2DProblem(5, 64, 32, border="mirror", filter_height=3, anchor=2, anchor_y=1)
    assert "anchor" not in centred.key() and "anchor_y" not in centred.key()
    # a square filter's anchor names both taps, as before rectangular filters existed
    old = Conv2DProblem(4, 64, 32, border="mirror", anchor=1)
    assert (old.anchor_column, old.anchor_row) == (1, 1) and "anchor_y" not in old.key()
    assert CONV2D.describe_kind(
        Conv2DProblem(5, 9, 9, border="wrap", filter_height=3, anchor=0, anchor_y=1).kind()
    ) == ("F=3x5 wrap anchor=0 anchor_y=1")
    with pytest.raises(UsageError, match="give anchor_y"):
        Conv2DProblem(5, 64, 32, border="mirror", filter_height=2, anchor=3)


def test_rectangular_kernels_export_under_their_own_names():
    flat = CONV2D.render({}, Conv2DProblem(5, 64, 32, filter_height=3))
    assert CONV2D.export_stem(flat) == "convolve_f3x5" and not holds_in_header(flat)
    assert holds_in_header(flat, CONV2D.header_layout)  # as a kind of filter_height 3
    shifted = CONV2D.render(
        {}, Conv2DProblem(5, 64, 32, "uint8", border="mirror", filter_height=3, anchor=1, anchor_y=0)
    )
    assert CONV2D.export_stem(shifted) == "convolve_f3x5_uint8_float32_mirror_anchor1y0"
    fields = CONV2D.manifest_fields(shifted)
    assert (fields["filter_height"], fields["filter_width"], fields["anchor"], fields["anchor_y"]) == (
        3,
        5,
        1,
        0,
    )


def test_cli_tunes_answers_for_and_exports_rows_by_width_kinds(tmp_path):
    db = f"sqlite:///{tmp_path / 'rect.db'}"
    search = run_cli(
        "search", "-d", "0", "--filter-size", "3x5,5x1", "-s", "40x24", "--trials", "4",
        "--dtype", "uint8", "--out-dtype", "same", "--border", "mirror", "--db", db, "--json",
    )  # fmt: skip
    assert search.returncode == 0, search.stderr
    best = cli_json(
        "best",
        "-d",
        "0",
        "-f",
        "3x5",
        "--dtype",
        "uint8",
        "--out-dtype",
        "same",
        "--border",
        "mirror",
        "--db",
        db,
    )
    (record,) = best["kernels"]
    assert record["problem"] == "F=3x5 uint8->uint8 mirror" and record["fallback"] == "exact"
    listed = cli_json("best", "-f", "5x1", "--db", db)
    assert [r["problem"] for r in listed["kernels"]] == ["F=5x1 uint8->uint8 mirror"]
    export = run_cli("export", "-d", "0", "--db", db, "--out", str(tmp_path / "out"))
    assert export.returncode == 0, export.stderr
    manifest = json.loads((tmp_path / "out" / "convolve_f5x1_uint8_uint8_mirror.json").read_text())
    assert (manifest["filter_height"], manifest["filter_width"]) == (5, 1)
    header = run_cli("export", "-d", "0", "--db", db, "--out", str(tmp_path / "h"), "--format", "header")
    assert header.returncode == 0, header.stderr
    text = (tmp_path / "h" / "autotune_kernels.h").read_text()
    assert '"convolve",\n' in text and "    1,\n    5,\n" in text  # filter_width 1, filter_height 5
    for args, message in (
        (("-f", "3x0"), "from 1 to 255"),
        (("-f", "3x5x2"), "ROWSxF"),
        (("-f", "3x5", "--family", "separable"), "square filters"),
    ):
        bad = run_cli("search", "-d", "0", *args, "--trials", "2", "--db", db)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr


def test_convolve_command_takes_rows_by_width_filters_an_anchor_and_a_batch(tmp_path):
    rng = np.random.default_rng(8)
    frames = rng.integers(0, 256, (3, 20, 24), dtype=np.uint8)
    filt = rng.uniform(0, 1, (3, 5)).astype(np.float32)
    filt /= filt.sum()
    source, taps = tmp_path / "frames.npy", tmp_path / "filter.npy"
    np.save(source, frames)
    np.save(taps, filt)
    same = ("--mode", "same", "--border", "mirror", "--out-dtype", "same", "--db", NO_DB)
    result = run_cli("convolve", str(source), str(tmp_path / "out.npy"), "--filter", str(taps), "--batch",
                     "--anchor", "1,0", *same)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "(24x20 x 3 frames)" in result.stdout
    got = np.load(tmp_path / "out.npy")
    mirror = cv2.BORDER_REFLECT_101
    expected = np.stack([cv2.filter2D(f, -1, filt, anchor=(1, 0), borderType=mirror) for f in frames])
    assert got.shape == frames.shape and np.abs(got.astype(int) - expected.astype(int)).max() <= 1
    for args, message in ((("--anchor", "1"), "--anchor takes X,Y"), ((), "pass batch=True")):
        bad = run_cli(
            "convolve", str(source), str(tmp_path / "x.npy"), "--filter", "box:3", *args, "--db", NO_DB
        )
        assert bad.returncode == 2 and message in bad.stderr and not (tmp_path / "x.npy").exists()


@pytest.mark.parametrize("shape", [(2, 4), (4, 4), (3, 6), (5, 3)])
def test_plan_takes_flip_and_answers_for_the_kernel_convolve_runs(shape):
    """A flipped filter of even size sits one tap earlier over each output ('same'), a
    kernel of its own: plan(flip=True) must name it, as the Convolver does."""
    rng = np.random.default_rng(sum(shape))
    filt = rng.uniform(-1, 1, shape).astype(np.float32)
    call = {"mode": "same", "border": "mirror", "db": NO_DB}
    flipped = autotune.plan((17, 14), shape, filter=filt, flip=True, **call)
    runs = autotune.Convolver((17, 14), filt, flip=True, **call).plan
    assert flipped.problem == runs.problem and flipped.algorithm == runs.algorithm
    rows, columns = same_padding(shape, flip=True)
    assert (flipped.problem.anchor_row, flipped.problem.anchor_column) == (rows[0], columns[0])
    plain = autotune.plan((17, 14), shape, filter=filt, **call).problem
    even = [side % 2 == 0 for side in shape]
    assert (plain.anchor_row != rows[0], plain.anchor_column != columns[0]) == tuple(even)


@pytest.mark.parametrize(
    "options,image_shape,filter_shape,call",
    [
        # a rectangular filter whose width passes the image's height (refused before: 5 > 4)
        (("--filter-size", "3x5", "-s", "9x4", "--channels", "3", "--dtype", "uint16", "--border", "wrap"),
         (4, 9, 3), (3, 5), {"mode": "same", "border": "wrap", "out_dtype": "same"}),
        # a filter wider and taller than a 'same' image
        (("-f", "5", "-s", "2x3", "--dtype", "uint8", "--border", "mirror"),
         (3, 2), (5, 5), {"mode": "same", "border": "mirror", "out_dtype": "same"}),
        # a 1x1 'valid' output
        (("-f", "4", "-s", "1x1"), (4, 4), (4, 4), {"mode": "valid"}),
    ],
)  # fmt: skip
def test_search_tunes_filters_larger_than_the_output(tmp_path, options, image_shape, filter_shape, call):
    """`search -s` names the output size; any filter goes with it, as `convolve` takes it
    ('valid' input grows by the filter, 'same' reads through the border however far).
    Before, a filter side above the output's smaller side was refused ("filter 3x5 is larger
    than the image (9x4)"). The tuned kernel is what `convolve` then runs, and it agrees with
    SciPy."""
    db = f"sqlite:///{tmp_path / 'small.db'}"
    same_type = ("--out-dtype", "same") if "--dtype" in options else ()
    search = run_cli("search", "-d", "0", *options, *same_type, "--trials", "4", "--db", db)
    assert search.returncode == 0, search.stderr
    rng = np.random.default_rng(len(options))
    dtype = options[options.index("--dtype") + 1] if "--dtype" in options else "float32"
    image = (rng.integers(0, 1000, image_shape) % np.iinfo(dtype).max if dtype != "float32"
             else rng.uniform(-1, 1, image_shape)).astype(dtype)  # fmt: skip
    filt = rng.uniform(0, 1, filter_shape).astype(np.float32)
    filt /= filt.sum()
    chosen = autotune.plan(image.shape, filter_shape, dtype=image.dtype, db=db, **call)
    assert chosen.level == "exact", chosen
    got = autotune.convolve(image, filt, db=db, **call)
    mode = {"wrap": "wrap", "mirror": "mirror"}.get(call.get("border"), "constant")
    exact = ndi.correlate(
        image.astype(np.float64), filt.astype(np.float64)[..., None] if image.ndim == 3 else filt, mode=mode
    )
    if call["mode"] == "valid":
        exact = exact[2:3, 2:3]  # the one output whose window lies inside (SciPy centres 4x4 at (2, 2))
    if got.dtype.kind in "iu":
        np.testing.assert_array_less(np.abs(got.astype(np.float64) - np.rint(exact)), 1.0 + 1e-9)
    else:
        np.testing.assert_allclose(got, exact, atol=1e-5)
