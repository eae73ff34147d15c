"""Batches: frames of one size, (N, H, W[, C]), filtered in one launch.

Each frame of a batch must come out exactly as that frame filtered alone (and as
cv2.filter2D has it), whatever the pixel type, channels, border and kernel config;
the measuring worker verifies batched kernels against the per-frame reference.
"""

import random

import cv2
import numpy as np
import pyopencl.array as cl_array
import pytest

import autotune
from autotune.errors import UsageError
from autotune.families.c_header import holds_in_header
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.image import CV2_BORDERS
from tests.conftest import cli_json, run_cli
from tests.test_pixels import NO_DB, image_of, random_config

SAMPLE = random.Random(23)
# A seeded sample of pixel type x channels x border x width x frames x frame size x config.
CASES = [
    (
        SAMPLE.choice(["uint8", "uint16", "int16", "float16", "float32"]),
        SAMPLE.choice([1, 1, 2, 3, 4]),
        SAMPLE.choice(["none", "constant", "replicate", "reflect", "mirror", "wrap"]),
        SAMPLE.choice([1, 2, 3, 5, 8]),
        SAMPLE.choice([2, 3, 7]),
        SAMPLE.choice([(1, 1), (9, 4), (13, 7), (33, 18)]),
        seed,
    )
    for seed in range(14)
]


@pytest.mark.parametrize("dtype,channels,border,width,frames,size,seed", CASES)
def test_batched_kernels_verify_against_the_per_frame_reference(
    evaluator, dtype, channels, border, width, frames, size, seed
):
    out_dtype = dtype if seed % 2 else "float32"
    problem = Conv2DProblem(
        width, *size, dtype, seed=seed, out_dtype=out_dtype, border=border, channels=channels, frames=frames
    )
    config = random_config(random.Random(seed), problem)
    variant = CONV2D.render(config, problem)
    assert variant.local_size[2] == 1 and variant.render_key["batch"]
    assert CONV2D.global_size(variant, problem)[2] == frames
    result = evaluator.measure(variant, problem)
    assert result.status.value == "ok", f"{config} {problem.key()}: {result.error}"


def test_a_wrong_frame_offset_is_caught(evaluator):
    """The reference is per frame: a kernel that reads the wrong frame fails."""
    problem = Conv2DProblem(3, 20, 12, "uint8", out_dtype="uint8", border="mirror", frames=3)
    variant = CONV2D.render({"work_x": 2, "work_y": 2, "local_x": 8, "local_y": 4}, problem)
    assert evaluator.measure(variant, problem).status.value == "ok"
    broken = variant.source.replace("input += get_global_id(2)", "input += (get_global_id(2) / 2)", 1)
    assert broken != variant.source
    wrong = evaluator.measure(type(variant)(**{**variant.__dict__, "source": broken}), problem)
    assert wrong.status.value == "wrong_result"


@pytest.mark.parametrize(
    "problem",
    [
        Conv2DProblem(3, 64, 7, frames=2),  # rows 66 floats apart, 9 rows a frame
        Conv2DProblem(3, 66, 9, "uint8", out_dtype="uint8", border="mirror", frames=3),
        Conv2DProblem(3, 22, 11, "float16", border="constant", channels=3, anchor=0, frames=2),
    ],
    ids=["valid", "mirror", "constant-3ch"],
)
def test_batched_kernels_read_float4s_aligned_in_every_frame(evaluator, problem):
    """image_vector = 4 with a row pitch of 2 mod 4: a row starts 16-byte aligned where its
    row in the whole batch is even, so in a frame after an odd number of rows the even rows
    are the ones 8 bytes past. The kernel went by the row's parity within its frame and read
    misaligned float4s there (PoCL: SIGSEGV; found by checks/fuzz_export.py, seed 1272: an
    exported batch kernel launched at 64x7, 2 frames)."""
    config = {"filter_mode": "define", "filter_space": "local", "unroll": "full", "image_vector": 4}
    config = CONV2D.space.complete(config | {"local_x": 8, "local_y": 4, "work_x": 4, "work_y": 2})
    assert not CONV2D.violations(config, problem), CONV2D.violations(config, problem)
    assert problem.in_width * problem.channels % 4 == 2 and problem.in_height % 2 == 1
    result = evaluator.measure(CONV2D.render(config, problem), problem)
    assert result.status.value == "ok", result.error


