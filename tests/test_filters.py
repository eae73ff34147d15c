"""Named filters are OpenCV's (the semantics we claim), have the ranks the separable
family counts on, and work wherever the command line takes a filter."""

import warnings

import cv2
import numpy as np
import pytest
from scipy import signal

from autotune.errors import UsageError
from autotune.families.separable.terms import separable_terms
from autotune.filters import named_filter
from tests.conftest import run_cli


@pytest.mark.parametrize("width", [1, 3, 5, 7, 9, 11, 17, 33])
def test_gaussians_are_opencvs(width):
    taps = cv2.getGaussianKernel(width, 0)[:, 0]
    np.testing.assert_allclose(named_filter(f"gaussian:{width}"), np.outer(taps, taps), rtol=0, atol=1e-7)
    taps = cv2.getGaussianKernel(width, 2.5)[:, 0]
    np.testing.assert_allclose(named_filter(f"gaussian:{width}:2.5"), np.outer(taps, taps), rtol=0, atol=1e-7)


@pytest.mark.parametrize(
    "name,dx,dy,size",
    [("sobel-x", 1, 0, 3), ("sobel-y", 0, 1, 3), ("scharr-x", 1, 0, -1), ("scharr-y", 0, 1, -1)],
)
def test_derivatives_are_opencvs(name, dx, dy, size):
    kx, ky = cv2.getDerivKernels(dx, dy, size)
    assert np.array_equal(named_filter(name), np.outer(ky[:, 0], kx[:, 0]))


def test_ranks_of_the_named_filters():
    rank = {
        name: separable_terms(named_filter(name), 8)[0].shape[0]
        for name in ("gaussian:17", "box:5", "sobel-x", "prewitt-y", "scharr-x", "log:9", "dog:15")
    }
    assert rank == {
        "gaussian:17": 1,
        "box:5": 1,
        "sobel-x": 1,
        "prewitt-y": 1,
        "scharr-x": 1,
        "log:9": 2,
        "dog:15": 2,
    }
    assert named_filter("box:4").sum() == pytest.approx(1.0)
    log = named_filter("log:9").astype(np.float64)
    assert log[4, 4] < 0 and log[0, 0] > log[4, 4]  # a dip in the middle


BAD_NAMES = [
    "blur:5",
    "gaussian",
    "gaussian:0",
    "gaussian:300",
    "gaussian:5:-1",
    "box:5:2",
    "gaussian:3:1e30",
    "gaussian:3:nan",
    "dog:3:1e6",
    "log:3:1e-7",
]


@pytest.mark.parametrize("text", BAD_NAMES)
def test_bad_names_are_refused(text):
    with pytest.raises(UsageError):
        named_filter(text)


def test_convolve_command_takes_a_named_filter(tmp_path):
    image = np.random.default_rng(2).uniform(-1, 1, (40, 50)).astype(np.float32)
    np.save(tmp_path / "in.npy", image)
    result = run_cli("convolve", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--filter", "sobel-x")
    assert result.returncode == 0, result.stderr
    sobel = named_filter("sobel-x").astype(np.float64)
    expected = signal.correlate2d(image.astype(np.float64), sobel, "valid")
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, rtol=0, atol=1e-5)
    unknown = run_cli("convolve", str(tmp_path / "in.npy"), str(tmp_path / "x.npy"), "--filter", "blur:5")
    assert unknown.returncode == 2 and "named filters: gaussian:F" in unknown.stderr


def test_convolve_command_filters_a_batch_into_a_folder(tmp_path):
    rng = np.random.default_rng(5)
    images = {"a.npy": (30, 40), "b.npy": (30, 40), "c.npy": (21, 17)}  # two shapes
    for name, shape in images.items():
        np.save(tmp_path / name, rng.uniform(-1, 1, shape).astype(np.float32))
    out = tmp_path / "out"
    inputs = [str(tmp_path / name) for name in images]
    result = run_cli("convolve", *inputs, str(out), "--filter", "gaussian:5", "--json")
    assert result.returncode == 0, result.stderr
    gaussian = named_filter("gaussian:5").astype(np.float64)
    for name in images:
        image = np.load(tmp_path / name).astype(np.float64)
        np.testing.assert_allclose(
            np.load(out / name), signal.correlate2d(image, gaussian, "valid"), rtol=0, atol=1e-5
        )
    clash = tmp_path / "other"
    clash.mkdir()
    np.save(clash / "a.npy", np.zeros((9, 9), np.float32))
    refused = run_cli("convolve", inputs[0], str(clash / "a.npy"), str(out), "--filter", "box:3")
    assert refused.returncode == 2 and "share a name" in refused.stderr


