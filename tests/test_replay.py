"""Replay: searches judged on measured landscapes, by look-up."""

import gzip
import itertools
import json

import pytest

from autotune.errors import UsageError
from autotune.replay import load, replay, replay_once, summarise
from autotune.search import SAMPLERS
from tests.conftest import run_cli


def synthetic(path, gzipped=True):
    """A Kernel Tuner style cache: a bowl with its optimum at (x=12, y=3, z=1), some
    points failing, and points with x + y > 18 missing (they break a restriction)."""
    cache = {}
    for x, y, z in itertools.product(range(16), range(8), range(3)):
        if x + y > 18:
            continue
        record = {"x": x, "y": y, "z": z}
        if (x * 7 + y * 3 + z) % 11 == 0:
            record["time"] = "CompilationFailedConfig"
        else:
            record["time"] = 1.0 + (x - 12) ** 2 * 0.05 + (y - 3) ** 2 * 0.1 + (z - 1) ** 2 * 0.3
        cache[f"{x},{y},{z}"] = record
    cache.pop("12,3,1")["time"]  # make sure the optimum is present and valid
    cache["12,3,1"] = {"x": 12, "y": 3, "z": 1, "time": 0.5}
    data = {
        "device_name": "synthetic",
        "kernel_name": "bowl",
        "tune_params_keys": ["x", "y", "z"],
        "tune_params": {"x": list(range(16)), "y": list(range(8)), "z": list(range(3))},
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
