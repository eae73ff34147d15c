"""Databases written by earlier schemas answer as before without being changed by commands
that read, and upgrade (`autotune upgrade`, or a search) keeping every row."""

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import autotune
from autotune.devices import device_info
from autotune.families.conv2d import CONV2D
from autotune.store import SCHEMA_HEAD, VERSION_TABLE
from tests.conftest import cli_json, run_cli
from tests.opencl_runner import kernel_signatures

FIXTURES = Path(__file__).parent / "fixtures"
FIRST = FIXTURES / "schema_0001.db"
SECOND = FIXTURES / "schema_0002.db"
ANSWERS = FIXTURES / "schema_0002"  # what release 0.1.0 answered on SECOND (see its README)
TABLES = ("autotune_devices", "autotune_problems", "autotune_runs", "autotune_trials", "autotune_best")
UNCHANGED = ("autotune_devices", "autotune_trials", "autotune_best")


def dump(path):
    with sqlite3.connect(path) as connection:
        return {t: connection.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in TABLES}


def problem_keys(path):
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT id, family, key FROM autotune_problems ORDER BY id").fetchall()


def today(config):
    """A config 0.1.0 answered with, as it reads now: knobs added since at their defaults."""
    return CONV2D.space.complete(config) if isinstance(config, dict) else config


def today_source(source):
    """A kernel source (or C header embedding it) that 0.1.0 wrote, its config comments
    as they read now (knobs added later left out at their defaults, as kernels state them)."""

    def line_today(line):
        if " * config: {" not in line:
            return line
        start, end = line.index("{"), line.rindex("}") + 1
        escaped = '\\"' in line[start:end]  # a C string literal in the header
        text = line[start:end].replace('\\"', '"') if escaped else line[start:end]
        config = json.dumps(CONV2D.space.comment_config(today(json.loads(text))), sort_keys=True)
        return line[:start] + (config.replace('"', '\\"') if escaped else config) + line[end:]

    return "\n".join(line_today(line) for line in source.split("\n"))


def rejected(path, run_id):
    """Points of a run rejected before compiling."""
    with sqlite3.connect(path) as connection:
        query = "SELECT COUNT(*) FROM autotune_trials WHERE run_id = ? AND status = 'invalid'"
        return connection.execute(query, (run_id,)).fetchone()[0]


def upgraded(source, tmp_path, as_this_device=False):
    path = tmp_path / source.name
    shutil.copy(source, path)
    if as_this_device:
        # The fixture was written on one machine's PoCL; make its device this machine's,
        # so the lookup answers here as it did there.
        info = device_info(0)
        with sqlite3.connect(path) as connection:
            connection.execute(
                "UPDATE autotune_devices SET platform = ?, name = ?, vendor = ?, driver = ?",
                (info.platform, info.name, info.vendor, info.driver_version),
            )
    return path


def test_first_schema_upgrades_and_keeps_every_row(tmp_path):
    path = upgraded(FIRST, tmp_path)
    before = dump(path)
    assert all(before[t] for t in TABLES)
    # Commands that read answer from an upgraded copy in memory: the file stays as it was.
    untouched = path.read_bytes()
    runs = cli_json("history", "--db", f"sqlite:///{path}")["runs"]
    assert [r["run_id"] for r in runs] == [1]
    assert cli_json("best", "--db", f"sqlite:///{path}")["kernels"]
    assert path.read_bytes() == untouched
    # `upgrade` (or any search) writes the upgrade.
    assert cli_json("upgrade", "--db", f"sqlite:///{path}") == {"from_schema": "0001", "schema": SCHEMA_HEAD}
    after = dump(path)
    for table in UNCHANGED:
        # every old row, every old column (newer columns come after them)
        width = len(before[table][0])
        assert [row[:width] for row in after[table][: len(before[table])]] == before[table]
    assert [(i, "conv2d", json.loads(k)) for i, _, k in problem_keys(path)] == [
        (i, "conv2d", {"filter_width": f, "out_width": w, "out_height": h, "dtype": d})
        for i, f, w, h, d in before["autotune_problems"]
    ]
    with sqlite3.connect(path) as connection:
        # no kernel fingerprint on old rows: they are never reused as today's measurements
        fingerprinted = "SELECT COUNT(*) FROM autotune_trials WHERE kernel_sha IS NOT NULL"
        assert connection.execute(fingerprinted).fetchone() == (0,)
        assert connection.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall() == [(SCHEMA_HEAD,)]
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
        (stored,) = connection.execute("SELECT config FROM autotune_best").fetchone()
    best = cli_json("best", "--db", f"sqlite:///{path}")["kernels"]
    assert best and best[0]["filter_width"] == 3
    # Rows written before newer knobs existed are shown with those knobs' defaults.
    assert not {"image_vector", "unroll_rows"} & set(json.loads(stored))
    assert best[0]["config"] == CONV2D.space.complete(json.loads(stored))


