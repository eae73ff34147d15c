"""`convolve()` keeps a plan per request: a repeated call runs no lookup query and no
compile, a database that gained a faster kernel makes a new plan on the next call,
while a Convolver built before keeps its own; the cache is bounded, shared by threads
and lets go of the device on `clear_plans()`."""

import gc
import json
import shutil
import threading
import weakref

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

import autotune
import autotune.runtime as runtime
from autotune.families.conv2d import CONV2D
from autotune.plans import PLAN_CACHE_SIZE, cached_choices
from autotune.store import Best, Store, Trial
from tests.conftest import cli_json

RNG = np.random.default_rng(18)
IMAGE = RNG.uniform(-1, 1, (28, 44)).astype(np.float32)  # a 40x24 'valid' output for F=5
FILTER = RNG.uniform(-1, 1, (5, 5)).astype(np.float32)


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """A database with a real search of F=5 at 40x24 (the presets, then a few trials)."""
    path = tmp_path_factory.mktemp("searched") / "tuned.db"
    cli_json("search", "-d", "0", "-f", "5", "-s", "40x24", "--trials", "4", "--db", f"sqlite:///{path}")
    return path


@pytest.fixture
def db(searched, tmp_path):
    """A copy of the searched database, for one test to change."""
    shutil.copy(searched, tmp_path / "tuned.db")
    return f"sqlite:///{tmp_path / 'tuned.db'}"


@pytest.fixture
def lookups():
    """Statements that read the best kernels, counted as SQLite runs them (SQLAlchemy's
    cursor events on every engine of the process)."""
    seen: list[str] = []

    def count(_conn, _cursor, statement, *_args):
        if "autotune_best" in statement and "JOIN" in statement:
            seen.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    yield seen
    event.remove(Engine, "before_cursor_execute", count)


def test_repeated_calls_use_the_plan_without_a_lookup(db, lookups):
    first = autotune.convolve(IMAGE, FILTER, db=db)
    assert lookups, "the first call looks the kernel up"
    assert cached_choices()[-1].level == "exact"
    before, read = autotune.plan_cache_info(), len(lookups)
    kernels = dict(runtime._programs)
    for _ in range(5):
        np.testing.assert_array_equal(autotune.convolve(IMAGE, FILTER, db=db), first)
    after = autotune.plan_cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (5, 0)
    assert len(lookups) == read, "a repeated call reads no kernel from the database"
    assert dict(runtime._programs) == kernels, "nor compiles one"
    # Other filter values (same shape), another mode: other plans.
    autotune.convolve(IMAGE, FILTER * 2, db=db)
    autotune.convolve(IMAGE, FILTER, db=db, mode="same")
    assert autotune.plan_cache_info().misses - after.misses == 2
    # A Convolver for the same request takes the same plan.
    hits = autotune.plan_cache_info().hits
    convolver = autotune.Convolver(IMAGE.shape, FILTER, db=db)
    assert autotune.plan_cache_info().hits == hits + 1 and convolver.plan is cached_choices()[-1]
    np.testing.assert_array_equal(convolver(IMAGE), first)


def test_a_faster_kernel_stored_later_is_picked_by_new_plans_only(db):
    old = autotune.Convolver(IMAGE.shape, FILTER, db=db)
    expected = autotune.convolve(IMAGE, FILTER, db=db)
    best = old.plan
    assert best.level == "exact"
    store = Store(db)
    try:
        with store.session() as s:
            trials = list(s.scalars(sa.select(Trial).where(Trial.status == "ok")))
        other = next(t for t in trials if json.loads(t.config) != best.config and "literal" not in t.config)
        store.set_best(best.device_id, best.problem_id, other, best.time_ms / 2)
        with store.session() as s:
            assert s.get(Best, (best.device_id, best.problem_id)).trial_id == other.id
    finally:
        store.close()
    misses = autotune.plan_cache_info().misses
    np.testing.assert_allclose(autotune.convolve(IMAGE, FILTER, db=db), expected, rtol=0, atol=1e-5)
    assert autotune.plan_cache_info().misses == misses + 1, "the database changed: a new plan"
    assert cached_choices()[-1].config == CONV2D.read_config(other.config) != best.config
    assert autotune.Convolver(IMAGE.shape, FILTER, db=db).plan.config == CONV2D.read_config(other.config)
    assert old.plan.config == best.config, "a Convolver keeps the kernel it was built with"
    np.testing.assert_allclose(old(IMAGE), expected, rtol=0, atol=1e-5)


