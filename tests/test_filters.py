"""Named filters are OpenCV's (the semantics we claim), have the ranks the separable
family counts on, and work wherever the command line takes a filter."""

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


BAD_NAMES = ["blur:5", "gaussian", "gaussian:0", "gaussian:300", "gaussian:5:-1", "box:5:2"]


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
