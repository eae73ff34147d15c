"""A database written by the first released schema opens, upgrades and keeps every row."""

import json
import shutil
import sqlite3
from pathlib import Path

from autotune.space import convolution_space
from autotune.store import SCHEMA_HEAD, VERSION_TABLE
from tests.conftest import run_cli

FIXTURE = Path(__file__).parent / "fixtures" / "schema_0001.db"
TABLES = ("autotune_devices", "autotune_problems", "autotune_runs", "autotune_trials", "autotune_best")


def dump(path):
    with sqlite3.connect(path) as connection:
        return {t: connection.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in TABLES}


def test_first_schema_upgrades_and_keeps_every_row(tmp_path):
    path = tmp_path / "old.db"
    shutil.copy(FIXTURE, path)
    before = dump(path)
    assert all(before[t] for t in TABLES)
    result = run_cli("history", "--db", f"sqlite:///{path}", "--json")
    assert result.returncode == 0, result.stderr
    assert [r["run_id"] for r in json.loads(result.stdout)] == [1]
    after = dump(path)
    for table in TABLES:
        # every old row, every old column (newer columns come after them)
        width = len(before[table][0])
        assert [row[:width] for row in after[table][: len(before[table])]] == before[table]
    with sqlite3.connect(path) as connection:
        # no kernel fingerprint on old rows: they are never reused as today's measurements
        fingerprinted = "SELECT COUNT(*) FROM autotune_trials WHERE kernel_sha IS NOT NULL"
        assert connection.execute(fingerprinted).fetchone() == (0,)
    with sqlite3.connect(path) as connection:
        assert connection.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall() == [(SCHEMA_HEAD,)]
    best = json.loads(run_cli("best", "--db", f"sqlite:///{path}", "--json").stdout)
    assert best and best[0]["filter_width"] == 3
    # Rows written before newer knobs existed are shown with those knobs' defaults.
    with sqlite3.connect(path) as connection:
        (stored,) = connection.execute("SELECT config FROM autotune_best").fetchone()
    assert not {"image_vector", "unroll_rows"} & set(json.loads(stored))
    assert best[0]["config"] == convolution_space().complete(json.loads(stored))