def _cv2_per_frame(frames: np.ndarray, filt: np.ndarray, border: str, same_type: bool) -> np.ndarray:
    """cv2.filter2D on each frame; borders (wrap too, which filter2D lacks) through
    cv2.copyMakeBorder, then the 'valid' part."""
    codes = {name: code for code, name in CV2_BORDERS.items()}
    reach = filt.shape[0] // 2
    results = []
    for frame in frames:
        dimensions = frame.ndim
        if border != "none":
            frame = cv2.copyMakeBorder(frame, reach, reach, reach, reach, codes[border], value=0)
        result = cv2.filter2D(frame, -1 if same_type else cv2.CV_32F, filt)
        if result.ndim < dimensions:
            result = result[..., None]
        results.append(result[reach : result.shape[0] - reach, reach : result.shape[1] - reach])
    return np.stack(results)


@pytest.mark.parametrize(
    "dtype,channels,border,shape",
    [
        ("uint8", 1, "mirror", (5, 31, 17)),
        ("uint8", 3, "replicate", (3, 16, 21, 3)),
        ("uint16", 4, "reflect", (2, 9, 13, 4)),
        ("float32", 1, "none", (4, 19, 23)),
        ("int16", 1, "wrap", (2, 12, 10, 1)),
        ("uint8", 1, "constant", (1, 8, 8)),
    ],
)
def test_convolve_on_a_batch_equals_cv2_frame_by_frame(dtype, channels, border, shape):
    rng = np.random.default_rng(5)
    images = image_of(dtype, shape, rng)
    filt = rng.uniform(-0.25, 1, (5, 5)).astype(np.float32)
    filt /= filt.sum()
    same_type = dtype != "float32"
    got = autotune.convolve(
        images,
        filt,
        mode="valid" if border == "none" else "same",
        border=border if border != "none" else "constant",
        out_dtype="same" if same_type else np.float32,
        batch=True,
        db=NO_DB,
    )
    expected = _cv2_per_frame(images, filt, border, same_type)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    if same_type:  # integer outputs: equal, but for sums within float32 rounding of a half
        assert np.abs(got.astype(np.int64) - expected.astype(np.int64)).max() <= 1
        assert np.mean(got == expected) > 0.99
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    for index in range(shape[0]):  # a frame of a batch is that frame filtered alone
        alone = autotune.convolve(
            images[index],
            filt,
            mode="valid" if border == "none" else "same",
            border=border if border != "none" else "constant",
            out_dtype="same" if same_type else np.float32,
            db=NO_DB,
        )
        np.testing.assert_array_equal(got[index], alone)


def test_convolver_runs_batches_from_numpy_and_device_arrays():
    rng = np.random.default_rng(9)
    images = rng.integers(0, 256, (6, 24, 29, 3), dtype=np.uint8)
    filt = rng.uniform(0, 1, (3, 3)).astype(np.float32)
    convolver = autotune.Convolver(
        images.shape,
        filt,
        mode="same",
        border="mirror",
        dtype=np.uint8,
        out_dtype="same",
        batch=True,
        db=NO_DB,
    )
    assert convolver.output_shape == images.shape
    expected = autotune.convolve(
        images, filt, mode="same", border="mirror", out_dtype="same", batch=True, db=NO_DB
    )
    np.testing.assert_array_equal(convolver(images), expected)
    on_device = convolver(cl_array.to_device(convolver.queue, images))
    np.testing.assert_array_equal(on_device.get(), expected)
    with pytest.raises(ValueError, match=r"takes images of shape \(6, 24, 29, 3\)"):
        convolver(images[:5])
    one = autotune.Convolver((1, 8, 9), filt, batch=True, db=NO_DB)  # a batch of one keeps its axis
    assert one.output_shape == (1, 6, 7)
    np.testing.assert_array_equal(
        one(images[:1, :8, :9, 0]), autotune.convolve(images[:1, :8, :9, 0], filt, batch=True, db=NO_DB)
    )


