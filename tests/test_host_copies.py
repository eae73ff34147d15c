"""Host copies split over threads, and the page-locked staging `convolve()` keeps for a
GPU's transfers: both exercised on the real PoCL device, their results equal to a plain
`np.copyto` and to a call that stages nothing."""

import threading

import numpy as np
import pyopencl as cl
import pytest

import autotune
import autotune.host_memory as host_memory
from autotune.host_memory import PARALLEL_COPY_BYTES, parallel_copy, staged_download, staged_upload
from autotune.plans import clear_plans, lent_buffers, pooled_buffers

RNG = np.random.default_rng(41)
LARGE = RNG.uniform(-300, 300, (1200, 1100)).astype(np.float64)  # 10 MB: over the split threshold


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize(
    "source, dtype",
    [
        (LARGE, np.float32),  # converted while copied
        (np.tile(LARGE.astype(np.float32), 2)[:, ::2], np.float32),  # a strided source
        (RNG.integers(0, 256, (1500, 1000, 3), dtype=np.uint8), np.uint8),  # channels
        (RNG.uniform(size=(1, 2_000_000)).astype(np.float32), np.float32),  # one row: not split
        (RNG.uniform(size=(3, 5)), np.float32),  # small: not split
    ],
)
def test_parallel_copy_equals_copyto(source, dtype, threads):
    if source.shape[0] > 1 and source.size > 1000:
        assert source.size * np.dtype(dtype).itemsize >= PARALLEL_COPY_BYTES  # the split path
    expected = np.empty(source.shape, dtype)
    np.copyto(expected, source, casting="unsafe")
    got = np.full(source.shape, 7, dtype)
    parallel_copy(got, source, threads)
    np.testing.assert_array_equal(got, expected)


def test_large_copies_run_on_the_pool_and_a_broadcast_source_too():
    host_memory._copiers = None  # a fresh pool: its threads exist only if this copy used them
    target = np.empty(LARGE.shape, np.float32)
    parallel_copy(target, LARGE, threads=3)
    names = [thread.name for thread in threading.enumerate()]
    assert sum(name.startswith("autotune-copy") for name in names) >= 2
    np.testing.assert_array_equal(target, LARGE.astype(np.float32))
    parallel_copy(target, LARGE[0], threads=3)  # one row, broadcast down, as np.copyto takes it
    np.testing.assert_array_equal(target, np.broadcast_to(LARGE[0].astype(np.float32), target.shape))


def test_staging_round_trip_through_lent_buffers_is_exact_and_kept():
    clear_plans()
    info, context, queue = autotune.runtime._context(0)
    image = LARGE.astype(np.float32)
    seen = []
    for seed in range(2):  # other values each call, the same staging both times
        image = np.random.default_rng(seed).uniform(-1, 1, image.shape).astype(np.float32)
        back = np.empty_like(image)
        with lent_buffers(context, image.nbytes, image.nbytes, queue) as (into, out_of):
            assert into.staging is not None and out_of.staging is not None
            staged_upload(queue, into.buffer, image, into.staging)
            cl.enqueue_copy(queue, out_of.buffer, into.buffer)
            staged_download(queue, back, out_of.buffer, out_of.staging)
            seen.append((into.staging.ctypes.data, out_of.staging.ctypes.data))
        np.testing.assert_array_equal(back, image)
    assert seen[0] == seen[1]
    assert pooled_buffers() == [("input", image.nbytes), ("output", image.nbytes)]
    clear_plans()
    assert pooled_buffers() == []


def test_a_staged_convolver_call_on_a_large_image_equals_convolve(tmp_path):
    """`zero_copy=False` stages as on a GPU, its host copies split over threads."""
    db = f"sqlite:///{tmp_path / 'none.db'}"
    image = LARGE.astype(np.float32)
    taps = RNG.uniform(-1, 1, (3, 3)).astype(np.float32)
    staged = autotune.Convolver(image.shape, taps, db=db, zero_copy=False, mode="same", border="reflect")
    expected = autotune.convolve(image, taps, db=db, mode="same", border="reflect")
    np.testing.assert_array_equal(staged(image), expected)
    np.testing.assert_array_equal(staged(LARGE), expected)  # float64 in: converted on the way


def test_the_pool_counts_staging_and_keeps_a_large_last_call_up_to_twice_its_bound(monkeypatch):
    """Staging counts as much as its buffer; older calls' buffers make room; one call over
    the bound keeps its own up to twice the bound, and larger ones are let go."""
    import autotune.plans as plans

    clear_plans()
    _, context, queue = autotune.runtime._context(0)
    monkeypatch.setattr(plans, "BUFFER_POOL_BYTES", 3000)
    with lent_buffers(context, 700, 0, queue):
        pass
    with lent_buffers(context, 700, 0):  # no staging: 700 more, 2100 in all
        pass
    assert pooled_buffers() == [("input", 700), ("input", 700)]
    with lent_buffers(context, 500, 0, queue):  # 1000 more: the oldest goes
        pass
    assert pooled_buffers() == [("input", 700), ("input", 500)]
    with lent_buffers(context, 2000, 1000, queue) as (into, out_of):  # 6000: kept alone
        kept = (into.buffer, out_of.buffer)
    assert pooled_buffers() == [("input", 2000), ("output", 1000)]
    with lent_buffers(context, 2000, 1000, queue) as (into, out_of):
        assert (into.buffer, out_of.buffer) == kept
    with lent_buffers(context, 4000, 0, queue):  # 8000, over twice the bound: not kept
        pass
    assert pooled_buffers() == []
    clear_plans()


def test_a_forked_child_copies_with_threads_of_its_own():
    """The pool's threads do not survive a fork: a child that copies makes its own pool
    (without it, its copies would wait forever on threads that are not there)."""
    import multiprocessing

    target = np.empty(LARGE.shape, np.float32)
    parallel_copy(target, LARGE, threads=2)  # the parent's pool exists
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        equal = pool.apply_async(_copies_equal, ()).get(timeout=60)
    assert equal


def _copies_equal() -> bool:
    target = np.empty(LARGE.shape, np.float32)
    parallel_copy(target, LARGE, threads=2)
    return bool(np.array_equal(target, LARGE.astype(np.float32)))
