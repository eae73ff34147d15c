"""Kernel Tuner's strategies replayed on our landscapes: same space, same counting."""

import json
import os
import statistics
import subprocess
import sys

import pytest

from autotune.replay import load, replay_once
from tests.conftest import ROOT
from tests.test_replay import synthetic

pytest.importorskip("kernel_tuner")  # the test and bench extras install it

from autotune.replay_kernel_tuner import STRATEGIES, available_strategies, run_strategy, write_cache  # noqa: E402


@pytest.fixture
def bowl(tmp_path):
    landscape = load(synthetic(tmp_path / "bowl.json.gz"))
    return landscape, write_cache(landscape, tmp_path)


def test_kernel_tuner_searches_exactly_the_landscape(bowl):
    """Given a budget above the landscape's size, random sampling evaluates every point of
    it once, failed points included (as our replay counts them), and nothing else."""
    landscape, cache = bowl
    failed = sum(v is None for v in landscape.values.values())
    assert failed > 0
    trace, used = run_strategy(cache, "random_sample", 10_000, seed=1)
    assert used == len(landscape.values) == len(trace.best_after)
    assert trace.best_at(used) == landscape.optimum


def test_a_budget_counts_unique_evaluations(bowl):
    landscape, cache = bowl
    for strategy in ("random_sample", "genetic_algorithm", "greedy_ils"):
        trace, used = run_strategy(cache, strategy, 40, seed=3)
        assert used == 40, strategy
        assert trace.best_after == sorted(trace.best_after, reverse=True)
        assert trace.best_at(40) >= landscape.optimum


@pytest.mark.parametrize("strategy", ["bayes_opt", "genetic_algorithm", "simulated_annealing"])
def test_a_seed_repeats_a_run(bowl, strategy):
    _, cache = bowl
    first, _ = run_strategy(cache, strategy, 25, seed=7)
    again, _ = run_strategy(cache, strategy, 25, seed=7)
    other = [run_strategy(cache, strategy, 25, seed=s)[0].best_after for s in (8, 9, 10)]
    assert first.best_after == again.best_after
    assert any(o != first.best_after for o in other)


def test_default_strategies_exist_in_the_installed_version():
    assert set(STRATEGIES) <= set(available_strategies())


def test_one_command_compares_ours_with_kernel_tuner(tmp_path):
    path = synthetic(tmp_path / "bowl.json.gz")
    out = tmp_path / "figures.json"
    command = [
        sys.executable,
        str(ROOT / "bench" / "replay_samplers.py"),
        "--landscapes",
        str(path),
        "--samplers",
        "random",
        "--repeats",
        "3",
        "--budget",
        "30",
        "--budgets",
        "10,30",
        "--kernel-tuner",
        "--kt-strategies",
        "random_sample,mls",
        "--json",
        str(out),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("| bowl.json.gz | kt:mls |") for line in lines)
    against = [line for line in lines if line.startswith("| bowl | ")]
    assert [line.split(" | ")[1] for line in against] == ["10", "30"]
    landscape = load(path)
    ratios = [replay_once(landscape, "random", 30, seed=s).best_at(30) / landscape.optimum for s in range(3)]
    rows = {row["sampler"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"random", "kt:random_sample", "kt:mls"}
    assert rows["random"]["cells"]["30"]["median"] == statistics.median(ratios)  # the same runs as here
    assert rows["kt:mls"]["evaluations_used"] <= 30
