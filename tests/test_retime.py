"""The final re-time: which kernels it times again, and how it names the winner (each round
compares kernels timed moments apart)."""

from autotune.store.models import Trial
from autotune.tune.retime import retime_candidates, round_winner

# First measurements of an H200 search at F = 11 (ms, fastest first): the 8th was the kernel
# that, timed side by side later, ran 0.0784 against 0.0809 for the one the search named.
H200_F11 = [0.08067, 0.08096, 0.0812, 0.08144, 0.08157, 0.08166, 0.08182, 0.08222, 0.08288, 0.08349]


def _trials(times, keys=None):
    keys = keys or [f"k{i}" for i in range(len(times))]
    return [Trial(config_key=k, time_ms=ms, config="{}") for k, ms in zip(keys, times, strict=True)]


def test_every_kernel_within_a_few_percent_of_the_fastest_is_re_timed():
    chosen = retime_candidates(_trials(H200_F11), top=3)
    assert [t.config_key for t in chosen] == [f"k{i}" for i in range(10)]  # 0.08349 is in, 3.5% above
    assert len(retime_candidates(_trials([*H200_F11, 0.0856]), top=3)) == 10  # 6.1% above: out
    assert [t.config_key for t in retime_candidates(_trials(H200_F11), top=3, within=0.025)] == [
        f"k{i}" for i in range(8)
    ]  # the rule of before: 0.08222 is in, 1.9% above
    assert [t.config_key for t in retime_candidates(_trials(H200_F11), top=3, within=0.0)] == [
        "k0",
        "k1",
        "k2",
    ]


def test_the_top_few_are_re_timed_however_far_apart_and_at_most_most_in_all():
    far = [1.0, 1.5, 2.0, 3.0]
    assert [t.time_ms for t in retime_candidates(_trials(far), top=3)] == [1.0, 1.5, 2.0]
    close = [1.0 + i * 0.001 for i in range(20)]
    assert len(retime_candidates(_trials(close), top=3)) == 12  # RETIME_MOST
    assert len(retime_candidates(_trials(close), top=3, most=8)) == 8
    assert len(retime_candidates(_trials(close), top=10, most=8)) == 10  # top wins over most
    assert retime_candidates([], top=3) == []


def test_a_kernel_measured_twice_is_one_candidate_and_unmeasured_rows_are_skipped():
    trials = _trials([1.0, 1.001, None, 1.002, 1.003], keys=["a", "a", "b", "c", "d"])
    assert [t.config_key for t in retime_candidates(trials, top=2, within=0.0)] == ["a", "c"]


def test_the_h200_f9_retime_names_the_kernel_fastest_in_two_rounds_of_three():
    """The three re-timed kernels of an H200 search at F = 9 (ms, rounds in order): the GPU ran
    every kernel about 6% slower in the first round than in the last. The earlier best was the
    fastest in rounds one and three (timed side by side later, 0.0588 against 0.0598 ms); by
    median time the middle round alone made the other one the winner."""
    times = {
        "earlier_best": [0.0631, 0.0625, 0.0590],
        "named_by_median": [0.0634, 0.0601, 0.0598],
        "third": [0.0643, 0.0609, 0.0612],
    }
    assert min(times, key=lambda k: sorted(times[k])[1]) == "named_by_median"
    assert round_winner(times) == "earlier_best"


def test_without_drift_the_fastest_kernel_wins():
    times = {"a": [1.00, 1.01, 0.99], "b": [1.05, 1.06, 1.04], "c": [1.10, 1.02, 1.12]}
    assert round_winner(times) == "a"
    assert round_winner({"alone": [2.0, 2.0, 2.0]}) == "alone"
    # b fastest in two rounds of three, a in one: b, though a's median time is lower
    assert round_winner({"a": [0.90, 0.95, 1.10], "b": [1.00, 0.94, 1.05]}) == "b"