@pytest.mark.parametrize(
    "call,message",
    [
        (
            lambda: autotune.convolve(np.zeros((2, 8, 8, 3)), np.ones((3, 3))),
            "for a batch .* pass batch=True",
        ),
        (
            lambda: autotune.convolve(np.zeros((8, 8)), np.ones((3, 3)), batch=True),
            r"a batch must be \(N, H, W\)",
        ),
        (lambda: autotune.convolve(np.zeros((2, 8, 8, 5)), np.ones((3, 3)), batch=True), "C from 1 to 4"),
        (lambda: autotune.convolve(np.zeros((2, 2, 8)), np.ones((3, 3)), batch=True), "smaller than the 3x3"),
        (
            lambda: autotune.convolve(
                np.zeros((2, 8, 8)), np.ones((3, 3)), batch=True, algorithm="separable"
            ),
            "not a batch of 2",
        ),
        (lambda: autotune.Convolver((2, 8, 8, 3, 1), np.ones((3, 3)), batch=True), r"a batch must be"),
    ],
)
def test_bad_batches_get_one_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_frames_are_a_problem_field_left_out_of_keys_of_one_frame():
    assert "frames" not in Conv2DProblem(5, 64, 32).key()
    assert Conv2DProblem(5, 64, 32, frames=4).key()["frames"] == 4
    assert CONV2D.describe_kind(Conv2DProblem(5, 64, 32, "uint8", frames=4).kind()) == "F=5 uint8->float32 x4"
    with pytest.raises(UsageError, match="frames must be a positive int"):
        Conv2DProblem(5, 64, 32, frames=0)


def test_batched_kernels_export_with_their_own_name_and_a_kind_in_the_header():
    one = CONV2D.render({}, Conv2DProblem(5, 64, 32))
    batched = CONV2D.render({}, Conv2DProblem(5, 64, 32, frames=3))
    assert holds_in_header(batched, CONV2D.header_layout)  # looked up by kind: batch = 1
    assert holds_in_header(one) and not holds_in_header(batched)  # not by width alone
    assert CONV2D.export_stem(batched) == "convolve_f5_batch" != CONV2D.export_stem(one)
    assert CONV2D.manifest_fields(batched)["batch"] is True
    assert CONV2D.manifest_fields(one)["batch"] is False


def test_a_batch_tuned_as_one_is_what_convolve_runs(tmp_path):
    """`search --frames N` tunes the batch itself; a batch of that kind is then answered
    exactly, others of its pixels by the related kind."""
    db = f"sqlite:///{tmp_path / 'frames.db'}"
    pixels = ("--dtype", "uint8", "--out-dtype", "same", "--border", "mirror")
    search = run_cli(
        "search", "-d", "0", "-f", "3", "-s", "32x24", "--frames", "4", "--trials", "3", *pixels, "--db", db
    )
    assert search.returncode == 0, search.stderr
    (record,) = cli_json("best", "--db", db)["kernels"]
    assert record["problem"] == "F=3 uint8->uint8 mirror x4"
    filt = np.full((3, 3), 1 / 9, np.float32)
    options = {
        "mode": "same",
        "border": "mirror",
        "dtype": np.uint8,
        "out_dtype": "same",
        "batch": True,
        "db": db,
    }
    assert autotune.Convolver((4, 24, 32), filt, **options).plan.level == "exact"
    assert autotune.Convolver((7, 24, 32), filt, **options).plan.level == "related_kind"
    bad = run_cli("search", "-d", "0", "-f", "3", "--frames", "0", "--trials", "3", "--db", db)
    assert bad.returncode == 2 and "--frames" in bad.stderr


def test_a_new_kind_starts_from_the_winner_of_a_related_kind_of_any_size(tmp_path):
    """A batch's search (another kind and size) measures the config that won for the
    same width and pixels at another size right after the seed presets (where that
    winner is a preset itself, among them)."""
    db = f"sqlite:///{tmp_path / 'warm.db'}"
    pixels = ("--dtype", "uint8", "--out-dtype", "same", "--border", "mirror")
    first = run_cli("search", "-d", "0", "-f", "3", "-s", "48x32", "--trials", "12", *pixels, "--db", db)
    assert first.returncode == 0, first.stderr
    (winner,) = cli_json("best", "--db", db)["kernels"]
    batch = cli_json(
        "search", "-d", "0", "-f", "3", "-s", "24x16", "--frames", "3", "--trials", "12", *pixels, "--db", db
    )
    trials = cli_json("show", str(batch["run_id"]), "--db", db)["trials"]
    presets = [t for t in trials if t["origin"] == "preset"]
    early = [t["config"] for t in trials[: len(presets) + 1]]
    assert winner["config"] in early
    assert all(t["origin"] != "warm" or t["config"] == winner["config"] for t in trials[: len(presets) + 1])
