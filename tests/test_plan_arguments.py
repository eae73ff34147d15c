"""`plan()` and `Convolver` refuse what `convolve()` refuses, with its message, before any
lookup: image shapes and filter sizes (a database with tuned kernels once divided by an
empty output), pixel types that are not real numbers, and flags that are not bools."""

import numpy as np
import pytest

import autotune
from tests.conftest import run_cli

FILTER = np.ones((3, 3), np.float32)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """A database with a tuned F=3 kernel: the lookup measures distances to its size."""
    path = tmp_path_factory.mktemp("db") / "tuned.db"
    url = f"sqlite:///{path}"
    result = run_cli(
        "search", "-d", "0", "-f", "3", "-s", "32x24", "--trials", "3", "--sampler", "random", "--db", url
    )
    assert result.returncode == 0, result.stderr
    return url


def _error(call):
    with pytest.raises((TypeError, ValueError)) as caught:
        call()
    return caught.type, str(caught.value)


@pytest.mark.parametrize(
    ("image", "filter_size", "options"),
    [
        (np.zeros((2, 2), np.float32), 3, {}),  # smaller than the filter ('valid')
        (np.zeros((5, 2), np.float32), (3, 3), {}),
        (np.zeros((0, 64), np.float32), 3, {}),  # empty
        (np.zeros((400, 400), np.float32), 300, {}),  # a filter side past 255
        (np.zeros((64, 64), np.complex64), 3, {}),
        (np.zeros((64, 64), bool), 3, {}),
        (np.zeros((64, 64), object), 3, {}),
        (np.zeros((64, 64), np.float32), 3, {"flip": "yes"}),
        (np.zeros((64, 64), np.float32), 3, {"specialise": "no"}),
        (np.zeros((1, 64, 64), np.float32), 3, {"batch": "yes"}),
        # frames past int indexing (a view of one value: no memory): one launch cannot run them
        (np.broadcast_to(np.float32(0), (2, 50000, 50000)), 3, {"batch": True}),
    ],
)
def test_plan_refuses_what_convolve_refuses_with_its_message(db, image, filter_size, options):
    sides = (filter_size, filter_size) if isinstance(filter_size, int) else filter_size
    refused = _error(lambda: autotune.convolve(image, np.ones(sides, np.float32), db=db, **options))
    assert (
        _error(lambda: autotune.plan(image.shape, filter_size, dtype=image.dtype, db=db, **options))
        == refused
    )


@pytest.mark.parametrize(
    "options", [{}, {"mode": "same", "anchor": (3, 0)}, {"out_dtype": np.int16}, {"flip": "no"}]
)
def test_arguments_are_refused_before_the_pixels_values(db, options):
    """An image past float32's range called with arguments convolve refuses gets the
    arguments' message, as plan() and a Convolver (whose calls alone see the values)
    give it: convolve once read the values first and named them instead."""
    image = np.full((2, 2), 1e300)  # and smaller than the filter, for 'valid' output
    refused = _error(lambda: autotune.convolve(image, FILTER, db=db, **options))
    assert "beyond float32's range" not in refused[1]
    assert _error(lambda: autotune.plan(image.shape, 3, dtype=image.dtype, db=db, **options)) == refused
    built = _error(lambda: autotune.Convolver(image.shape, FILTER, dtype=image.dtype, db=db, **options))
    assert built == refused
    big = np.full((4, 4), 1e300)  # arguments it takes: the values are refused, by a call alike
    values = _error(lambda: autotune.convolve(big, FILTER, db=db))
    assert values[0] is ValueError and "beyond float32's range" in values[1]
    assert _error(lambda: autotune.Convolver(big.shape, FILTER, dtype=big.dtype, db=db)(big)) == values


@pytest.mark.parametrize(
    "taps",
    [
        np.ones((7, 16), np.float32),  # the separable form takes square filters only
        np.random.default_rng(5).standard_normal((11, 11)).astype(np.float32),  # rank 11: past MAX_RANK
    ],
)
def test_the_algorithms_refusals_come_before_the_pixels_values(db, taps):
    """algorithm='separable' with a filter it cannot run, on an image past float32's range:
    convolve names the filter, as a Convolver does when it is built (before any image)."""
    image = np.full((31, 31), 1e300)
    refused = _error(lambda: autotune.convolve(image, taps, db=db, algorithm="separable"))
    assert refused[0] is ValueError and "separable" in refused[1]
    built = _error(
        lambda: autotune.Convolver(image.shape, taps, dtype=image.dtype, db=db, algorithm="separable")
    )
    assert built == refused


