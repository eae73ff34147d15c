"""Edges of `convolve()`'s arguments a seeded sweep of the public API found: integer
outputs at the ends of wide types, big-endian images asking for their own type, NumPy
integers as anchors, and a CLI call with a bad later input."""

import numpy as np
import pytest

import autotune
from tests.conftest import run_cli
from tests.test_pixels import NO_DB

ONES = np.ones((3, 3), np.float32)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_wide_integer_outputs_saturate_at_both_ends(dtype):
    """Sums past the type's largest value give that value (float32 rounds 2^31 - 1 up to
    2^31, where a plain cast wraps to the smallest), and NaN gives 0, as the kernels do."""
    info = np.iinfo(dtype)
    near_top = np.full((4, 4), info.max - 1000, dtype)
    top = autotune.convolve(near_top, ONES, out_dtype="same", db=NO_DB)
    assert top.dtype == dtype and (top == info.max).all()
    bottom = autotune.convolve(np.full((4, 4), info.min, dtype), ONES, out_dtype="same", db=NO_DB)
    assert (bottom == info.min).all()
    small = np.arange(16, dtype=dtype).reshape(4, 4)
    expected = sum(small[r : r + 2, c : c + 2] for r in range(3) for c in range(3))
    assert np.array_equal(autotune.convolve(small, ONES, out_dtype=-1, db=NO_DB), expected)


def test_a_big_endian_image_may_name_its_own_type_as_out_dtype():
    image = np.arange(64, dtype=">i2").reshape(8, 8)
    for out_dtype in (np.int16, np.dtype(">i2"), "same"):
        got = autotune.convolve(image, ONES, out_dtype=out_dtype, db=NO_DB)
        assert got.dtype == image.dtype
        assert np.array_equal(got, autotune.convolve(image.astype(np.int16), ONES, out_dtype=-1, db=NO_DB))
    with pytest.raises(ValueError, match="out_dtype must be"):
        autotune.convolve(image, ONES, out_dtype=np.int32, db=NO_DB)


def test_numpy_integers_are_anchors():
    image = np.random.default_rng(3).uniform(size=(9, 11)).astype(np.float32)
    kwargs = {"mode": "same", "db": NO_DB}
    numpy_anchor = autotune.convolve(image, ONES, anchor=(np.int64(0), np.int32(2)), **kwargs)
    assert np.array_equal(numpy_anchor, autotune.convolve(image, ONES, anchor=(0, 2), **kwargs))
    with pytest.raises(TypeError, match="anchor must be"):
        autotune.convolve(image, ONES, anchor=(True, 1), **kwargs)


def test_cli_writes_no_output_when_a_later_input_is_bad(tmp_path):
    """Several inputs into a folder: the second cannot be filtered, so the first one's
    output, already computed, is not left behind; the error names the input."""
    np.save(tmp_path / "good.npy", np.ones((8, 8), np.float32))
    np.save(tmp_path / "five.npy", np.ones((8, 8, 5), np.float32))
    out = tmp_path / "out"
    inputs = (str(tmp_path / "good.npy"), str(tmp_path / "five.npy"))
    args = ("convolve", *inputs, f"{out}/", "--filter", "box:3")
    result = run_cli(*args, "--db", NO_DB)
    assert result.returncode == 2 and "five.npy" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()  # nor the folder made for them
    np.save(tmp_path / "five.npy", np.ones((8, 8, 3), np.float32))
    assert run_cli(*args, "--db", NO_DB).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["five.npy", "good.npy"]


def test_a_complex_border_value_is_refused_as_a_python_complex_is():
    image = np.ones((6, 6), np.float32)
    for value in (1j, np.complex64(1j)):
        with pytest.raises(TypeError, match="border_value must be a number"):
            autotune.convolve(image, ONES, mode="same", border="constant", border_value=value, db=NO_DB)
    corner = autotune.convolve(image, ONES, mode="same", border_value=np.float16(2), db=NO_DB)[0, 0]
    assert corner == 4 * 1 + 5 * 2  # 4 pixels and 5 border values under the filter