def test_the_cache_is_bounded_and_shared_by_threads(tmp_path):
    db = f"sqlite:///{tmp_path / 'none.db'}"  # no database: the fallback kernel
    filters = [FILTER + k for k in range(PLAN_CACHE_SIZE + 1)]
    for filt in filters:
        autotune.convolve(IMAGE, filt, db=db)
    assert autotune.plan_cache_info().currsize == PLAN_CACHE_SIZE
    expected = [autotune.convolve(IMAGE, filt, db=db) for filt in filters[:8]]
    results: dict[int, list[np.ndarray]] = {}

    def work(n: int) -> None:
        results[n] = [autotune.convolve(IMAGE, filt, db=db) for filt in filters[:8] * 3]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for got in results.values():
        for k, out in enumerate(got):
            np.testing.assert_array_equal(out, expected[k % 8])
    assert len(results) == 4


def test_clear_plans_lets_go_of_the_device(tmp_path):
    db = f"sqlite:///{tmp_path / 'none.db'}"
    first = autotune.convolve(IMAGE, FILTER, db=db)
    context = weakref.ref(runtime._contexts[0][1])
    autotune.clear_plans()
    assert autotune.plan_cache_info().currsize == 0
    gc.collect()
    assert context() is None, "no plan, program or queue holds the old context"
    np.testing.assert_array_equal(autotune.convolve(IMAGE, FILTER, db=db), first)
    assert autotune.plan_cache_info().currsize == 1 and runtime._contexts[0][1] is not context()


def test_a_database_of_an_older_schema_is_watched_through_its_file(tmp_path):
    """Read through an upgraded copy in memory, an older database gives plans that last
    until its file changes (here: `autotune upgrade` rewrites it)."""
    from tests.test_schema import ANSWERS, SECOND, upgraded

    path = upgraded(SECOND, tmp_path, as_this_device=True)
    db = f"sqlite:///{path}"
    image = np.load(ANSWERS / "convolve_in_f5.npy")
    filt = np.load(ANSWERS / "convolve_filter_f5.npy")
    first = autotune.convolve(image, filt, db=db)
    before = autotune.plan_cache_info()
    np.testing.assert_array_equal(autotune.convolve(image, filt, db=db), first)
    after = autotune.plan_cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (1, 0)
    cli_json("upgrade", "--db", db)
    np.testing.assert_array_equal(autotune.convolve(image, filt, db=db), first)
    assert autotune.plan_cache_info().misses == after.misses + 1, "the file changed: a new plan"
    np.testing.assert_array_equal(autotune.convolve(image, filt, db=db), first)
    assert autotune.plan_cache_info().misses == after.misses + 1


def _unaligned(array: np.ndarray) -> np.ndarray:
    """A copy of `array` that starts 4 bytes past a 128-byte boundary (read through a
    device buffer, not in place)."""
    raw = np.empty(array.nbytes + 256, dtype=np.uint8)
    start = (-raw.ctypes.data) % 128 + 4
    view = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    view[...] = array
    return view


def test_arrays_not_usable_in_place_go_through_buffers_kept_across_calls(tmp_path):
    from scipy import ndimage

    from autotune.plans import BUFFER_POOL_BYTES, clear_plans, pooled_buffers

    clear_plans()
    db = f"sqlite:///{tmp_path / 'none.db'}"
    results = []
    for seed in range(3):  # the same kept buffer each call, other data each call
        image = np.random.default_rng(seed).uniform(-1, 1, IMAGE.shape).astype(np.float32)
        got = autotune.convolve(_unaligned(image), FILTER, mode="same", border="mirror", db=db)
        expected = ndimage.correlate(image.astype(np.float64), FILTER.astype(np.float64), mode="mirror")
        np.testing.assert_allclose(got, expected, atol=1e-4)
        results.append(got)
    assert not np.array_equal(results[0], results[1])
    assert pooled_buffers() == [("input", IMAGE.nbytes)]
    assert sum(size for _, size in pooled_buffers()) <= BUFFER_POOL_BYTES
    # Aligned arrays are read in place on a CPU device: no buffer is added for them.
    aligned = autotune.Convolver(IMAGE.shape, FILTER, db=db).empty_image()
    aligned[...] = IMAGE
    autotune.convolve(aligned, FILTER, db=db)
    assert pooled_buffers() == [("input", IMAGE.nbytes)]
    clear_plans()
    assert pooled_buffers() == []
