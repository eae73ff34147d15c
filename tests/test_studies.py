"""Each width's search is also an Optuna study in the same database: `optuna studies`
lists it, and its trials are the measured points with their real knob values."""

import json
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna

from autotune.families.conv2d import CONV2D
from tests.conftest import cli_json

OPTUNA = str(Path(sys.executable).parent / "optuna")
DASHBOARD = str(Path(sys.executable).parent / "optuna-dashboard")
MEASURED = (
    "SELECT t.id, t.run_id, t.config, t.status, t.time_ms, t.kernel_sha, p.key FROM autotune_trials t "
    "JOIN autotune_problems p ON p.id = t.problem_id "
    "WHERE t.origin NOT IN ('cached', 'retime') AND t.status != 'invalid'"
)


def listed_studies(url: str) -> list[dict]:
    """What the `optuna` command line lists in the database."""
    result = subprocess.run(
        [OPTUNA, "studies", "--storage", url, "-f", "json"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout or "[]")


def check_studies(url: str, rows: list[tuple], widths: tuple[int, ...]) -> None:
    """Every measured trial is once in its width's study, as measured; nothing else is."""
    names = sorted(s["name"] for s in listed_studies(url))
    assert len(names) == len(widths) and all(f" F={w} " in n for n, w in zip(names, widths, strict=True)), (
        names
    )
    for name in names:
        study = optuna.load_study(study_name=name, storage=url)
        width = study.user_attrs["problem"]["filter_width"]
        expected = {r[0]: r for r in rows if json.loads(r[6])["filter_width"] == width}
        trials = {t.user_attrs["trial_id"]: t for t in study.trials}
        assert len(study.trials) == len(trials) and set(trials) == set(expected), name  # none twice
        for trial_id, trial in trials.items():
            _, run_id, config, status, time_ms, kernel_sha, _ = expected[trial_id]
            assert trial.params == CONV2D.read_config(config)  # real values: "define", True, 16 ...
            assert trial.user_attrs["status"] == status and trial.user_attrs["kernel_sha"] == kernel_sha
            assert trial.user_attrs["run_id"] == run_id
            if status == "ok":
                assert trial.state == optuna.trial.TrialState.COMPLETE and trial.value == time_ms
            else:
                assert trial.state == optuna.trial.TrialState.FAIL
        importances = optuna.importance.get_param_importances(study)
        assert set(importances) <= set(CONV2D.space.knobs) and importances


def test_each_width_is_an_optuna_study_of_its_measured_points(tmp_path):
    path = tmp_path / "tune.db"
    url = f"sqlite:///{path}"
    search = ["search", "-d", "0", "-s", "40x24", "-f", "3,4", "--sampler", "random", "--db", url]
    cli_json(*search, "--trials", "8")
    with sqlite3.connect(path) as connection:
        rows = connection.execute(MEASURED).fetchall()
    check_studies(url, rows, (3, 4))
    # a second run adds its new points; those the studies hold already are not added again
    cli_json(*search, "--trials", "14", "--seed", "1")
    with sqlite3.connect(path) as connection:
        more = connection.execute(MEASURED).fetchall()
    assert len(more) > len(rows)
    check_studies(url, more, (3, 4))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_optuna_dashboard_reads_the_studies_with_their_importances(tmp_path):
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    cli_json(
        "search", "-d", "0", "-s", "40x24", "-f", "3", "--trials", "10", "--sampler", "random", "--db", url
    )
    port = _free_port()
    dashboard = subprocess.Popen(
        [DASHBOARD, url, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, studies = time.time() + 60, None
        while studies is None and time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=5) as response:
                    studies = json.load(response)["study_summaries"]
            except OSError:
                assert dashboard.poll() is None, dashboard.stderr.read() if dashboard.stderr else ""
                time.sleep(0.3)
        assert studies is not None and [s["study_name"] for s in studies] == [
            s["name"] for s in listed_studies(url)
        ]
        assert " F=3 " in studies[0]["study_name"]
        address = f"http://127.0.0.1:{port}/api/studies/{studies[0]['study_id']}/param_importances"
        with urllib.request.urlopen(address, timeout=60) as response:
            (importances,) = json.load(response)["param_importances"]
        assert {i["name"] for i in importances} <= set(CONV2D.space.knobs) and importances
    finally:
        dashboard.terminate()
        dashboard.communicate(timeout=30)
