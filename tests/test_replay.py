"""Replay: searches judged on measured landscapes, by look-up."""

import gzip
import itertools
import json

import pytest

from autotune.errors import UsageError
from autotune.replay import Trace, load, replay, replay_once, same_kernel, start_points, summarise
from autotune.search import SAMPLERS
from tests.conftest import run_cli


def synthetic(path, gzipped=True, optimum=(12, 3, 1), names=("x", "y", "z")):
    """A Kernel Tuner style cache: a bowl with its optimum at `optimum` (x, y, z), some
    points failing, and points with x + y > 18 missing (they break a restriction)."""
    cache = {}
    ox, oy, oz = optimum
    for x, y, z in itertools.product(range(16), range(8), range(3)):
        if x + y > 18:
            continue
        record = dict(zip(names, (x, y, z), strict=True))
        if (x * 7 + y * 3 + z) % 11 == 0:
            record["time"] = "CompilationFailedConfig"
        else:
            record["time"] = 1.0 + (x - ox) ** 2 * 0.05 + (y - oy) ** 2 * 0.1 + (z - oz) ** 2 * 0.3
        cache[f"{x},{y},{z}"] = record
    cache[f"{ox},{oy},{oz}"] = {**dict(zip(names, optimum, strict=True)), "time": 0.5}  # present and valid
    data = {
        "device_name": "synthetic",
        "kernel_name": "bowl",
        "tune_params_keys": list(names),
        "tune_params": dict(zip(names, (list(range(16)), list(range(8)), list(range(3))), strict=True)),
        "objective": "time",
        "cache": cache,
    }
    text = json.dumps(data)
    path.write_bytes(gzip.compress(text.encode()) if gzipped else text.encode())
    return path


def test_load_derives_the_space(tmp_path):
    landscape = load(synthetic(tmp_path / "bowl.json.gz"))
    assert list(landscape.space.knobs) == ["x", "y", "z"]
    assert landscape.optimum == 0.5
    assert landscape.look_up({"x": 15, "y": 7, "z": 0}) == (False, None)  # restricted
    assert landscape.look_up({"x": 0, "y": 0, "z": 0})[1] is None  # failed: 0 % 11 == 0
    assert load(synthetic(tmp_path / "plain.json", gzipped=False)).values == landscape.values


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_every_sampler_finds_the_known_optimum(tmp_path, sampler):
    landscape = load(synthetic(tmp_path / "bowl.json.gz"))
    valid = sum(v is not None or True for v in landscape.values.values())
    budget = valid if sampler == "grid" else 150
    traces = replay(landscape, sampler, budget=budget, repeats=1 if sampler == "grid" else 3, seed=1)
    assert all(len(t.best_after) <= budget for t in traces)
    assert all(t.best_after == sorted(t.best_after, reverse=True) for t in traces)  # best never worsens
    if sampler in ("gp", "tpe-local", "tpe", "grid"):
        assert all(t.best_at(budget) == 0.5 for t in traces), [t.best_at(budget) for t in traces]
    summary = summarise(landscape, traces, (10, budget))
    assert summary["budgets"][-1]["median"] >= 1.0


def test_replay_is_deterministic_for_a_seed(tmp_path):
    landscape = load(synthetic(tmp_path / "bowl.json.gz"))
    a = replay_once(landscape, "gp", 60, seed=5).best_after
    b = replay_once(landscape, "gp", 60, seed=5).best_after
    assert a == b
    path = str(tmp_path / "bowl.json.gz")
    first = run_cli("replay", path, "--budget", "30", "--repeats", "3", "--seed", "2", "--json")
    second = run_cli("replay", path, "--budget", "30", "--repeats", "3", "--seed", "2", "--json")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    result = json.loads(first.stdout)["data"]["results"][0]
    assert [b["budget"] for b in result["budgets"]] == [10, 20, 30]


def test_a_noisy_reading_steers_the_search_and_the_trace_keeps_true_times(tmp_path):
    """`observe` is what a measurement reads: the sampler is told that, a point met again is
    answered with its first reading, and the trace keeps each point's true time."""
    landscape = load(synthetic(tmp_path / "bowl.json.gz"))
    readings = []

    def observe(time_ms):
        readings.append(time_ms)
        return time_ms * (1.3 if len(readings) % 2 else 1.0)  # every other one reads 30% slow

    trace = replay_once(landscape, "gp", 40, seed=5, observe=observe)
    assert len(readings) == len(trace.measured)  # one reading a measured point, none for failures
    assert [t for t, _ in trace.measured] == [landscape.look_up(c)[1] for _, c in trace.measured]
    assert trace.best_after[-1] == min(t for t, _ in trace.measured)


