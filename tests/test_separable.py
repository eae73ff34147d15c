"""The separable family: kernels agree with SciPy for every knob value, rank and awkward
size; the measuring worker, the search and `best` run it like any family.

Kernels run here through plain pyopencl with the manifest's launch rule, and are
compared with scipy.signal.correlate2d on the full filter, not with our own reference.
"""

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.array
import pytest
from scipy import signal

from autotune.devices import device_info
from autotune.errors import UsageError
from autotune.families import get_family
from autotune.families.separable import SEPARABLE, SeparableProblem
from autotune.families.separable.render import generate, literal_taps
from tests.conftest import FAST, GPU_LIMITS, ROOT, cli_json, device_vectors, run_cli
from tests.opencl_runner import _opencl, kernel_signatures

SPACE = SEPARABLE.space
DEVICE = device_info(0)
# Device 0 with every vector width (`widest_vector_bytes`), for rules about other knobs.
FULL_VECTORS = dataclasses.replace(DEVICE, widest_vector_bytes=128)
BASE = {"local_x": 8, "local_y": 4, "work_x": 2, "work_y": 2}


def run_separable(variant, image, row_taps, column_taps):
    """Launch as a host would: the ABI's argument order, the manifest's global size; a
    two-launch kernel as its manifest says (PASSES_ABI, a scratch buffer between them)."""
    context, queue = _opencl()
    f = row_taps.shape[1]
    in_h, in_w = image.shape
    out_h, out_w = in_h - f + 1, in_w - f + 1
    mf = cl.mem_flags

    def buffer(array):
        return cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(array))

    output = np.full((out_h, out_w), np.nan, dtype=np.float32)
    output_buffer = cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=output)
    program = cl.Program(context, variant.source).build(options=list(variant.build_options))
    if variant.later_launches:
        rows, columns = variant.launches
        pitch = -(-out_w // 4) * 4  # out_width rounded up to a multiple of 4
        scratch = cl.Buffer(context, mf.READ_WRITE, size=4 * row_taps.shape[0] * in_h * pitch)
        cl.Kernel(program, rows.kernel_name)(
            queue,
            rows.global_size((out_w, in_h)),
            rows.local_size,
            buffer(image),
            buffer(row_taps),
            scratch,
            *(np.int32(n) for n in (in_w, in_h, out_w)),
        )
        cl.Kernel(program, columns.kernel_name)(
            queue,
            columns.global_size((out_w, out_h)),
            columns.local_size,
            scratch,
            buffer(column_taps),
            output_buffer,
            *(np.int32(n) for n in (in_h, out_w, out_h)),
        )
        cl.enqueue_copy(queue, output, output_buffer)
        return output
    kernel = cl.Kernel(program, variant.kernel_name)
    sizes = [np.int32(n) for n in (in_w, in_h, out_w, out_h)]
    global_size = variant.global_size((out_w, out_h))
    kernel(
        queue,
        global_size,
        variant.local_size,
        buffer(image),
        buffer(row_taps),
        buffer(column_taps),
        output_buffer,
        *sizes,
    )
    cl.enqueue_copy(queue, output, output_buffer)
    return output


def check(config, filter_width, rank, out_size, seed=0, taps=None):
    rng = np.random.default_rng(seed)
    out_w, out_h = out_size
    image = rng.uniform(-1, 1, (out_h + filter_width - 1, out_w + filter_width - 1)).astype(np.float32)
    if taps is None:
        taps = tuple(rng.uniform(-1, 1, (rank, filter_width)).astype(np.float32) for _ in range(2))
    row_taps, column_taps = taps
    variant = generate(config, filter_width, rank, SPACE, taps)
    if literal_taps(variant.config):
        # A kernel with the taps compiled in gets NaNs as its arguments: it must not read them.
        row_taps, column_taps = np.full_like(row_taps, np.nan), np.full_like(column_taps, np.nan)
    got = run_separable(variant, image, row_taps, column_taps)
    full = np.einsum("kr,kc->rc", taps[1].astype(np.float64), taps[0].astype(np.float64))
    expected = signal.correlate2d(image.astype(np.float64), full, mode="valid")
    bound = 4 * (2 * filter_width + rank + 1) * np.finfo(np.float32).eps * np.abs(full).sum() + 1e-6
    assert got.shape == expected.shape
    assert np.all(np.isfinite(got)), "an output was not written"
    np.testing.assert_allclose(got, expected, rtol=0, atol=bound)


def _knob_cases():
    """Every value of every knob, each in the valid config nearest to one base."""
    for name, knob in SPACE.knobs.items():
        if name == "output_conversion":  # integer outputs only: tests/test_separable_pixels.py
            continue
        if name == "fast_fir":  # from F = 11 on: tests/test_separable_pixels.py
            continue
        for value in knob.values:
            config = SPACE.with_value(BASE, name, value, {"filter_width": 5, "rank": 2}, DEVICE)
            yield pytest.param(name, value, config, id=f"{name}={value}")


@pytest.mark.parametrize("name,value,config", list(_knob_cases()))
def test_every_knob_value_matches_scipy(name, value, config):
    if config is None and name == "x_vector":  # a vector device 0 does not take: that rule only
        wider = SPACE.with_value(BASE, name, value, {"filter_width": 5, "rank": 2}, FULL_VECTORS)
        assert wider is not None, f"no valid config on any CPU has {name}={value}"
        reasons = SPACE.violations(wider, {"filter_width": 5, "rank": 2}, DEVICE)
        assert reasons and all("vector wider" in r for r in reasons), reasons
        return
    assert config is not None, f"no valid config on this device has {name}={value}"
    assert config[name] == value
    check(config, 5, 2, (37, 23))
    check(config, 4, 3 if config["paired_terms"] else 1, (11, 9), seed=1)  # pairs need rank >= 2


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("out_size", [(1, 1), (3, 2), (13, 7), (5, 67), (67, 5)])
@pytest.mark.parametrize("row_columns", ["strided", "contiguous", "transposed"])
def test_ranks_and_awkward_sizes(rank, out_size, row_columns):
    cache_input = rank == 2 or row_columns == "transposed"
    config = {**BASE, "work_x": 4, "work_y": 4, "row_columns": row_columns, "cache_input": cache_input}
    check(config, 3 + rank, rank, out_size, seed=rank)


@pytest.mark.parametrize(
    "x_vector,work_x,stream_rows,local_x,tap_space",
    [
        (4, 8, 16, "2", "literal"),
        (8, 64, 32, "1", "constant"),
        (16, 16, 16, "4", "global"),
        (16, 64, 256, "1", "literal"),
    ],
)
@pytest.mark.parametrize("rank", [1, 3])
def test_streaming_strips_match_scipy(x_vector, work_x, stream_rows, local_x, tap_space, rank):
    """Strips that end inside the image, past its right edge, past its last row, and
    strips narrower than the image's width or taller than its height; widths 1 to 33."""
    config = {"stream_rows": stream_rows, "x_vector": x_vector, "work_x": work_x, "local_x": int(local_x)}
    config = device_vectors(config)
    config |= {"local_y": 1, "tap_space": tap_space}
    cases = [(5, (70, 40)), (4, (13, 7)), (1, (1, 1)), (9, (5, 67)), (33, (67, 5)), (2, (130, 17))]
    for seed, (width, out_size) in enumerate([*cases, (17, (64, 33))]):
        check(config, width, rank, out_size, seed=seed)


def test_the_streaming_form_is_for_explicit_vectors_only():
    def broken(config, device=DEVICE):
        return SPACE.violations(SPACE.complete(config), {"filter_width": 5, "rank": 1}, device)

    assert broken({"stream_rows": 16})
    assert broken({"x_vector": 8, "work_x": 8})
    assert broken({"stream_rows": 16, "x_vector": 8, "work_x": 4})
    assert broken({"stream_rows": 16, "x_vector": 8, "work_x": 8, "cache_input": True})
    assert not broken({"stream_rows": 16, "x_vector": 8, "work_x": 64})
    gpu = dataclasses.replace(DEVICE, native_vector_width=1)
    assert broken({"stream_rows": 16, "x_vector": 4, "work_x": 8}, gpu)


def test_a_streaming_group_whose_rings_outgrow_a_thread_stack_is_ruled_out():
    """PoCL keeps every work-item's private ring of a group on one thread's stack: 1024
    work-items of 8 KiB rings (F = 16, 64 columns) killed the process; 256 of them run."""
    base = {"stream_rows": 64, "x_vector": 16, "work_x": 64, "tap_space": "constant"}
    problem = {"filter_width": 16, "rank": 1}
    assert SPACE.violations(SPACE.complete({**base, "local_x": 64, "local_y": 16}), problem, FULL_VECTORS)
    assert SPACE.violations(
        SPACE.complete({**base, "local_x": 32, "local_y": 8}), {**problem, "rank": 3}, FULL_VECTORS
    )
    fits = {**base, "local_x": 16, "local_y": 16}
    assert not SPACE.violations(SPACE.complete(fits), problem, FULL_VECTORS)
    check(device_vectors(fits), 16, 1, (64, 64))


@pytest.mark.parametrize("tiles_down", [2, 4, 32])
@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize(
    "row_columns,cache_input", [("strided", False), ("contiguous", True), ("transposed", True)]
)
def test_tiles_that_walk_down_keep_the_rows_they_share(tiles_down, rank, row_columns, cache_input):
    """Tiles of 4 rows at F = 5 (the most rows two tiles can share), over heights that end
    inside a tile, on the last tile of a walk and past the last walk."""
    config = {**BASE, "local_y": 2, "row_columns": row_columns, "cache_input": cache_input}
    config["tiles_down"] = tiles_down
    for seed, out_size in enumerate([(13, 7), (37, 23), (5, 67), (9, 8)]):
        check(config, 5, rank, out_size, seed=seed)
    check(config, 4, rank, (11, 9), seed=9)


@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize(
    "row_columns,cache_input,row_window",
    [("strided", False, 0), ("contiguous", True, 8), ("transposed", True, 4)],
)
def test_columns_that_carry_their_rows_in_registers(rank, row_columns, cache_input, row_window):
    config = {**BASE, "local_y": 1, "work_y": 4, "row_columns": row_columns, "cache_input": cache_input}
    config |= {"row_window": row_window, "tiles_down": 4, "carry_rows": True}
    for seed, out_size in enumerate([(13, 7), (37, 23), (5, 67), (9, 16)]):
        check(config, 5, rank, out_size, seed=seed)
    # Tiles of fewer than F - 1 rows: the carried values span several tiles.
    check({**config, "work_y": 2, "tiles_down": 32}, 9, rank, (11, 70), seed=9)
    with pytest.raises(UsageError, match="carry_rows needs local_y=1"):
        generate({**config, "local_y": 2}, 5, rank, SPACE)


TWO_PASSES = {"passes": 2, "row_columns": "contiguous", "local_x": 8, "local_y": 4, "work_x": 4, "work_y": 8}


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("out_size", [(1, 1), (3, 2), (13, 7), (5, 67), (67, 5)])
@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"row_columns": "strided", "work_x": 2, "work_y": 16},
        {"work_x": 8, "work_y": 1, "local_x": 1, "local_y": 1, "tap_space": "literal"},
        {
            "row_columns": "strided",
            "work_x": 1,
            "work_y": 4,
            "local_x": 16,
            "local_y": 2,
            "tap_space": "global",
        },
        {"row_loads": 4, "work_x": 8, "local_x": 4},
        {"column_vector": 4, "work_x": 8, "local_x": 2},
        {"column_vector": 4, "row_loads": 4, "work_x": 4, "work_y": 2, "local_y": 1, "tap_space": "literal"},
        {"column_vector": 4, "row_columns": "strided", "work_x": 4, "work_y": 16},
    ],
    ids=[
        "contiguous",
        "strided",
        "literal-1x1",
        "strided-global",
        "vector-reads",
        "quads",
        "all-vectors",
        "quads-1",
    ],
)
def test_two_launches_match_scipy(rank, out_size, changes):
    """The row pass into a scratch buffer, then the column pass: every row layout, tap
    space and rank, on outputs smaller than a work-group and than a work-item's window."""
    check({**TWO_PASSES, **changes}, 5, rank, out_size, seed=rank)
    check({**TWO_PASSES, **changes}, 2, rank, out_size[::-1], seed=7)


