"""Several kernels timed launch by launch in turn (the final re-time's measurement): each is
verified first, a failure is its own and not the others', and all get the same runs."""

from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D
from autotune.families.separable import SEPARABLE, SeparableProblem
from autotune.outcomes import Status, TimingPolicy
from autotune.worker import Worker
from tests.test_worker import PROBLEM, variant_with

SOME = TimingPolicy(min_runs=3, min_time_s=0.0, max_runs=5, max_time_s=0.5)
TWO_PASSES = {"passes": 2, "row_columns": "contiguous", "local_x": 8, "local_y": 4, "work_x": 4, "work_y": 8}


def test_kernels_timed_in_turn_each_get_the_same_runs_and_an_invalid_point_is_its_own_answer():
    configs = [
        {"filter_mode": "define", "work_x": 2},
        {"unroll": "full", "filter_mode": "arg"},  # not a valid point
        {"work_y": 4, "local_x": 8, "local_y": 8},
    ]
    with Evaluator(0, CONV2D, policy=SOME, timeout_s=60) as evaluator:
        first, invalid, last = evaluator.measure_together(configs, PROBLEM)
    assert invalid.status is Status.INVALID and "unroll=full" in invalid.error
    for m in (first, last):
        assert m.status is Status.OK, m.error
        assert m.runs == len(m.times_ms) and 3 <= m.runs <= 5
        assert 0 < m.min_ms <= m.time_ms <= m.max_ms
        assert m.max_error is not None and m.compile_ms > 0
    assert first.runs == last.runs


def test_a_wrong_or_broken_kernel_among_others_is_never_timed_and_the_others_are():
    good = variant_with(("acc_0_0", "acc_0_0"))
    wrong = variant_with(("acc_0_0 += w_0 * in_0;", "acc_0_0 += 0.0f;"))
    broken = variant_with(("const int fw", "const int fw = ; int nope"))
    with Worker(0, timeout_s=60) as worker:
        measured = worker.measure_together([good, wrong, broken, good], PROBLEM, SOME)
        statuses = [m.status for m in measured]
        assert statuses == [Status.OK, Status.WRONG_RESULT, Status.COMPILE_ERROR, Status.OK]
        assert measured[1].time_ms is None and "max error" in measured[1].error
        assert measured[0].runs == measured[3].runs >= 3
        assert worker.measure_together([], PROBLEM, SOME) == []


def test_a_kernel_that_hangs_times_out_all_of_them_and_the_worker_comes_back():
    good = variant_with(("acc_0_0", "acc_0_0"))
    hang = variant_with(("const int lx", "while (out_width > 0) { output[0] += 1.0f; }\n    const int lx"))
    with Worker(0, timeout_s=8) as worker:
        hung = worker.measure_together([good, hang], PROBLEM, SOME)
        assert [m.status for m in hung] == [Status.TIMEOUT] * 2
        assert [m.status for m in worker.measure_together([good], PROBLEM, SOME)] == [Status.OK]


def test_a_run_of_two_launches_is_timed_from_the_first_start_to_the_last_end():
    problem = SeparableProblem(5, 2, 37, 23)
    with Evaluator(0, SEPARABLE, policy=SOME, timeout_s=60) as evaluator:
        two, one = evaluator.measure_together([TWO_PASSES, {"work_x": 2}], problem)
        alone = evaluator.evaluate(TWO_PASSES, problem)
    assert two.status is Status.OK and one.status is Status.OK, (two.error, one.error)
    assert two.runs == one.runs >= 3
    # both launches in each run: far above one launch's share of the time measured alone
    assert two.time_ms > 0.3 * alone.time_ms
