"""The worker verifies before it times, and survives kernels that hang or crash."""

import dataclasses

import pytest

from autotune.families.conv2d import Conv2DProblem
from autotune.families.conv2d.render import generate
from autotune.outcomes import Status
from autotune.worker import Worker
from tests.conftest import FAST, ROOT

PROBLEM = Conv2DProblem(filter_width=5, out_width=45, out_height=33, seed=3)


def variant_with(source_edit, config=None, filter_width=5):
    variant = generate(config or {"filter_mode": "define", "work_x": 2}, filter_width)
    old, new = source_edit
    assert old in variant.source
    return dataclasses.replace(variant, source=variant.source.replace(old, new, 1))


def test_correct_kernel_is_timed(evaluator):
    m = evaluator.evaluate({"filter_mode": "define", "work_x": 2, "work_y": 4}, PROBLEM)
    assert m.status is Status.OK, m.error
    assert m.runs >= 1 and 0 < m.min_ms <= m.time_ms <= m.max_ms
    assert m.compile_ms > 0 and m.max_error is not None


def test_invalid_point_is_rejected_without_compiling(evaluator):
    m = evaluator.evaluate({"unroll": "full", "filter_mode": "arg"}, PROBLEM)
    assert m.status is Status.INVALID and "unroll=full" in m.error
    m = evaluator.evaluate({"local_x": 256, "local_y": 64}, PROBLEM)
    assert m.status is Status.INVALID and "work-group" in m.error
    m = evaluator.evaluate({"unroll": 3}, PROBLEM)
    assert m.status is Status.INVALID


@pytest.mark.parametrize(
    "edit,why",
    [
        # one filter tap skipped
        (("acc_0_0 += w_0 * in_0;", "acc_0_0 += 0.0f;"), "max error"),
        # outputs in the edge path never written
        (("output[y * out_width + x] = sum;", ""), "not written"),
        # a store one row off
        (
            (
                "output[(y0 + 0) * out_width + x0 + 1] = acc_0_1;",
                "output[(y0 + 1) * out_width + x0 + 1] = acc_0_1;",
            ),
            "",
        ),
        # a store past the end of the output
        (("output[y * out_width + x] = sum;", "output[y * out_width + x + 64] = sum;"), ""),
    ],
)
def test_wrong_kernels_are_wrong_results(edit, why):
    with Worker(0, timeout_s=60) as worker:
        m = worker.measure(variant_with(edit), PROBLEM, FAST)
    assert m.status is Status.WRONG_RESULT, m
    assert why in m.error
    assert m.time_ms is None  # never timed


def test_compile_and_launch_errors_are_statuses(evaluator):
    broken = variant_with(("const int fw", "const int fw = ; int nope"))
    m = evaluator.worker.measure(broken, PROBLEM, FAST)
    assert m.status is Status.COMPILE_ERROR and m.error
    # local size that disagrees with reqd_work_group_size: the launch must fail
    mismatched = dataclasses.replace(generate({"local_x": 8, "local_y": 8}, 5), local_size=(4, 4))
    m = evaluator.worker.measure(mismatched, PROBLEM, FAST)
    assert m.status is Status.LAUNCH_ERROR, m
    # the worker is still fine afterwards
    assert evaluator.evaluate({"work_y": 2}, PROBLEM).status is Status.OK


def test_endless_loop_times_out_and_the_next_variant_runs():
    hang = variant_with(("const int lx", "while (out_width > 0) { output[0] += 1.0f; }\n    const int lx"))
    with Worker(0, timeout_s=8) as worker:
        m = worker.measure(hang, PROBLEM, FAST)
        assert m.status is Status.TIMEOUT, m
        after = worker.measure(generate({"work_x": 4}, 5), PROBLEM, FAST)
        assert after.status is Status.OK, after


def test_worker_killed_by_a_bad_write_is_crashed_and_replaced():
    # a store far outside any buffer kills the process on a CPU device
    wild = variant_with(
        ("const int lx", "output[((long)out_width << 32) + get_global_id(0)] = 1.0f;\n    const int lx")
    )
    with Worker(0, timeout_s=20) as worker:
        m = worker.measure(wild, PROBLEM, FAST)
        # Usually SIGSEGV kills the worker; a driver that traps the fault in its own
        # threads leaves it hanging instead. Either way the caller goes on.
        assert m.status in (Status.CRASHED, Status.TIMEOUT), m
        if m.status is Status.CRASHED:
            assert "signal" in m.error
        after = worker.measure(generate({"work_x": 4}, 5), PROBLEM, FAST)
        assert after.status is Status.OK, after


def test_worker_that_dies_mid_measurement_is_crashed_and_replaced():
    """The worker process killed from outside (as the OOM killer or a driver abort would)."""
    import os
    import signal
    import threading

    hang = variant_with(("const int lx", "while (out_width > 0) { output[0] += 1.0f; }\n    const int lx"))
    with Worker(0, timeout_s=60) as worker:
        assert worker.measure(generate({"work_x": 2}, 5), PROBLEM, FAST).status is Status.OK
        pid = worker._process.pid
        threading.Timer(2.0, os.kill, (pid, signal.SIGKILL)).start()
        m = worker.measure(hang, PROBLEM, FAST)
        assert m.status is Status.CRASHED and "SIGKILL" in m.error, m
        after = worker.measure(generate({"work_x": 4}, 5), PROBLEM, FAST)
        assert after.status is Status.OK and worker._process.pid != pid