def test_two_launches_are_one_variant_with_their_own_fingerprint():
    problem = SeparableProblem(5, 2, 37, 23)
    variant = SEPARABLE.render(TWO_PASSES, problem)
    assert [launch.kernel_name for launch in variant.launches] == ["separable_rows", "separable_columns"]
    assert variant.launches[0].work_per_item == (4, 1) and variant.launches[1].work_per_item == (4, 8)
    assert SEPARABLE.scratch(variant, problem) == {"rows": 4 * 2 * 27 * 40}  # rows 40 floats apart
    again = type(variant).from_dict(json.loads(json.dumps(variant.to_dict())))
    assert again == variant and again.fingerprint == variant.fingerprint
    one_launch = dataclasses.replace(variant, later_launches=())
    assert one_launch.fingerprint != variant.fingerprint
    same = SeparableProblem(5, 2, 37, 23, border="mirror")  # F - 1 rows of border per term
    assert SEPARABLE.scratch(SEPARABLE.render(TWO_PASSES, same), same) == {"rows": 4 * 2 * 27 * 40}
    with pytest.raises(UsageError, match="passes=2"):
        SEPARABLE.render({**TWO_PASSES, "tiles_down": 2}, problem)
    with pytest.raises(UsageError, match="row_loads=4"):
        SEPARABLE.render({**TWO_PASSES, "row_loads": 4, "work_x": 2}, problem)