def test_second_schema_keeps_every_row_and_answers_as_before(tmp_path):
    path = upgraded(SECOND, tmp_path, as_this_device=True)
    db = f"sqlite:///{path}"
    before = dump(path)
    untouched = path.read_bytes()
    runs = cli_json("history", "--db", db)["runs"]
    assert path.read_bytes() == untouched  # answered without writing
    assert cli_json("upgrade", "--db", db)["from_schema"] == "0002"
    assert cli_json("history", "--db", db)["runs"] == runs  # the same answer from the upgraded file
    after = dump(path)
    for table in UNCHANGED:
        assert after[table] == before[table]
    assert [(i, json.loads(k)) for i, _, k in problem_keys(path)] == [
        (i, {"filter_width": f, "out_width": w, "out_height": h, "dtype": d})
        for i, f, w, h, d in before["autotune_problems"]
    ]
    # runs: the same rows, their filter widths and size now a list of problem keys
    old_runs = json.loads((ANSWERS / "history.json").read_text())
    assert [(r["run_id"], r["status"]) for r in runs] == [(r["run_id"], r["status"]) for r in old_runs]
    # 0.1.0 counted re-timings as trials; now they are counted apart
    for new, old in zip(runs, old_runs, strict=True):
        assert new["trials"] + new["retimings"] + rejected(path, new["run_id"]) == old["trials"]
        assert new["trials"] < old["trials"] and new["retimings"] > 0
    for new, old in zip(runs, old_runs, strict=True):
        assert new["problems"] == [f"F={w}" for w in old["filter_widths"].split(",")]
        assert new["image_size"] == old["image_size"]

    # best: every row, and the fallback ladder, as release 0.1.0 answered
    old_best = json.loads((ANSWERS / "best_all.json").read_text())
    new_best = cli_json("best", "--db", db)["kernels"]
    fields = ("filter_width", "image_size", "time_ms", "gflops", "config", "trial_id", "fallback")
    for old in old_best:
        old["config"] = today(old["config"])
    assert [[b[k] for k in fields] for b in new_best] == [[b[k] for k in fields] for b in old_best]
    for name, args in (
        ("best_d0_f3", ["-f", "3"]),
        ("best_d0_f5", ["-f", "5"]),
        ("best_d0_f7", ["-f", "7"]),
        ("best_d0_f9", ["-f", "9"]),
        ("best_d0_f5_64x48", ["-f", "5", "-s", "64x48"]),
    ):
        old = json.loads((ANSWERS / f"{name}.json").read_text())
        (new,) = cli_json("best", "-d", "0", *args, "--db", db)["kernels"]
        old["config"] = today(old["config"])
        for key in ("filter_width", "image_size", "fallback", "config", "time_ms", "tuned_image_size"):
            assert new[key] == old[key], (name, key)

    # show: every trial of a run, in order, its config as it was measured
    old_trials = json.loads((ANSWERS / "show_1.json").read_text())
    new_trials = cli_json("show", "1", "--db", db)["trials"]
    keys = ("trial_id", "filter_width", "origin", "status", "time_ms", "config", "error")
    assert [[t[k] for k in keys] for t in new_trials] == [[t[k] for k in keys] for t in old_trials]

    # export: the same sources, header and manifests (the manifest names its family, its
    # pixel types, border, filter height and whether it takes a batch now; configs, in the
    # manifest and the source's comment, list newer knobs at their defaults)
    for out, args in (("export", []), ("export_64x48", ["-f", "5", "-s", "64x48", "--format", "cl,json"])):
        result = run_cli("export", "-d", "0", "--out", str(tmp_path / out), *args, "--db", db)
        assert result.returncode == 0, result.stderr
        for old_file in (ANSWERS / out).iterdir():
            new_file = tmp_path / out / old_file.name
            if old_file.suffix == ".json":
                old, new = json.loads(old_file.read_text()), json.loads(new_file.read_text())
                assert new.pop("family") == "conv2d"
                pixels = [new.pop(k) for k in ("dtype", "out_dtype", "border", "channels")]
                assert pixels == ["float32", "float32", "none", 1]
                assert new.pop("filter_height") == new["filter_width"] and new.pop("batch") is False
                for manifest in (old, new):
                    del manifest["device"]  # this machine's, not the fixture's
                old["config"] = today(old["config"])
                # the arguments: the kernel's parameters as its source declares them (0.1.0
                # wrote a placeholder for the filter's address space)
                source = new_file.with_suffix(".cl").read_text()
                assert new.pop("arguments") == kernel_signatures(source)[new["kernel_name"]]
                assert len(old.pop("arguments")) == len(kernel_signatures(source)[new["kernel_name"]])
                assert new == old
            elif old_file.suffix == ".h":
                # the header has a device table now: the same kernels, as device 0's entries,
                # each of the default kind (float32 'valid', square, one channel and frame)
                old_entries = header_entries(today_source(old_file.read_text()))
                new_entries = header_entries(new_file.read_text())
                device_0 = [e.split("\n    ") for e in new_entries if e.startswith("0,\n")]
                kinds = [lines[2:11] for lines in device_0]
                default = ['"float32",', '"float32",', '"none",', "-1,", "-1,", "1,", "0,", "0,"]
                assert kinds == [[lines[1], *default] for lines in device_0]
                # then the values along x their edge rows' box counts in: each kernel's work_x
                work = [[x for x in lines[13:] if x.startswith("{")][1] for lines in device_0]
                assert [lines[11] for lines in device_0] == [w[1:].split(",")[0] + "," for w in work]
                assert [lines[12] for lines in device_0] == ["1,"] * len(device_0)  # edge outputs a work-item
                kept = ["\n    ".join(lines[:2] + lines[13:]) for lines in device_0]
                assert kept == ["0,\n    " + e for e in old_entries]
            else:
                assert new_file.read_text() == today_source(old_file.read_text()), old_file.name
    expected_notes = [
        line
        for line in (ANSWERS / "export_stdout.txt").read_text().splitlines()
        if not line.startswith("wrote")
    ]
    assert [line for line in result_lines(db, tmp_path) if not line.startswith("wrote")] == expected_notes


