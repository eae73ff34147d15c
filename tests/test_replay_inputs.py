"""Replay: landscapes and options no search can use are refused with one line, at load."""

import json
import math
import shutil
from pathlib import Path

import pytest

from autotune.replay import load
from tests.conftest import run_cli


def kernel_tuner(path: Path, tune_params: dict, cache: dict) -> Path:
    """A Kernel Tuner cache file, as Kernel Tuner writes one."""
    data = {
        "device_name": "hand-written",
        "kernel_name": "k",
        "problem_size": [1],
        "tune_params_keys": list(tune_params),
        "tune_params": tune_params,
        "objective": "time",
        "cache": cache,
    }
    path.write_text(json.dumps(data))
    return path


def t4(path: Path, runtimes: list) -> Path:
    """T4 results: point a = i measured `runtimes[i]` (a list, or what the file holds instead)."""
    results = [
        {"configuration": {"a": i}, "times": {"runtimes": r}, "invalidity": "correct", "correctness": 1}
        for i, r in enumerate(runtimes)
    ]
    path.write_text(json.dumps({"schema_version": "1.0.0", "results": results}))
    return path


GOOD = {"x": [0, 1], "y": [0, 1]}
GOOD_CACHE = {
    "0,0": {"x": 0, "y": 0, "time": 1.0},
    "1,0": {"x": 1, "y": 0, "time": 2.0},
    "0,1": {"x": 0, "y": 1, "time": 1.5},
}


def assert_refused(path: Path, message: str, *args: str, timeout: float = 300) -> str:
    """The replay command exits with the usage code and one line naming the problem."""
    result = run_cli("replay", str(path), "--budget", "5", "--repeats", "1", *args, timeout=timeout)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert message in lines[0], lines[0]
    return lines[0]


def test_a_plot_format_matplotlib_cannot_write_is_refused_before_the_replay(tmp_path):
    path = kernel_tuner(tmp_path / "good.json", GOOD, GOOD_CACHE)
    plot = tmp_path / "curves.txt"
    # So many repeats that the command could not end in time had it replayed first.
    line = assert_refused(
        path, "cannot write .txt files", "--plot", str(plot), "--repeats", "100000", timeout=60
    )
    assert "png" in line and "svg" in line  # names the formats it takes
    assert not plot.exists()


@pytest.mark.skipif(shutil.which("xelatex") is not None, reason="a TeX engine writes PGF here")
def test_a_pgf_plot_without_a_tex_engine_is_refused(tmp_path):
    path = kernel_tuner(tmp_path / "good.json", GOOD, GOOD_CACHE)
    assert_refused(path, "PGF files with xelatex", "--plot", str(tmp_path / "curves.pgf"))


def test_a_plot_suffix_in_capitals_is_written(tmp_path):
    path = kernel_tuner(tmp_path / "good.json", GOOD, GOOD_CACHE)
    plot = tmp_path / "curves.PNG"
    result = run_cli("replay", str(path), "--budget", "3", "--repeats", "1", "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_knob_with_no_values_is_refused(tmp_path):
    path = kernel_tuner(
        tmp_path / "empty.json", {"x": [], "y": [0, 1]}, {"0,0": {"x": 0, "y": 0, "time": 1.0}}
    )
    assert_refused(path, "knob 'x' has no values")


def test_knob_values_that_are_not_a_list_are_refused(tmp_path):
    path = kernel_tuner(tmp_path / "text.json", {"x": "ab"}, {"a": {"x": "a", "time": 1.0}})
    assert_refused(path, "the values of knob 'x' are not a list")


def test_a_landscape_with_no_knobs_is_refused(tmp_path):
    path = kernel_tuner(tmp_path / "none.json", {}, {"": {"time": 1.0}})
    assert_refused(path, "has no knobs")


@pytest.mark.parametrize("time", [0, -1.5])
def test_kernel_tuner_times_of_zero_or_below_are_refused(tmp_path, time):
    cache = {**GOOD_CACHE, "1,1": {"x": 1, "y": 1, "time": time}}
    path = kernel_tuner(tmp_path / "zero.json", GOOD, cache)
    line = assert_refused(path, "times must be positive")
    assert "{'x': 1, 'y': 1}" in line


@pytest.mark.parametrize("time", [0.0, -2.0])
def test_t4_times_of_zero_or_below_are_refused(tmp_path, time):
    assert_refused(t4(tmp_path / "t4.json", [[1.0], [time, time, time]]), "times must be positive")
    assert_refused(t4(tmp_path / "one.json", [[1.0], [2.0, time, 3.0]]), "times must be positive")


@pytest.mark.parametrize("runtimes", [["a"], "a", [True], [1.0, None]])
def test_t4_runtimes_that_are_not_numbers_are_refused(tmp_path, runtimes):
    path = t4(tmp_path / "t4.json", [[1.0], runtimes])
    line = assert_refused(path, "the runtimes of {'a': 1} are not a list of numbers")
    assert repr(runtimes) in line


def test_t4_runtimes_that_are_not_finite_are_failed_points(tmp_path):
    """As a Kernel Tuner cache's non-finite time: the point failed; a landscape of such
    points alone holds no successful measurement."""
    assert_refused(t4(tmp_path / "nan.json", [[math.nan]]), "no successful measurement")
    landscape = load(t4(tmp_path / "mixed.json", [[math.nan], [2.0, math.inf], [3.0]]))
    assert landscape.values == {(0,): None, (1,): None, (2,): 3.0}
    assert landscape.optimum == 3.0


def test_t4_results_with_no_successful_point_are_refused(tmp_path):
    assert_refused(t4(tmp_path / "failed.json", [[], []]), "no successful measurement")
    assert_refused(t4(tmp_path / "empty.json", []), "no successful measurement")


def test_a_cache_with_no_point_in_its_space_is_refused(tmp_path):
    path = kernel_tuner(tmp_path / "outside.json", {"x": [0, 1]}, {"5": {"x": 5, "time": 1.0}})
    assert_refused(path, "no measured point lies in the landscape's space")


def test_points_outside_the_space_are_left_out(tmp_path):
    """No search can ask them, so the fastest of them is no optimum to reach."""
    cache = {**GOOD_CACHE, "7,0": {"x": 7, "y": 0, "time": 0.25}}
    landscape = load(kernel_tuner(tmp_path / "partial.json", GOOD, cache))
    assert (7, 0) not in landscape.values and landscape.optimum == 1.0
    result = run_cli("replay", str(tmp_path / "partial.json"), "--budget", "3", "--repeats", "1", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["data"]["results"][0]["optimum"] == 1.0


def test_a_grid_search_that_spends_its_grid_ends_as_any_search(tmp_path):
    """Optuna's grid sampler stops its study once every point is asked, which only works
    inside `Study.optimize`; the replay asks and tells itself and ends a spent grid."""
    cache = {
        f"{x},{y}": {"x": x, "y": y, "time": time}
        for (x, y), time in {(0, 0): 1.0, (0, 1): 2.0, (1, 0): 3.0, (1, 1): 0.5}.items()
    }
    path = kernel_tuner(tmp_path / "grid.json", {"x": [0, 1], "y": [0, 1]}, cache)
    result = run_cli("replay", str(path), "--sampler", "grid", "--budget", "6", "--repeats", "2", "--json")
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)["data"]["results"]
    assert row["budgets"][0]["median"] == 1.0 and row["evaluations_to_5"]["reached"] == 2