# Every border with two of the anchors 0, 2, 4 in turn: 10 of the 15 pairs.
@pytest.mark.parametrize(
    "border,anchor",
    [
        (border, (0, 2, 4)[(i + k) % 3])
        for i, border in enumerate(["constant", "replicate", "reflect", "mirror", "wrap"])
        for k in (0, 1)
    ],
)
def test_two_launches_give_scipys_same_output(border, anchor):
    """'same' output in two launches, as a host runs them (a caller's border value for the
    constant border), against scipy.ndimage.correlate with the same origin: windows inside
    the image, past each edge, and images narrower and shorter than the filter."""
    import scipy.ndimage as ndimage

    from autotune.launcher import Launcher
    from tests.test_pixels import SCIPY_MODES

    context, queue = _opencl()
    mf = cl.mem_flags
    configs = [
        TWO_PASSES,
        {**TWO_PASSES, "row_loads": 4, "column_vector": 4, "local_x": 4, "local_y": 2},
        {**TWO_PASSES, "row_columns": "strided", "work_x": 2, "work_y": 2, "tap_space": "literal"},
    ]
    for number, (height, width) in enumerate(((40, 67), (3, 2), (29, 4))):
        rng = np.random.default_rng(number)
        image = rng.uniform(-1, 1, (height, width)).astype(np.float32)
        row_taps, column_taps = (rng.uniform(-1, 1, (2, 5)).astype(np.float32) for _ in range(2))
        full = np.einsum("kr,kc->rc", column_taps.astype(np.float64), row_taps.astype(np.float64))
        origin = anchor - 2  # SciPy's origin: the tap over each output, from the centre
        expected = ndimage.correlate(
            image.astype(np.float64), full, mode=SCIPY_MODES[border], cval=2.5, origin=(origin, origin)
        )
        problem = SeparableProblem(5, 2, width, height, border=border, anchor=anchor)
        for config in configs:
            variant = SEPARABLE.render(config, problem, (row_taps, column_taps))
            launcher = Launcher(SEPARABLE, variant, cl.Program(context, variant.source).build())
            buffers = {
                name: cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=array)
                for name, array in (("input", image), ("row_taps", row_taps), ("column_taps", column_taps))
            }
            got = np.full_like(image, np.nan)
            buffers["output"] = cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=got)
            launcher.enqueue(queue, problem, {**buffers, "border_value": 2.5})
            cl.enqueue_copy(queue, got, buffers["output"])
            queue.finish()
            np.testing.assert_allclose(got, expected, rtol=0, atol=2e-5, err_msg=f"{config} {height}x{width}")


