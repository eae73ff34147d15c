"""The time model's hyperparameter fit: its batched likelihoods against the textbook
formula, and what it does with a knob the measured points never vary."""

import math

import numpy as np
import pytest

from autotune.surrogate import GaussianProcess, _matern52, _shared_values


def dense_likelihood(
    x: np.ndarray, y: np.ndarray, offset_columns: int, length_scales, noise, weight
) -> float:
    """-n/2 log(y' K^-1 y / n) - 1/2 log det K, from a full kernel and a general solve."""
    m = offset_columns
    smooth = x[:, : x.shape[1] - m]
    kernel = _matern52(smooth, smooth, np.asarray(length_scales))
    if m:
        kernel = kernel + weight * _shared_values(x[:, -m:], x[:, -m:])
    kernel = kernel + noise * np.eye(len(y))
    _, log_determinant = np.linalg.slogdet(kernel)
    amplitude = float(y @ np.linalg.solve(kernel, y)) / len(y)
    return -0.5 * len(y) * math.log(amplitude) - 0.5 * log_determinant


def random_points(seed: int, count: int, knobs: int, offset_columns: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, 6, size=(count, knobs))
    features = np.hstack([indices / 5.0, indices[:, :offset_columns].astype(float)])
    return features, np.log(rng.lognormal(size=count))


@pytest.mark.parametrize("seed,offset_columns", [(0, 0), (1, 2), (2, 3)])
def test_batched_likelihoods_match_the_dense_formula(seed, offset_columns):
    x, y = random_points(seed, 60, 7, offset_columns)
    model = GaussianProcess(x, y, offset_columns=offset_columns)
    model._prepare_fit()
    rng = np.random.default_rng(seed + 100)
    length_scales = rng.choice([0.08, 0.3, 1.2, 5.0], size=(5, 7))
    noises = np.array([1e-4, 1e-2, 0.1, 1e-2, 1e-4])
    weights = np.array([0.0, 0.1, 0.3, 1.0, 0.3]) if offset_columns else np.zeros(5)
    batched = model._likelihoods(length_scales, noises, weights)
    for i in range(5):
        want = dense_likelihood(x, model.y, offset_columns, length_scales[i], noises[i], weights[i])
        assert batched[i] == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_a_knob_no_measured_point_varies_keeps_its_starting_length_scale():
    """Every length scale of a constant column fits the points equally: no value beats
    another, so the fit keeps the one it starts from instead of one picked by rounding."""
    x, y = random_points(3, 40, 5, 0)
    x[:, 2] = 0.4
    model = GaussianProcess(x, y)
    assert model.length_scales[2] == 0.3
    assert not np.all(model.length_scales == 0.3)  # the other knobs were fitted


def test_far_points_get_the_prior_and_no_underflow():
    """Distances past the kernel's reach give a kernel of (almost) zero, finite, and a far
    candidate the prior mean and deviation."""
    x, y = random_points(4, 30, 4, 0)
    model = GaussianProcess(x, y)
    far = np.full((3, 4), 1e6)
    assert np.all(_matern52(far, x, np.full(4, 0.08)) < 1e-290)
    mean, deviation = model.predict(far)
    assert np.allclose(mean, 0.0, atol=1e-12)
    assert np.allclose(deviation, math.sqrt(model._amplitude))
