"""A staged NumPy call in chunks of rows gives exactly the unchunked call's result, for
'valid' and 'same' output with every border, pixel types, channels and both families;
bad chunk counts are one clear error. (What the overlap gains needs a GPU:
bench/overlap_chunks.py.)"""

import numpy as np
import pytest

import autotune
from autotune.chunks import plan_chunks
from autotune.families.conv2d import Conv2DProblem

RNG = np.random.default_rng(30)
FULL_RANK = RNG.uniform(-1, 1, (5, 5)).astype(np.float32)
TALL = RNG.uniform(-1, 1, (7, 3)).astype(np.float32)  # rows x F: a halo of 6 rows, 3 before in 'same'
RANK_ONE = np.outer(np.hanning(7) + 0.1, np.hanning(7) + 0.1).astype(np.float32)


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'none.db'}"


CASES = [
    ("valid", "constant", FULL_RANK, "direct", np.float32, (61, 47), None),
    ("valid", "constant", TALL, "direct", np.float32, (61, 47), None),
    ("same", "constant", FULL_RANK, "direct", np.float32, (61, 47), None),
    ("same", "reflect", TALL, "direct", np.float32, (61, 47), None),
    ("same", "mirror", TALL, "direct", np.float32, (61, 47), None),
    # The anchor on the filter's last row: all the border above, the top chunk reads the most.
    ("same", "mirror", TALL, "direct", np.float32, (61, 47), (0, 6)),
    ("same", "reflect", FULL_RANK, "direct", np.float32, (61, 47), (4, 4)),
    ("same", "mirror", RANK_ONE, "direct", np.uint8, (40, 33, 3), None),
    ("same", "replicate", RANK_ONE, "separable", np.float32, (61, 47), None),
    ("valid", "constant", RANK_ONE, "separable", np.float32, (61, 47), None),
]


@pytest.mark.parametrize("mode,border,filt,algorithm,dtype,shape,anchor", CASES)
def test_chunked_calls_equal_unchunked_ones(db, mode, border, filt, algorithm, dtype, shape, anchor):
    options = {"mode": mode, "border": border, "algorithm": algorithm, "dtype": dtype, "db": db}
    if anchor is not None:
        options["anchor"] = anchor
    if dtype == np.uint8:
        options["out_dtype"] = "same"
    if mode == "same" and border == "constant":
        options["border_value"] = 0.25
    image = (RNG.uniform(0, 255, shape) if dtype == np.uint8 else RNG.uniform(-1, 1, shape)).astype(dtype)
    whole = autotune.Convolver(shape, filt, zero_copy=False, **options)
    assert whole.plan.algorithm == algorithm
    expected = whole(image)
    most = expected.shape[0] // filt.shape[0]  # each chunk at least the filter's rows
    for chunks in sorted({c for c in (2, 3, 7, most) if c <= most}):
        chunked = autotune.Convolver(shape, filt, zero_copy=False, chunks=chunks, **options)
        np.testing.assert_array_equal(chunked(image), expected, err_msg=f"{chunks} chunks")
        np.testing.assert_array_equal(chunked(image), expected, err_msg=f"{chunks} chunks, again")
        out = np.full_like(expected, 7)
        assert chunked(image[:, :], out=out) is out
        np.testing.assert_array_equal(out, expected)


def test_chunks_cover_the_output_once_and_read_only_their_halo():
    problem = Conv2DProblem(5, 40, 30, border="mirror", anchor=2, anchor_y=1)
    chunks = plan_chunks(problem, (1, 3), 5, 30, 4, "mirror")
    assert [c.first_out for c in chunks] == [0, 8, 15, 22] and sum(c.rows_out for c in chunks) == 30
    assert [(c.first_in, c.rows_in, c.skip) for c in chunks] == [
        (0, 11, 0),
        (7, 11, 1),
        (14, 11, 1),
        (21, 9, 1),
    ]
    assert all(c.problem.out_height == c.rows_in for c in chunks)  # 'same': the band is its own image
    valid = plan_chunks(Conv2DProblem(5, 40, 26), None, 5, 30, 2, "none")
    assert [(c.first_in, c.rows_in, c.first_out, c.rows_out) for c in valid] == [
        (0, 17, 0, 13),
        (13, 17, 13, 13),
    ]


@pytest.mark.parametrize("chunks,message", [(0, "chunks must be a positive int"), (2.0, "positive int")])
def test_bad_chunk_counts_are_one_clear_error(db, chunks, message):
    with pytest.raises(ValueError, match=message):
        autotune.Convolver((30, 40), FULL_RANK, db=db, chunks=chunks)


def test_more_chunks_than_rows_wrap_and_batches_are_refused(db):
    with pytest.raises(ValueError, match="chunks must be from 1 to 5 .* of the 26 output rows.*got 6"):
        autotune.Convolver((30, 40), FULL_RANK, db=db, chunks=6)
    with pytest.raises(ValueError, match="wrap"):
        autotune.Convolver((30, 40), FULL_RANK, db=db, chunks=2, mode="same", border="wrap")
    with pytest.raises(ValueError, match="a batch"):
        autotune.Convolver((2, 30, 40), FULL_RANK, db=db, chunks=2, batch=True)