@pytest.mark.parametrize("dtype,out_dtype", [("uint8", "uint8"), ("float16", "float32"), ("int16", "int16")])
def test_two_launches_read_and_write_every_pixel_type(dtype, out_dtype):
    """Narrow pixels in, float32 row-pass values between the launches, rounded and
    saturated out: through the measuring worker, which verifies against the reference."""
    from autotune.evaluate import Evaluator

    problem = SeparableProblem(7, 2, 41, 19, dtype, out_dtype=out_dtype)
    with Evaluator(0, SEPARABLE, policy=FAST, timeout_s=60) as evaluator:
        measured = evaluator.evaluate(TWO_PASSES, problem)
        assert measured.ok, measured.error
        literal = evaluator.evaluate(
            {**TWO_PASSES, "tap_space": "literal", "row_columns": "strided"}, problem
        )
        assert literal.ok, literal.error
        for width in (44, 45):  # rows 4-pixel aligned (read as vectors) and not
            vectors = dataclasses.replace(problem, out_width=width - 6)
            for changes in ({"row_loads": 4}, {"row_loads": 4, "column_vector": 4}):
                measured = evaluator.evaluate({**TWO_PASSES, **changes}, vectors)
                assert measured.ok, measured.error


def test_a_wrong_two_launch_kernel_fails_verification():
    """The worker checks what the last launch wrote: a column pass that skips a tap of the
    last term is a wrong result, not a fast kernel."""
    from autotune.session import Session

    problem = SeparableProblem(5, 2, 29, 17)
    variant = SEPARABLE.render(TWO_PASSES, problem)
    broken = dataclasses.replace(variant, source=variant.source.replace("column_taps[9]", "0.0f"))
    assert broken.source != variant.source
    session = Session(0)
    assert session.measure(variant, problem, FAST).ok
    wrong = session.measure(broken, problem, FAST)
    assert wrong.status.value == "wrong_result" and "max error" in wrong.error


def test_a_launch_that_fails_behind_the_gate_leaves_the_queue_running():
    """Several launches are timed behind a user event opened once a batch is queued; when
    queueing fails partway the event is opened all the same, so what was queued runs and
    the next variant's commands are not stuck behind it."""
    import threading

    from autotune.launcher import Launcher
    from autotune.outcomes import TimingPolicy
    from autotune.session import _time

    context, _ = _opencl()
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    problem = SeparableProblem(5, 1, 40, 24)
    variant = SEPARABLE.render(TWO_PASSES, problem)
    launcher = Launcher(SEPARABLE, variant, cl.Program(context, variant.source).build())
    mf = cl.mem_flags
    buffers = {
        name: cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(array))
        for name, array in problem.inputs().items()
    }
    buffers["output"] = cl.Buffer(context, mf.READ_WRITE, size=4 * 40 * 24)
    calls = []

    def launch(wait_for=None):
        calls.append(wait_for)
        if len(calls) == 3:  # the second batch's second run
            raise cl.RuntimeError("queueing failed")
        return launcher.enqueue(queue, problem, buffers, wait_for)

    with pytest.raises(cl.RuntimeError, match="queueing failed"):
        _time(launch, TimingPolicy(min_runs=3, max_runs=3), lambda: cl.UserEvent(context))
    assert calls[0] is not None and calls[1] is not None  # each batch's first run behind its gate
    finished = threading.Thread(target=queue.finish, daemon=True)
    finished.start()
    finished.join(timeout=60)
    assert not finished.is_alive(), "the queue is still waiting on a gate"


def test_convolve_and_a_convolver_run_a_stored_two_launch_kernel(tmp_path):
    """A database whose best separable kernel is two launches: `convolve()`, a Convolver
    on NumPy arrays (also in chunks) and on device arrays give SciPy's answer."""
    import autotune

    db = f"sqlite:///{tmp_path / 'passes.db'}"
    cli_json(
        "search", "--family", "separable", "-d", "0", "-f", "5", "-s", "64x48", "--trials", "5", "--db", db
    )
    _bests_of_form(db, 5, passes=2)
    image = np.random.default_rng(11).uniform(-1, 1, (52, 68)).astype(np.float32)
    gaussian = _gaussian(5, 1.0).astype(np.float32)
    expected = signal.correlate2d(image.astype(np.float64), gaussian.astype(np.float64), mode="valid")
    plan = autotune.plan(image.shape, 5, filter=gaussian, db=db, algorithm="separable")
    assert plan.config["passes"] == 2
    got = autotune.convolve(image, gaussian, algorithm="separable", db=db)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    for options in ({}, {"zero_copy": False}, {"zero_copy": False, "chunks": 3}):
        convolver = autotune.Convolver(image.shape, gaussian, algorithm="separable", db=db, **options)
        assert convolver.plan.config["passes"] == 2
        np.testing.assert_allclose(convolver(image), expected, rtol=0, atol=1e-5)
        np.testing.assert_allclose(convolver(image * 2), 2 * expected, rtol=0, atol=2e-5)
    on_device = pyopencl.array.to_device(convolver.queue, image)
    out = convolver(on_device)
    np.testing.assert_allclose(out.get(), expected, rtol=0, atol=1e-5)
    convolver(on_device, out=out)  # chained: the arguments stay set
    np.testing.assert_allclose(out.get(), expected, rtol=0, atol=1e-5)

    exported = tmp_path / "kernels"
    args = ("export", "--family", "separable", "-d", "0", "--out", str(exported), "--format", "cl,json")
    cli_json(*args, "--db", db)
    manifest = json.loads((exported / "separable_f5_r1.json").read_text())
    assert [launch["kernel_name"] for launch in manifest["launches"]] == [
        "separable_rows",
        "separable_columns",
    ]
    assert manifest["launches"][0]["arguments"][2] == "__global float * restrict rows"
    assert "rows" in manifest["scratch"]
    source = (exported / manifest["source"]).read_text()
    assert kernel_signatures(source) == {
        launch["kernel_name"]: launch["arguments"] for launch in manifest["launches"]
    }
    assert manifest["launches"][1]["extent"] == ["out_width", "out_height"]
    assert "kernel_name" not in manifest and "local_size" not in manifest  # only per launch