def test_compile_that_does_not_end_times_out_and_the_next_variant_runs():
    # 2**22 nested additions after macro expansion: the compiler works for minutes.
    macros = "#define E0 ((float)in_width)\n" + "".join(
        f"#define E{i} (E{i - 1} + E{i - 1})\n" for i in range(1, 23)
    )
    slow = variant_with(("const int lx", "output[0] = E22;\n    const int lx"))
    slow = dataclasses.replace(slow, source=macros + slow.source)
    with Worker(0, timeout_s=4) as worker:
        m = worker.measure(slow, PROBLEM, FAST)
        assert m.status is Status.TIMEOUT, m
        assert worker.measure(generate({"work_y": 4}, 5), PROBLEM, FAST).status is Status.OK


def _gone(pid: int) -> bool:
    """No such process, or a zombie waiting to be reaped (it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_worker_dies_with_its_parent_even_inside_a_kernel_that_never_returns():
    """The parent killed by SIGKILL (no handler runs) while its worker runs an endless
    kernel: the worker, in a session of its own, must not live on as an orphan."""
    import subprocess
    import sys
    import time

    script = """
import dataclasses, sys
from autotune.families.conv2d import Conv2DProblem
from autotune.families.conv2d.render import generate
from autotune.worker import Worker
from tests.conftest import FAST
variant = generate({"filter_mode": "define", "work_x": 2}, 5)
hang = dataclasses.replace(variant, source=variant.source.replace(
    "const int lx", "while (out_width > 0) { output[0] += 1.0f; }\\n    const int lx", 1))
with Worker(0, timeout_s=600) as worker:
    worker.measure(variant, Conv2DProblem(5, 45, 33), FAST)
    print(worker._process.pid, flush=True)
    worker.measure(hang, Conv2DProblem(5, 45, 33), FAST)
"""
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    worker_pid = int(parent.stdout.readline())
    time.sleep(2)  # inside the endless kernel by now
    assert not _gone(worker_pid)
    parent.kill()
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while not _gone(worker_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _gone(worker_pid), "the worker outlived its parent"


@pytest.mark.parametrize("fault", ["off", "nan", "none"])
def test_outputs_past_the_first_verified_block_are_verified(fault):
    """The output is compared with the reference a block at a time: a wrong value or a
    NaN in a later block fails as one in the first does, and is located."""
    import numpy as np

    from autotune.session import VERIFY_BLOCK, Session

    problem = Conv2DProblem(filter_width=3, out_width=601, out_height=300, seed=1)
    assert problem.reference().size > 2 * VERIFY_BLOCK
    session = Session(0)
    session._prepare(problem)
    result = session.blank.copy()
    n_out = session.reference.size
    result[:n_out] = session.reference.reshape(-1)
    at = 2 * VERIFY_BLOCK + 123  # in the third block
    if fault == "off":
        result[at] += 1.0
    elif fault == "nan":
        result[at] = np.nan
    verdict = session._verify(result, None)
    if fault == "none":
        assert verdict <= session.tolerance
        return
    assert verdict.status is Status.WRONG_RESULT
    where = f"({at % 601}, {at // 601})"
    assert where in verdict.error, verdict.error


def test_a_session_keeps_the_references_of_problems_it_comes_back_to(monkeypatch):
    """A search returns to each problem (warm starts, re-timing): its reference is not
    computed again, up to ANSWERS_BYTES of references; past that the oldest goes."""
    from autotune import session as session_module

    session = session_module.Session(0)
    first, second = PROBLEM, dataclasses.replace(PROBLEM, filter_width=3)
    session._prepare(first)
    kept = session.reference
    session._prepare(second)
    session._prepare(first)
    assert session.reference is kept
    assert session.tolerance == first.tolerance()
    monkeypatch.setattr(session_module, "ANSWERS_BYTES", kept.nbytes)  # room for one
    third = dataclasses.replace(PROBLEM, filter_width=7)
    session._prepare(third)
    assert list(session.answers) == [third]
    session._prepare(first)
    assert session.reference is not kept
    assert list(session.answers) == [first]


@pytest.mark.parametrize(
    ("image_shape", "filter_shape", "band_rows"),
    [((97, 61), (5, 5), 16), ((130, 40), (9, 4), 24), ((50, 300), (1, 33), 8), ((23, 23), (8, 3), 512)],
)
def test_large_references_by_bands_of_rows_equal_the_direct_sum(
    monkeypatch, image_shape, filter_shape, band_rows
):
    """The reference of large problems is computed by FFT in bands of output rows (in
    threads); every band, the last short one too, equals the direct float64 sum."""
    import numpy as np

    from autotune.families.conv2d import problem

    monkeypatch.setattr(problem, "FFT_BLOCK_ROWS", band_rows)
    rng = np.random.default_rng(11)
    image, filt = rng.uniform(-1, 1, image_shape), rng.uniform(-1, 1, filter_shape)
    rows, columns = filter_shape
    out_h, out_w = image_shape[0] - rows + 1, image_shape[1] - columns + 1
    expected = np.zeros((out_h, out_w))
    for r in range(rows):
        for c in range(columns):
            expected += filt[r, c] * image[r : r + out_h, c : c + out_w]
    ours = problem._correlate_by_blocks(image, filt, out_h, out_w)
    assert ours.shape == (out_h, out_w)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)
