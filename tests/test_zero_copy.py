"""On a device that shares host memory (PoCL here), NumPy calls read and write arrays in
place where they are aligned: the results equal the staged path's exactly for aligned,
unaligned and non-contiguous arrays, an aligned call copies nothing, and a result is a
new array on every call unless `out=` names one."""

import numpy as np
import pytest

import autotune
from autotune.host_memory import aligned_empty

RNG = np.random.default_rng(20)
FULL_RANK = RNG.uniform(-1, 1, (5, 5)).astype(np.float32)
RANK_ONE = np.outer(np.hanning(7) + 0.1, np.hanning(7) + 0.1).astype(np.float32)


def at_offset(image: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `image` whose data starts `offset` bytes past a 128-byte boundary."""
    copy = aligned_empty((image.nbytes + 128,), np.uint8, 128)[offset : offset + image.nbytes]
    copy = copy.view(image.dtype).reshape(image.shape)
    copy[...] = image
    return copy


def strided(image: np.ndarray) -> np.ndarray:
    """The same values, every other column of an array twice as wide (not contiguous)."""
    wide = np.zeros((image.shape[0], 2 * image.shape[1], *image.shape[2:]), image.dtype)
    wide[:, ::2] = image
    return wide[:, ::2]


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'none.db'}"


CASES = [
    ("direct", FULL_RANK, "valid", np.float32, (45, 62)),
    ("direct", FULL_RANK, "same", np.float32, (45, 62)),
    ("separable", RANK_ONE, "same", np.float32, (45, 62)),
    ("direct", RANK_ONE, "same", np.uint8, (37, 50, 3)),
]


@pytest.mark.parametrize("algorithm,filt,mode,dtype,shape", CASES, ids=["valid", "same", "separable", "rgb8"])
def test_in_place_calls_equal_staged_ones(db, algorithm, filt, mode, dtype, shape):
    options = {"mode": mode, "algorithm": algorithm, "dtype": dtype, "db": db, "border": "mirror"}
    if dtype == np.uint8:
        options["out_dtype"] = "same"
    convolver = autotune.Convolver(shape, filt, **options)
    staged = autotune.Convolver(shape, filt, zero_copy=False, **options)
    assert convolver.zero_copy, "PoCL shares host memory: NumPy arrays are used in place"
    assert not staged.zero_copy
    image = (RNG.uniform(0, 255, shape) if dtype == np.uint8 else RNG.uniform(-1, 1, shape)).astype(dtype)
    expected = staged(image)
    copies = {"aligned": 0, "16 bytes off": 1, "4 bytes off": 1, "not contiguous": 1}
    arrays = {
        "aligned": at_offset(image, 0),
        "16 bytes off": at_offset(image, 16),
        "4 bytes off": at_offset(image, 4) if dtype == np.float32 else at_offset(image, 1),
        "not contiguous": strided(image),
    }
    for name, array in arrays.items():
        before = convolver.host_copies
        result = convolver(array)
        assert result.dtype == expected.dtype and result.shape == expected.shape
        np.testing.assert_array_equal(result, expected, err_msg=name)
        assert convolver.host_copies - before == copies[name], name
        assert result.ctypes.data % 128 == 0, "results are made aligned, for the next call to use"
    filled = convolver.empty_image()
    filled[...] = image
    before = convolver.host_copies
    np.testing.assert_array_equal(convolver(filled), expected)
    assert convolver.host_copies == before
    del options["dtype"]  # convolve() takes it from the image
    for array in arrays.values():
        np.testing.assert_array_equal(autotune.convolve(array, filt, **options), expected)


def test_results_are_new_arrays_unless_out_is_given(db):
    image = RNG.uniform(-1, 1, (45, 62)).astype(np.float32)
    convolver = autotune.Convolver(image.shape, FULL_RANK, mode="same", db=db)
    staged = autotune.Convolver(image.shape, FULL_RANK, mode="same", db=db, zero_copy=False)
    first = convolver(image)
    kept = first.copy()
    second = convolver(image * 2)
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, kept)  # the first result was not written over
    np.testing.assert_allclose(second, 2 * kept, rtol=0, atol=1e-5)

    aligned_out = aligned_empty(image.shape, np.float32, 128)
    before = convolver.host_copies
    assert convolver(at_offset(image, 0), out=aligned_out) is aligned_out
    assert convolver.host_copies == before, "an aligned out= is written in place"
    np.testing.assert_array_equal(aligned_out, kept)
    unaligned_out = at_offset(np.zeros(image.shape, np.float32), 16)
    assert convolver(image, out=unaligned_out) is unaligned_out
    np.testing.assert_array_equal(unaligned_out, kept)
    strided_out = strided(np.zeros(image.shape, np.float32))
    assert convolver(image, out=strided_out) is strided_out
    np.testing.assert_array_equal(strided_out, kept)

    # out= the image itself: read while written would be wrong, so it is staged.
    expected = staged(image)
    in_place = at_offset(image, 0)
    before = convolver.host_copies
    assert convolver(in_place, out=in_place) is in_place
    np.testing.assert_array_equal(in_place, expected)
    assert convolver.host_copies == before + 1