def test_walking_tiles_need_room_for_the_rows_they_share():
    config = {**BASE, "local_y": 2, "work_y": 2, "tiles_down": 2}
    with pytest.raises(UsageError, match="F - 1 rows"):
        generate(config, 7, 1, SPACE)
    assert SEPARABLE.render({**config}, SeparableProblem(5, 1, 8, 8)).work_per_item == (2, 4)


@pytest.mark.parametrize(
    "name,row,column",
    [
        ("box 5", np.ones(5) / 5, np.ones(5) / 5),
        ("gaussian 9", np.exp(-((np.arange(9) - 4) ** 2) / 8), np.exp(-((np.arange(9) - 4) ** 2) / 8)),
        ("sobel x", np.array([-1.0, 0.0, 1.0]), np.array([1.0, 2.0, 1.0])),
    ],
)
def test_the_filters_people_use(name, row, column):
    taps = (row[None, :].astype(np.float32), column[None, :].astype(np.float32))
    for config in ({**BASE, "tap_space": "literal"}, {**BASE, "tap_space": "global", "cache_input": True}):
        check(config, row.size, 1, (29, 17), taps=taps)


def test_bad_points_and_problems_are_refused():
    with pytest.raises(UsageError, match="rank must be an integer from 1 to 8"):
        generate({}, 5, 9)
    with pytest.raises(UsageError, match="give the filter"):
        generate({"tap_space": "literal"}, 5, 1)
    with pytest.raises(UsageError, match=r"shape \(2, 5\)"):
        generate({"tap_space": "literal"}, 5, 2, taps=(np.ones((1, 5)), np.ones((1, 5))))
    with pytest.raises(UsageError, match="rank"):
        SEPARABLE.problem({"filter_width": 5, "out_width": 8, "out_height": 8, "dtype": "float32"})
    assert get_family("separable") is SEPARABLE


def test_the_worker_measures_and_verifies_it():
    from autotune.evaluate import Evaluator

    problem = SeparableProblem(7, 2, 40, 24)
    with Evaluator(0, SEPARABLE, policy=FAST, timeout_s=60) as evaluator:
        for preset in SPACE.presets.values():
            integer_out = preset.config["output_conversion"] == "bits"  # for integer outputs only
            kind = dataclasses.replace(problem, dtype="uint8", out_dtype="uint8") if integer_out else problem
            if preset.config["fast_fir"] != "none":  # outputs in pairs: for wide filters
                kind = dataclasses.replace(kind, filter_width=25)
            measured = evaluator.evaluate(preset.config, kind)
            if SEPARABLE.violations(preset.config, kind, FULL_VECTORS) != SEPARABLE.violations(
                preset.config, kind, DEVICE
            ):  # its vectors are wider than device 0 takes: refused, not run
                assert measured.status.value == "invalid" and "vector wider" in measured.error
                continue
            assert measured.ok, f"{preset.name}: {measured.error}"
            assert measured.time_ms > 0
        literal = evaluator.evaluate({**BASE, "tap_space": "literal"}, problem)
        assert literal.ok, literal.error
        too_big = evaluator.evaluate({**BASE, "local_x": 256, "local_y": 32}, problem)
        assert not too_big.ok and "work-group" in too_big.error


def test_search_and_best_from_the_command_line(tmp_path):
    db = f"sqlite:///{tmp_path / 'separable.db'}"
    args = ("-d", "0", "-f", "3,6", "--rank", "1,2", "-s", "40x24", "--trials", "5", "--db", db)
    data = cli_json("search", "--family", "separable", *args)
    assert data["family"] == "separable"
    assert [r["problem"] for r in data["results"]] == ["F=3,rank=1", "F=3,rank=2", "F=6,rank=1", "F=6,rank=2"]
    assert all(r["time_ms"] and r["rank"] in (1, 2) for r in data["results"])
    (run,) = cli_json("history", "--db", db)["runs"]
    assert run["family"] == "separable" and len(run["problems"]) == 4
    listed = cli_json("best", "--family", "separable", "--db", db)["kernels"]
    assert sorted(k["problem"] for k in listed) == ["F=3,rank=1", "F=3,rank=2", "F=6,rank=1", "F=6,rank=2"]
    assert cli_json("best", "--db", db)["kernels"] == []  # the direct family has none here
    (answer,) = cli_json("best", "--family", "separable", "-d", "0", "-f", "6", "--rank", "2", "--db", db)[
        "kernels"
    ]
    assert answer["fallback"] == "exact" and answer["rank"] == 2
    wrong = run_cli("search", *args)  # --rank without --family separable
    assert wrong.returncode == 2 and "--rank is for --family separable" in wrong.stderr

    # export: a Gaussian's kernel, as a host program gets it, computes the correlation
    from autotune.families.base import KernelVariant, Launch
    from autotune.families.separable.terms import separable_terms

    gaussian = np.outer(*(2 * [np.exp(-((np.arange(6) - 2.5) ** 2) / 4)])).astype(np.float32)
    np.save(tmp_path / "gaussian.npy", gaussian)
    out = tmp_path / "kernels"
    common = ("export", "--family", "separable", "-d", "0", "--out", str(out), "--format", "cl,json")
    exported = cli_json(*common, "--filter", str(tmp_path / "gaussian.npy"), "--db", db)
    assert sorted(k["problem"] for k in exported["kernels"]) == sorted(k["problem"] for k in listed)
    manifest = json.loads((out / "separable_f6_r1.json").read_text())
    assert manifest["family"] == "separable" and manifest["rank"] == 1
    # one launch, or (whichever form the search found faster here) two, each with its arguments
    arguments = manifest["launches"][0]["arguments"] if "launches" in manifest else manifest["arguments"]
    assert arguments[1].endswith(" * restrict row_taps") or arguments[1].endswith(
        " * restrict unused_row_taps"
    )
    launches = [
        Launch(launch["kernel_name"], tuple(launch["local_size"]), tuple(launch["work_per_item"]))
        for launch in manifest.get("launches", [manifest])
    ]
    variant = KernelVariant(
        source=(out / manifest["source"]).read_text(),
        kernel_name=launches[0].kernel_name,
        local_size=launches[0].local_size,
        work_per_item=launches[0].work_per_item,
        later_launches=tuple(launches[1:]),
    )
    image = np.random.default_rng(9).uniform(-1, 1, (30, 41)).astype(np.float32)
    got = run_separable(variant, image, *separable_terms(gaussian, 1))
    expected = signal.correlate2d(image.astype(np.float64), gaussian.astype(np.float64), mode="valid")
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    header = run_cli(*common[:-1], "cl,header", "--db", db)  # keyed by width and rank
    assert header.returncode == 0, header.stderr
    assert (
        "autotune_find_kernel_for(const char *platform, const char *device_name, int filter_width, int rank)"
        in (out / "autotune_kernels.h").read_text()
    )
    full_rank = tmp_path / "random.npy"
    np.save(full_rank, np.random.default_rng(1).uniform(-1, 1, (9, 9)))  # rank 9 > 8
    refused = run_cli(*common, "--filter", str(full_rank), "--db", db)
    assert refused.returncode == 2 and "not separable" in refused.stderr