@pytest.mark.parametrize(
    ("image_shape", "filter_size", "error", "message"),
    [
        (None, 3, TypeError, "image_shape must be a tuple of positive ints, got None"),
        ((64.0, 64.0), 3, TypeError, "image_shape must be a tuple of positive ints, got (64.0, 64.0)"),
        ((True, 64), 3, TypeError, "image_shape must be a tuple of positive ints, got (True, 64)"),
        ((-4, 64), 3, ValueError, "image_shape must be a tuple of positive ints, got (-4, 64)"),
        ((64, 64), 3.0, TypeError, "filter_size must be F or (rows, F) of ints, got 3.0"),
        ((64, 64), None, TypeError, "filter_size must be F or (rows, F) of ints, got None"),
        ((64, 64), True, TypeError, "filter_size must be F or (rows, F) of ints, got True"),
        ((64, 64), (3, 3, 3), ValueError, "filter_size must be F or (rows, F), got (3, 3, 3)"),
        ((64, 64), 0, ValueError, "filter 0x0: each side must be from 1 to 255 taps"),
        ((64, 64), (3, 256), ValueError, "filter 3x256: each side must be from 1 to 255 taps"),
    ],
)
def test_plan_refuses_shapes_and_sizes_that_are_not_positive_ints(
    db, image_shape, filter_size, error, message
):
    assert _error(lambda: autotune.plan(image_shape, filter_size, db=db)) == (error, message)


def test_plan_takes_numpy_integers_as_sizes(db):
    """Sizes computed with NumPy are ints: the problem holds Python ints."""
    for filter_size in (np.int64(3), (np.int32(3), np.int64(3))):
        problem = autotune.plan((np.int64(26), 34), filter_size, db=db).problem
        assert (problem.filter_width, problem.out_width, problem.out_height) == (3, 32, 24)
        assert all(type(n) is int for n in (problem.filter_width, problem.out_width, problem.out_height))
    assert autotune.plan([26, 34], 3, db=db).problem.out_width == 32  # a list, as layout takes it


@pytest.mark.parametrize("dtype", [np.complex64, bool, object, "U4"])
def test_convolver_refuses_pixels_that_are_not_real_numbers_when_built(db, dtype):
    refused = _error(lambda: autotune.convolve(np.zeros((64, 64), dtype), FILTER, db=db))
    assert refused == (TypeError, f"image must hold real numbers, got dtype {np.dtype(dtype)}")
    assert _error(lambda: autotune.Convolver((64, 64), FILTER, dtype=dtype, db=db)) == refused


@pytest.mark.parametrize("flag", ["flip", "batch", "specialise", "zero_copy"])
@pytest.mark.parametrize("value", ["yes", "no", 1, None])
def test_flags_that_are_not_bools_are_refused(db, flag, value):
    """A string such as "no" would read as true: every entry point refuses it alike."""
    message = (TypeError, f"{flag} must be True or False, got {value!r}")
    image = np.zeros((1, 8, 8) if flag == "batch" else (8, 8), np.float32)
    calls = [lambda: autotune.Convolver(image.shape, FILTER, db=db, **{flag: value})]
    if flag != "zero_copy":  # a Convolver's alone
        calls.append(lambda: autotune.convolve(image, FILTER, db=db, **{flag: value}))
        calls.append(lambda: autotune.plan(image.shape, 3, db=db, **{flag: value}))
    for call in calls:
        assert _error(call) == message


def test_numpy_bools_are_flags(db):
    image = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
    expected = autotune.convolve(image, FILTER, db=db, batch=True, flip=True)
    flags = {"batch": np.True_, "flip": np.True_, "specialise": np.False_}
    np.testing.assert_array_equal(autotune.convolve(image, FILTER, db=db, **flags), expected)
    convolver = autotune.Convolver(image.shape, FILTER, db=db, zero_copy=np.False_, **flags)
    np.testing.assert_array_equal(convolver(image), expected)
    assert convolver.zero_copy is False
    assert autotune.plan(image.shape, 3, db=db, **flags).problem.frames == 1