def one_line_refusal(result) -> str:
    """The refusal's line: exit 2, a single line on stderr, no traceback or warning."""
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr, result.stderr
    return result.stderr


@pytest.mark.parametrize(
    "text,impulse",
    [("gaussian:3:1e-300", [0, 1, 0]), ("gaussian:4:5e-324", [0, 0.5, 0.5, 0]), ("dog:5:1e-200", [0] * 5)],
)
def test_tiny_sigmas_give_the_limit(text, impulse):
    """A Gaussian tends to a unit impulse as sigma shrinks (and a difference of two to 0):
    sigma**2 underflowing must not turn that into 0 / 0."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        taps = named_filter(text)
    expected = np.outer(impulse, impulse) if text.startswith("gaussian") else np.zeros((5, 5))
    assert np.array_equal(taps, expected)


@pytest.mark.parametrize("text", ["gaussian:3:1e-300", "gaussian:3:1e-170"])
def test_convolve_command_with_a_tiny_sigma_gaussian_crops_the_image(tmp_path, text):
    image = np.random.default_rng(3).uniform(-1, 1, (40, 50)).astype(np.float32)
    np.save(tmp_path / "in.npy", image)
    result = run_cli("convolve", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--filter", text)
    assert result.returncode == 0, result.stderr
    assert "RuntimeWarning" not in result.stderr, result.stderr
    assert np.array_equal(np.load(tmp_path / "out.npy"), image[1:-1, 1:-1])


@pytest.mark.parametrize(
    "text,accepted",
    [
        ("log:3:1e-100", "at least 1e-06 and less than 1e+06"),
        ("log:3:1e-20", "at least 1e-06 and less than 1e+06"),
        ("gaussian:3:1e30", "greater than 0 and less than 1e+06"),
    ],
)
def test_convolve_command_refuses_a_sigma_out_of_range_in_one_line(tmp_path, text, accepted):
    np.save(tmp_path / "in.npy", np.zeros((40, 50), np.float32))
    result = run_cli("convolve", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--filter", text)
    assert f"sigma must be a number {accepted}" in one_line_refusal(result)
    assert not (tmp_path / "out.npy").exists()


def test_convolve_command_refuses_a_filter_file_beyond_float32(tmp_path):
    np.save(tmp_path / "in.npy", np.zeros((40, 50), np.float32))
    taps = np.full((3, 3), 1e300)
    taps[0, 0] = np.nan
    np.save(tmp_path / "big.npy", taps)
    args = (str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--filter", str(tmp_path / "big.npy"))
    line = one_line_refusal(run_cli("convolve", *args))
    assert "holds 1e+300, beyond float32's range" in line
    assert not (tmp_path / "out.npy").exists()


def test_convolve_command_keeps_nan_and_inf_in_a_filter_file_as_the_api_does(tmp_path):
    """convolve() keeps NaN and infinities in a filter (NaN in, NaN out); so does the CLI."""
    image = np.random.default_rng(4).uniform(0.5, 1, (40, 50)).astype(np.float32)
    np.save(tmp_path / "in.npy", image)
    for value in (np.nan, np.inf):
        taps = np.ones((3, 3))
        taps[1, 1] = value
        np.save(tmp_path / "taps.npy", taps)
        out = tmp_path / "out.npy"
        result = run_cli(
            "convolve", str(tmp_path / "in.npy"), str(out), "--filter", str(tmp_path / "taps.npy")
        )
        assert result.returncode == 0 and "RuntimeWarning" not in result.stderr, result.stderr
        expected = signal.correlate2d(image.astype(np.float64), taps, "valid")
        np.testing.assert_array_equal(np.load(out), expected.astype(np.float32))
