"""Where variants compile ahead (GPUs), a search asks its sampler for the next point
while the worker times the last one: a trial's ask (the model's fit, 0.1-0.2 s) and its
measurement (verification and timed runs, about as long) used to run one after the
other. On a CPU (no compiling ahead) the ask waits: the fit would take cores from the
timed runs."""

import pytest

from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.search import Search
from autotune.store import Store
from autotune.tune import Budget, Tuner

PROBLEM = Conv2DProblem(3, 40, 24)


@pytest.mark.parametrize("compilers", [1, None])
def test_the_next_point_is_asked_while_a_measurement_runs_where_variants_compile_ahead(
    tmp_path, monkeypatch, compilers
):
    events: list[str] = []
    start, ask = Evaluator.start, Search.ask

    def logged_start(self, *args, **kwargs):
        waiting = start(self, *args, **kwargs)
        events.append("start")

        def logged_wait():
            events.append("wait")
            return waiting()

        return logged_wait

    def logged_ask(self):
        events.append("ask")
        return ask(self)

    monkeypatch.setattr(Evaluator, "start", logged_start)
    monkeypatch.setattr(Search, "ask", logged_ask)
    store = Store(f"sqlite:///{tmp_path / 'tune.db'}")
    device = device_info(0)
    assert device.is_cpu  # PoCL: compiles ahead only when told to
    tuner = Tuner(
        store, 0, device, CONV2D, [PROBLEM], sampler="gp", budget=Budget(trials=12), compilers=compilers
    )
    (result,) = tuner.run()
    assert result.trials == 12
    measured = [t for t in store.trials(run_id=tuner.run_id) if t.origin not in ("retime", "cached")]
    assert len(measured) == 12
    # the search proper (re-timing measures after its last ask): a measurement overlaps
    # the next ask when that point was asked before the measurement was waited for, between
    # its start and its wait or, while its kernel still compiled, before its start: more
    # asks than waits by then
    search_events = events[: max(i for i, e in enumerate(events) if e == "ask") + 1]
    asks = waits = overlapped = 0
    for event in search_events:
        asks += event == "ask"
        if event == "wait":
            waits += 1
            overlapped += asks > waits
    if compilers:
        assert overlapped >= 12 // 2, events
    else:
        assert overlapped == 0, events
    assert events.count("ask") <= 12 + 1  # no more points asked than the budget needs (+ the last None)