def header_entries(header):
    """The kernel entries of a C header, as text, one per kernel."""
    table = header.split("_kernels[] = {\n", 1)[1].split("\n};", 1)[0]
    return [entry.strip().removeprefix("{").strip() for entry in table.split("\n  },") if entry.strip()]


def result_lines(db, tmp_path):
    result = run_cli("export", "-d", "0", "--out", str(tmp_path / "again"), "--db", db)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("filter_width", [3, 5, 7, 9])
def test_second_schema_convolves_as_before(tmp_path, filter_width):
    path = upgraded(SECOND, tmp_path, as_this_device=True)
    db = f"sqlite:///{path}"
    untouched = path.read_bytes()
    image = np.load(ANSWERS / f"convolve_in_f{filter_width}.npy")
    filt = np.load(ANSWERS / f"convolve_filter_f{filter_width}.npy")
    old = json.loads((ANSWERS / "plans.json").read_text())[str(filter_width)]
    choice = autotune.plan(image.shape, filter_width, db=db)
    answered = (old["level"], today(old["config"]), old["time_ms"])
    assert (choice.level, choice.config, choice.time_ms) == answered
    assert list(choice.tuned_size or []) == list(old["tuned_image_size"] or [])
    out = autotune.convolve(image, filt, db=db)
    # the same kernel on the same data: equal where the fixture was made, and within
    # float32 rounding of it on other CPUs
    np.testing.assert_allclose(out, np.load(ANSWERS / f"convolve_out_f{filter_width}.npy"), rtol=0, atol=1e-5)
    assert path.read_bytes() == untouched  # convolve() reads the old schema without upgrading it


def test_a_finished_search_of_an_older_release_is_reported_not_repeated(tmp_path):
    path = upgraded(SECOND, tmp_path, as_this_device=True)
    db = f"sqlite:///{path}"
    # 0.1.0's run keys name the space it searched; knobs added since make today's
    # search over the same problems another search. With today's space named, the
    # upgraded key is the key today's search looks for.
    with sqlite3.connect(path) as connection:
        (key,) = connection.execute("SELECT key FROM autotune_runs WHERE id = 1").fetchone()
        as_today = json.dumps({**json.loads(key), "space": CONV2D.space.fingerprint}, sort_keys=True)
        connection.execute("UPDATE autotune_runs SET key = ? WHERE id = 1", (as_today,))
    data = cli_json("search", "-d", "0", "-f", "3,5,7", "-s", "96x64", "--trials", "14", "--db", db)
    assert data["run_id"] == 1
    assert len(cli_json("history", "--db", db)["runs"]) == 2