def _gaussian(width, sigma):
    taps = np.exp(-((np.arange(width) - (width - 1) / 2) ** 2) / (2 * sigma**2))
    return np.outer(taps, taps) / taps.sum() ** 2


def test_a_filters_rank_is_found_within_float32_rounding():
    from autotune.families.separable.terms import separable_terms

    assert separable_terms(_gaussian(9, 2.0), 8)[0].shape == (1, 9)
    assert separable_terms(np.ones((5, 5)), 8)[0].shape == (1, 5)
    sobel = separable_terms(np.outer([1.0, 2.0, 1.0], [-1.0, 0.0, 1.0]), 8)
    assert sobel[0].shape == (1, 3)
    np.testing.assert_allclose(np.outer(sobel[1][0], sobel[0][0]), np.outer([1, 2, 1], [-1, 0, 1]), atol=1e-6)
    assert separable_terms(_gaussian(9, 2.0) - _gaussian(9, 1.0), 8)[0].shape == (2, 9)  # a DoG
    rng = np.random.default_rng(0)
    assert separable_terms(rng.uniform(-1, 1, (9, 9)), 8) is None  # full rank
    # rank 1 only to within 1e-3: not rank 1 (the result would leave float32 rounding)
    nearly = _gaussian(7, 1.5) + 1e-3 * rng.uniform(-1, 1, (7, 7))
    assert separable_terms(nearly, 1) is None
    assert separable_terms(np.zeros((3, 3)), 8) is None


@pytest.mark.parametrize("mode,flip", [("valid", False), ("same", False), ("same", True)])
def test_convolve_runs_a_separable_filter_as_scipy_does(tmp_path, mode, flip):
    import scipy.ndimage as ndimage

    import autotune

    rng = np.random.default_rng(3)
    image = rng.uniform(-1, 1, (45, 61)).astype(np.float32)
    filt = (_gaussian(6, 1.3) + np.outer(np.arange(6), np.ones(6)) * 0.01).astype(np.float32)  # rank 2, even
    db = f"sqlite:///{tmp_path / 'none.db'}"
    got = autotune.convolve(image, filt, mode=mode, flip=flip, algorithm="separable", db=db)
    scipy_call = ndimage.convolve if flip else ndimage.correlate
    expected = scipy_call(image.astype(np.float64), filt.astype(np.float64), mode="constant")
    if mode == "valid":
        expected = signal.correlate2d(image.astype(np.float64), filt.astype(np.float64), mode="valid")
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="not separable"):
        autotune.convolve(image, rng.uniform(-1, 1, (9, 9)), algorithm="separable", db=db)
    with pytest.raises(ValueError, match="algorithm must be one of"):
        autotune.convolve(image, filt, algorithm="fastest", db=db)


