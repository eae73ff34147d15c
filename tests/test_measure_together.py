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


def test_a_kernel_that_hangs_times_out_the_request_and_the_evaluator_names_it_alone():
    good = variant_with(("acc_0_0", "acc_0_0"))
    hang = variant_with(("const int lx", "while (out_width > 0) { output[0] += 1.0f; }\n    const int lx"))
    with Worker(0, timeout_s=4) as worker:
        hung = worker.measure_together([good, hang], PROBLEM, SOME)
        assert [m.status for m in hung] == [Status.TIMEOUT] * 2  # one request, one time-out
        assert [m.status for m in worker.measure_together([good], PROBLEM, SOME)] == [Status.OK]
    with Evaluator(0, CONV2D, policy=SOME, timeout_s=4) as evaluator:
        evaluator.render = lambda config, problem: {"good": good, "hang": hang}[config["name"]]
        measured = evaluator.measure_together([{"name": "good"}, {"name": "hang"}, {"name": "good"}], PROBLEM)
    assert [m.status for m in measured] == [Status.OK, Status.TIMEOUT, Status.OK]


def test_variants_of_two_launches_share_one_scratch_buffer_and_are_verified_with_it():
    """Two two-launch variants and a one-launch variant: the row-pass scratch buffer made for
    the first serves the second (each still verified), so twelve candidates of rank 4 at
    4096x4096 hold 256 MiB of scratch, not 3 GiB."""
    problem = SeparableProblem(5, 2, 37, 23)
    wider = {**TWO_PASSES, "local_x": 16, "work_x": 2}
    with Evaluator(0, SEPARABLE, policy=SOME, timeout_s=60) as evaluator:
        two, one, other = evaluator.measure_together([TWO_PASSES, {"work_x": 2}, wider], problem)
    for m in (two, one, other):
        assert m.status is Status.OK, m.error
    assert two.runs == one.runs == other.runs >= 3


class _Event:
    """A profiling event as `_time` reads it, `ms` long on a clock of its own."""

    clock = 0

    def __init__(self, ms: float) -> None:
        self.profile = self
        self.start = _Event.clock
        _Event.clock = self.end = _Event.clock + int(ms * 1e6)

    def wait(self) -> None:
        pass


def _kernel(ms: float, fails_at: int | None = None):
    calls = []

    def launch(wait_for=None):
        calls.append(1)
        if fails_at is not None and len(calls) >= fails_at:
            raise RuntimeError("out of resources")
        return [_Event(ms)]

    return launch


def test_turns_keep_to_the_policy_s_time_cap_and_a_failing_launch_is_its_own():
    from autotune.session import _time_together

    policy = TimingPolicy()  # at most 2 s of kernel time a measurement
    slow = _time_together([(_kernel(500.0), None), (_kernel(400.0), None)], policy, (RuntimeError,))
    assert len(slow[0]) == len(slow[1]) and sum(slow[0]) <= policy.max_time_s * 1e3 + 500.0
    quick = _time_together([(_kernel(0.01), None), (_kernel(0.02), None)], policy, (RuntimeError,))
    assert len(quick[0]) == len(quick[1]) == policy.max_runs  # 5 ms and 10 ms: the run cap
    mixed = _time_together(
        [(_kernel(0.05), None), (_kernel(0.05, fails_at=5), None), (_kernel(0.05), None)],
        SOME,
        (RuntimeError,),
    )
    assert mixed[1] == "out of resources"
    assert len(mixed[0]) == len(mixed[2]) >= SOME.min_runs