def test_t4_results_replay(tmp_path):
    results = [
        {
            "configuration": {"a": a, "b": b},
            "times": {"runtimes": [1.0 + abs(a - 2) + abs(b - 1)]},
            "invalidity": "correct",
            "correctness": 1,
        }
        for a in range(5)
        for b in range(3)
    ]
    results.append(
        {
            "configuration": {"a": 0, "b": 0},
            "times": {"runtimes": []},
            "invalidity": "compile",
            "correctness": 0,
        }
    )
    path = tmp_path / "t4.json"
    path.write_text(json.dumps({"schema_version": "1.0.0", "results": results[1:]}))
    landscape = load(path)
    assert landscape.optimum == 1.0
    assert replay_once(landscape, "tpe-local", 14, seed=0).best_at(14) == 1.0


@pytest.mark.parametrize(
    "content,message",
    [
        (b"\x1f\x8b\x08garbage", "not a readable landscape"),
        (b"{not json", "not a readable landscape"),
        (b'{"something": 1}', "neither a Kernel Tuner cache"),
        (b'{"tune_params": {"x": [1]}, "cache": {"1": {"y": 2}}}', "malformed Kernel Tuner cache"),
        (
            b'{"tune_params": {"x": [1]}, "cache": {"1": {"x": 1, "time": "RuntimeFailedConfig"}}}',
            "no successful measurement",
        ),
    ],
)
def test_malformed_files_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(UsageError, match=message):
        load(path)
    result = run_cli("replay", str(path), "--budget", "5", "--repeats", "1")
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_replay_command_errors(tmp_path):
    path = synthetic(tmp_path / "bowl.json.gz")
    for args, message in (
        (["--sampler", "magic"], "unknown sampler"),
        (["--budget", "0"], "must be positive"),
    ):
        result = run_cli("replay", str(path), *args)
        assert result.returncode == 2 and message in result.stderr
    assert "no such landscape" in run_cli("replay", str(tmp_path / "missing.json")).stderr


def test_replay_plot(tmp_path):
    path = synthetic(tmp_path / "bowl.json.gz")
    png = tmp_path / "curves.png"
    result = run_cli(
        "replay",
        str(path),
        "--sampler",
        "tpe-local,random",
        "--budget",
        "20",
        "--repeats",
        "2",
        "--plot",
        str(png),
    )
    assert result.returncode == 0, result.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_start_points_take_each_search_by_rank():
    a, b, c, d = ({"x": x, "y": 0, "z": 0} for x in range(1, 5))
    first = Trace(measured=[(3.0, b), (1.0, a), (2.0, c)])
    second = Trace(measured=[(0.5, d), (0.7, c), (0.9, a)])
    assert start_points([first, second], 2) == [a, d, c]  # ranks 1 (a, d), then 2 (c; c again once)
    assert start_points([first, second], 3) == [a, d, c, b]
    assert start_points([], 3) == []


def test_a_search_asks_its_start_points_first(tmp_path):
    landscape = load(synthetic(tmp_path / "bowl.json.gz"))
    outside = {"x": 15, "y": 7, "z": 0}  # breaks the restriction: costs no evaluation
    near = {"x": 11, "y": 3, "z": 1}
    trace = replay_once(landscape, "gp", 5, seed=3, first=[outside, near])
    assert len(trace.best_after) == 5
    assert trace.measured[0][1] == near and trace.best_after[0] == landscape.look_up(near)[1]
    unknown = {"x": 99, "y": 3, "z": 1}  # a value the landscape never measured: left out
    assert replay_once(landscape, "gp", 3, seed=3, first=[unknown, near]).measured[0][1] == near


def test_searches_start_from_another_landscape_of_the_same_kernel(tmp_path):
    """The other landscape's optimum is one step from this one's: started from its
    search's fastest points, every repeat is within one step after a few evaluations,
    where the plain search of the same seeds is not yet."""
    here = synthetic(tmp_path / "bowl.json.gz")
    other = synthetic(tmp_path / "other.json.gz", optimum=(11, 3, 1))
    renamed = synthetic(tmp_path / "renamed.json.gz", names=("a", "b", "c"))
    assert same_kernel(load(here), load(other)) and not same_kernel(load(here), load(renamed))
    common = ["replay", str(here), "--budget", "4", "--repeats", "5", "--seed", "1", "--json"]
    started = run_cli(*common, "--start-from", str(other), "--start-budget", "60", "--start-points", "3")
    assert started.returncode == 0, started.stderr
    cold = run_cli(*common)
    medians = [json.loads(r.stdout)["data"]["results"][0]["budgets"][-1]["median"] for r in (started, cold)]
    assert medians[0] <= (1.0 + 0.05) / 0.5 < medians[1], medians  # one x step costs 0.05 ms
    for args, message in (
        (["--start-from", str(renamed)], "measures other knobs"),
        (["--start-from", str(here)], "is the landscape replayed"),
        (["--start-from", str(tmp_path / "missing.json")], "no such landscape"),
        (["--start-from", str(other), "--start-points", "0"], "must be positive"),
    ):
        result = run_cli("replay", str(here), "--budget", "4", "--repeats", "1", *args)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