def test_auto_runs_the_form_measured_faster_here(tmp_path):
    import autotune

    db = f"sqlite:///{tmp_path / 'both.db'}"
    image = np.random.default_rng(4).uniform(-1, 1, (52, 68)).astype(np.float32)
    gaussian = _gaussian(5, 1.0).astype(np.float32)
    assert autotune.plan(image.shape, 5, filter=gaussian, db=db).algorithm == "direct"  # nothing measured

    common = ("-d", "0", "-f", "5", "-s", "64x48", "--trials", "4", "--db", db)
    cli_json("search", "--family", "separable", "--rank", "1", *common)
    only_separable = autotune.plan(image.shape, 5, filter=gaussian, db=db)
    assert only_separable.algorithm == "separable" and "the direct not" in only_separable.reason
    # other pixels or a border are other kinds: measured for float32 'valid' only, they run direct
    for options in ({"mode": "same"}, {"dtype": np.uint8}, {"out_dtype": np.uint8, "dtype": np.uint8}):
        other = autotune.plan(image.shape, 5, filter=gaussian, db=db, **options)
        assert other.algorithm == "direct" and "never measured here" in other.reason

    cli_json("search", *common)
    chosen = autotune.plan(image.shape, 5, filter=gaussian, db=db)
    times = chosen.compared
    assert times["direct"] > 0 and times["separable"] > 0
    assert chosen.algorithm == min(times, key=times.get), chosen.reason
    assert "ms" in chosen.reason
    assert autotune.plan(image.shape, 5, db=db).algorithm == "direct"  # no filter: no rank
    assert autotune.plan(image.shape, 5, filter=gaussian, algorithm="direct", db=db).algorithm == "direct"
    full_rank = np.random.default_rng(5).uniform(-1, 1, (5, 5))
    assert "cost more than the direct form" in autotune.plan(image.shape, 5, filter=full_rank, db=db).reason
    for algorithm in ("auto", "direct", "separable"):
        got = autotune.convolve(image, gaussian, algorithm=algorithm, db=db)
        expected = signal.correlate2d(image.astype(np.float64), gaussian.astype(np.float64), mode="valid")
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def test_knobs_added_later_leave_earlier_kernels_as_they_were():
    """A kernel stored before `tiles_down`, `row_window`, `row_loads`, `carry_rows`,
    `prefetch`, `stage_vectors`, `stage_new_rows`, `paired_terms`, `column_pairs`, `stream_rows`,
    `x_vector`,
    `column_accumulators`, `passes`, `column_vector`, `output_conversion` and `fast_fir` existed renders
    as it did: those knobs stay out of its config
    comment at their default."""
    later = [name for name, knob in SPACE.knobs.items() if knob.added_later]
    assert set(later) == {
        "tiles_down",
        "row_window",
        "row_loads",
        "carry_rows",
        "prefetch",
        "stage_vectors",
        "stage_new_rows",
        "paired_terms",
        "column_pairs",
        "stream_rows",
        "x_vector",
        "column_accumulators",
        "passes",
        "column_vector",
        "output_conversion",
        "fast_fir",
    }
    config = {**BASE, "row_columns": "transposed", "cache_input": True}
    source = generate(config, 5, 1, SPACE).source
    assert not any(f'"{name}"' in source for name in later)
    assert source == generate({**config, "tiles_down": 1, "row_window": 0}, 5, 1, SPACE).source
    assert '"tiles_down": 2' in generate({**config, "tiles_down": 2}, 5, 1, SPACE).source


def _bests_of_form(db, filter_width, passes=2):
    """Make the fastest searched config of one form (passes = 2: two launches; 1: one)
    the best kernel of every kind of this width, whichever form the search found faster."""
    import sqlalchemy as sa

    from autotune.store import Best, ProblemRow, Store, Trial

    store = Store(db)
    try:
        with store.session() as s:
            rows = list(
                s.execute(sa.select(Best, ProblemRow).join(ProblemRow, Best.problem_id == ProblemRow.id))
            )
            trials = list(s.scalars(sa.select(Trial).where(Trial.status == "ok").order_by(Trial.time_ms)))
        changed = 0
        for best, problem in rows:
            if json.loads(problem.key)["filter_width"] != filter_width:
                continue
            form = next(
                t
                for t in trials
                if t.problem_id == best.problem_id and json.loads(t.config).get("passes", 1) == passes
            )
            store.set_best(best.device_id, best.problem_id, form, form.time_ms)
            changed += 1
        assert changed, f"no kind of width {filter_width} was tuned"
    finally:
        store.close()


@pytest.mark.skipif(
    not (Path("/usr/include/CL/cl.h").exists() and shutil.which("gcc")),
    reason="needs gcc, opencl-headers and ocl-icd-opencl-dev (.ci/run installs them)",
)
def test_the_c_host_runs_separable_kernels_from_the_header(tmp_path, autotune_pocl_env):
    """Export tuned separable kernels with the C header; the example host built against
    it takes 2r lines of taps and runs the kernel of that width and rank: two launches
    with a scratch buffer between them (F = 3 here), or one (F = 5)."""
    db = f"sqlite:///{tmp_path / 'separable.db'}"
    tune = ("-d", "0", "-f", "3,5", "--rank", "1,2", "-s", "40x24", "--trials", "4", "--db", db)
    assert run_cli("search", "--family", "separable", *tune).returncode == 0
    _bests_of_form(db, 3, passes=2)
    _bests_of_form(db, 5, passes=1)
    kernels = tmp_path / "kernels"
    exported = run_cli(
        "export",
        "-d",
        "0",
        "--family",
        "separable",
        "--format",
        "cl,json,header",
        "--out",
        str(kernels),
        "--db",
        db,
    )
    assert exported.returncode == 0, exported.stderr
    header = (kernels / "autotune_kernels.h").read_text()
    assert "#define AUTOTUNE_SEPARABLE 1" in header and "int filter_width, int rank)" in header
    assert header.count('"separable_columns",') == 2  # F = 3 at ranks 1 and 2: two launches
    assert header.count("    NULL,") >= 2  # F = 5 (and the default entries): one
    binary = tmp_path / "convolve_host"
    source = str(ROOT / "examples/c_host/convolve_host.c")
    build = [
        "gcc",
        "-O2",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-std=c11",
        f"-I{kernels}",
        "-o",
        str(binary),
        source,
    ]
    subprocess.run([*build, "-lOpenCL", "-lm"], check=True)
    rng = np.random.default_rng(8)
    for width, rank, (h, w) in ((3, 1, (61, 45)), (3, 2, (3, 70)), (5, 2, (20, 33))):
        row_taps, column_taps = (rng.uniform(-1, 1, (rank, width)).astype(np.float32) for _ in range(2))
        lines = [" ".join(f"{v:.9g}" for v in taps) for taps in (*row_taps, *column_taps)]
        (tmp_path / "taps.txt").write_text("\n".join(lines) + "\n")
        image = rng.uniform(0, 255, (h, w)).astype(np.float32)
        image.tofile(tmp_path / "image.raw")
        command = [str(binary), "-d", "0", f"{w}x{h}:{tmp_path / 'image.raw'}", str(tmp_path / "taps.txt")]
        result = subprocess.run(
            [*command, str(tmp_path / "out.raw")],
            capture_output=True,
            text=True,
            timeout=120,
            env=autotune_pocl_env,  # the PoCL it was tuned on: its tuned entries run
        )
        assert result.returncode == 0, result.stderr
        assert result.stderr.rstrip().endswith(": kernel tuned on it")
        out_w, out_h = w - width + 1, h - width + 1
        assert result.stdout.strip() == f"{out_w}x{out_h}"
        out = np.fromfile(tmp_path / "out.raw", dtype=np.float32).reshape(out_h, out_w)
        full = np.einsum("kr,kc->rc", column_taps.astype(np.float64), row_taps.astype(np.float64))
        expected = signal.correlate2d(image.astype(np.float64), full, mode="valid")
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=2e-3)
    (tmp_path / "taps.txt").write_text("1 2 1 0\n1 2 1 0\n")  # F = 4 was not exported
    missing = subprocess.run([*command, str(tmp_path / "o.raw")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "no exported kernel for this filter width and rank" in missing.stderr
    (tmp_path / "taps.txt").write_text("1 2 1\n")  # one line: no column taps
    odd = subprocess.run([*command, str(tmp_path / "o.raw")], capture_output=True, text=True, timeout=60)
    assert odd.returncode == 1 and "2r lines" in odd.stderr


def test_a_winner_whose_tiles_do_not_fit_starts_a_search_with_fewer_columns_a_work_item():
    """Another rank's winner that needs more `__local` memory than a GPU has for this rank
    comes to the warm start with `work_x` halved until it fits, the rest of it kept, then
    with its tile narrowed (work-items moved from x to y); a winner that fits, or that
    neither makes valid, comes as it is."""
    limits = {**GPU_LIMITS, "max_work_item_sizes": (1024, 1024, 64)}
    gpu = dataclasses.replace(device_info(0), type="GPU", **limits)
    winner = SEPARABLE.space.complete(
        {
            "tap_space": "literal",
            "row_columns": "transposed",
            "cache_input": True,
            "local_x": 32,
            "local_y": 4,
            "work_x": 2,
            "work_y": 8,
            "row_window": 8,
            "row_loads": 4,
            "tiles_down": 16,
            "prefetch": True,
            "stage_vectors": True,
        }
    )
    rank_one, rank_two = (SeparableProblem(33, rank, 4096, 4096) for rank in (1, 2))
    assert not SEPARABLE.violations(winner, rank_one, gpu)
    assert any("local memory" in reason for reason in SEPARABLE.violations(winner, rank_two, gpu))
    fitted = SEPARABLE.fit_warm_start(winner, rank_two, gpu)
    assert fitted == {**winner, "work_x": 1} and not SEPARABLE.violations(fitted, rank_two, gpu)
    assert SEPARABLE.fit_warm_start(winner, rank_one, gpu) == winner
    paired_columns = {**winner, "column_pairs": True}
    assert not SEPARABLE.violations(paired_columns, rank_one, gpu)
    assert SEPARABLE.violations(paired_columns, rank_two, gpu)
    halved = SEPARABLE.fit_warm_start(paired_columns, rank_two, gpu)
    assert halved == {**paired_columns, "work_x": 1, "column_pairs": False}
    too_tall = {**winner, "work_x": 1, "local_y": 32, "work_y": 16}  # no width fits these rows
    assert SEPARABLE.violations(too_tall, rank_two, gpu)
    assert SEPARABLE.fit_warm_start(too_tall, rank_two, gpu) == too_tall
    # one column a work-item already: the tile narrows, its work-items moved from x to y
    rank_three = SeparableProblem(33, 3, 4096, 4096)
    wide = {**winner, "local_x": 64, "local_y": 2, "work_x": 1, "work_y": 16, "stage_new_rows": True}
    assert not SEPARABLE.violations(wide, rank_two, gpu) and SEPARABLE.violations(wide, rank_three, gpu)
    narrowed = SEPARABLE.fit_warm_start(wide, rank_three, gpu)
    assert narrowed == {**wide, "local_x": 32, "local_y": 4, "work_y": 8}
    assert not SEPARABLE.violations(narrowed, rank_three, gpu)
    # a winner's fast FIR pairs are left out where the filter is too narrow for them, kept
    # where the narrowed tile still has pairs enough
    fast = {**wide, "fast_fir": "both"}
    narrow_filter = SeparableProblem(9, 1, 4096, 4096)
    assert SEPARABLE.violations(fast, narrow_filter, gpu)
    assert SEPARABLE.fit_warm_start(fast, narrow_filter, gpu) == {**wide, "fast_fir": "none"}
    assert SEPARABLE.fit_warm_start(fast, rank_three, gpu) == {**narrowed, "fast_fir": "both"}
    # narrowed to 4 outputs down a column, the rows keep their pairs and the columns drop theirs
    shorter = {**fast, "local_y": 4, "work_y": 8}
    assert SEPARABLE.violations(shorter, rank_three, gpu)
    fitted = SEPARABLE.fit_warm_start(shorter, rank_three, gpu)
    assert fitted == {**shorter, "local_x": 32, "local_y": 8, "work_y": 4, "fast_fir": "rows"}
