"""`autotune search` end to end on PoCL with a real SQLite file, in subprocesses."""

import json
import math
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from autotune.errors import UsageError
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.samplers import GPSampler, one_knob_neighbours
from autotune.search import Search, SearchOptions
from autotune.space import SearchSpace
from autotune.store import lease_owner
from autotune.tune.retime import round_winner
from tests.conftest import GPU_LIMITS, ROOT, cli_json, run_cli

SMALL = ["-d", "0", "-s", "40x24"]


def db_url(path) -> str:
    return f"sqlite:///{path}"


def rows(path, sql, *args):
    with sqlite3.connect(path) as connection:
        return connection.execute(sql, args).fetchall()


def counted_trials(path, run_id):
    return rows(
        path,
        "SELECT COUNT(*) FROM autotune_trials WHERE run_id = ? AND origin != 'retime'"
        " AND status != 'invalid'",
        run_id,
    )[0][0]


def test_search_end_to_end_and_best_agrees_with_trials(tmp_path):
    path = tmp_path / "tune.db"
    summary = cli_json(
        "search", *SMALL, "-f", "3,4", "--trials", "12", "--sampler", "random", "--db", db_url(path)
    )
    assert [r["filter_width"] for r in summary["results"]] == [3, 4]
    assert summary["device"]["index"] == 0
    for r in summary["results"]:
        # 12, plus the other width's winner where it was not among them
        assert r["trials"] in (12, 13) and r["time_ms"] > 0 and r["baseline_time_ms"] > 0
        assert r["best_seed_preset"] is not None

    best = cli_json("best", "--db", db_url(path))["kernels"]
    assert {b["filter_width"] for b in best} == {3, 4}
    for b in best:
        trial = rows(
            path, "SELECT status, config, time_ms, origin FROM autotune_trials WHERE id = ?", b["trial_id"]
        )[0]
        assert trial[0] == "ok" and json.loads(trial[1]) == b["config"] and trial[3] == "retime"
        # the best is the round-by-round winner of the last re-timing (a winner of another
        # width that beats the best starts another), and its re-timing median is what it reports
        measured = rows(
            path,
            "SELECT t.id, origin, config_key, time_ms FROM autotune_trials t JOIN autotune_problems p"
            " ON t.problem_id = p.id WHERE json_extract(p.key, '$.filter_width') = ?",
            b["filter_width"],
        )
        retimings, current = [], []  # runs of consecutive re-timed rows: one re-timing each
        for _, origin, key, ms in sorted(measured):
            if origin == "retime":
                current.append((key, ms))
            elif current:
                retimings, current = [*retimings, current], []
        retimings += [current] if current else []
        by_config = {}
        for key, ms in retimings[-1]:
            by_config.setdefault(key, []).append(ms)
        # each round starts one kernel later than the round before
        order = list(by_config)
        rounds = [retimings[-1][r : r + len(order)] for r in range(0, len(retimings[-1]), len(order))]
        assert [[key for key, _ in one] for one in rounds] == [
            order[r % len(order) :] + order[: r % len(order)] for r in range(len(rounds))
        ]
        complete = {k: v for k, v in by_config.items() if len(v) == 3}  # each in round order
        winner = round_winner(complete)
        assert {key for tid, _, key, _ in measured if tid == b["trial_id"]} == {winner}
        assert b["time_ms"] == pytest.approx(sorted(complete[winner])[1])
        # never a failed variant
        assert all(
            s == "ok" for (s,) in rows(path, "SELECT status FROM autotune_trials WHERE config = ?", trial[1])
        )
    only3 = cli_json("best", "--db", db_url(path), "-f", "3")["kernels"]
    assert [b["filter_width"] for b in only3] == [3]
    (answer,) = cli_json("best", "--db", db_url(path), "-f", "3", "-d", "0")["kernels"]
    assert answer["fallback"] == "exact" and answer["config"] == only3[0]["config"]

    history = cli_json("history", "--db", db_url(path))["runs"]
    assert len(history) == 1 and history[0]["status"] == "finished"
    # the trials the search reported, re-timings apart
    assert history[0]["trials"] == sum(r["trials"] for r in summary["results"])
    assert history[0]["retimings"] > 0
    assert history[0]["problems"] == ["F=3", "F=4"] and history[0]["family"] == "conv2d"
    trials = cli_json("show", str(history[0]["run_id"]), "--db", db_url(path))["trials"]
    assert {t["origin"] for t in trials} >= {"preset", "retime"}
    assert all(t["error"] for t in trials if t["status"] != "ok")
    for command in (["best"], ["history"], ["show", "1"]):
        shown = run_cli(*command, "--db", db_url(path))
        assert shown.returncode == 0 and shown.stdout.strip(), shown.stderr

    # The same command again does not measure again.
    again = cli_json(
        "search", *SMALL, "-f", "3,4", "--trials", "12", "--sampler", "random", "--db", db_url(path)
    )
    assert again["run_id"] == summary["run_id"]
    assert len(cli_json("history", "--db", db_url(path))["runs"]) == 1


def _start_search(path, trials, width="3", *extra):
    """A real `autotune search` in the background, on the small problem."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    argv = [
        sys.executable,
        "-m",
        "autotune",
        "search",
        *SMALL,
        "-f",
        width,
        "--trials",
        str(trials),
        "--sampler",
        "random",
        *extra,
        "--db",
        db_url(path),
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_for_trials(path, at_least, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists():
            try:
                if (
                    rows(path, "SELECT COUNT(*) FROM autotune_trials WHERE status != 'invalid'")[0][0]
                    >= at_least
                ):
                    return
            except sqlite3.OperationalError:
                pass
        time.sleep(0.2)
    raise AssertionError("search made no progress")


def test_kill_9_loses_nothing_and_the_same_command_resumes(tmp_path):
    path = tmp_path / "tune.db"
    process = _start_search(path, 25)
    _wait_for_trials(path, 8)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    before = rows(path, "SELECT id, config_key, status, time_ms FROM autotune_trials ORDER BY id")
    assert len(before) >= 8
    assert rows(path, "PRAGMA integrity_check") == [("ok",)]
    assert rows(path, "SELECT status FROM autotune_runs") == [("running",)]

    result = run_cli(
        "search", *SMALL, "-f", "3", "--trials", "25", "--sampler", "random", "--db", db_url(path)
    )
    assert result.returncode == 0, result.stderr
    assert "resuming run 1" in result.stderr
    after = rows(path, "SELECT id, config_key, status, time_ms FROM autotune_trials ORDER BY id")
    assert after[: len(before)] == before
    assert rows(path, "SELECT id, status FROM autotune_runs") == [(1, "finished")]
    assert counted_trials(path, 1) == 25
    assert rows(path, "PRAGMA integrity_check") == [("ok",)]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_stops_after_the_trial_and_keeps_everything(tmp_path, stop):
    path = tmp_path / "tune.db"
    process = _start_search(path, 400)
    _wait_for_trials(path, 5)
    process.send_signal(stop)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "saved" in err
    assert "best kernels" in out  # the summary so far
    assert rows(path, "SELECT status FROM autotune_runs") == [("interrupted",)]
    assert counted_trials(path, 1) >= 5


def test_two_searches_on_one_sqlite_file(tmp_path):
    path = tmp_path / "tune.db"
    processes = [_start_search(path, 14, width, "--seed", seed) for width, seed in (("3", "1"), ("5", "2"))]
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        assert "locked" not in err
    runs = rows(path, "SELECT id, status FROM autotune_runs ORDER BY id")
    assert [status for _, status in runs] == ["finished", "finished"]
    for run_id, _ in runs:
        # 14, plus the other search's winner where this one had not measured it
        assert counted_trials(path, run_id) in (14, 15)
    assert rows(path, "PRAGMA integrity_check") == [("ok",)]


def test_optuna_storage_can_share_the_database(tmp_path):
    import optuna

    path = tmp_path / "shared.db"
    storage = optuna.storages.RDBStorage(db_url(path))
    optuna.create_study(storage=storage, study_name="someone-else").optimize(
        lambda t: t.suggest_float("x", 0, 1), n_trials=2
    )
    result = run_cli(
        "search", *SMALL, "-f", "3", "--trials", "8", "--sampler", "random", "--db", db_url(path)
    )
    assert result.returncode == 0, result.stderr
    tables = {name for (name,) in rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"studies", "trials", "alembic_version", "autotune_trials", "autotune_alembic_version"} <= tables
    assert len(optuna.load_study(study_name="someone-else", storage=storage).trials) == 2


def _snapshot(path):
    """The database's content (a WAL checkpoint may move bytes without changing rows)."""
    if not path.exists():
        return None
    if path.read_bytes()[:16] != b"SQLite format 3\x00":
        return path.read_bytes()
    with sqlite3.connect(path) as connection:
        return list(connection.iterdump())


@pytest.mark.parametrize(
    "args,message",
    [
        (["--db", "notaurl"], "not a database URL"),
        (["--db", "nosuchdriver://x/y"], "unsupported database URL"),
        (["--sampler", "annealing"], "unknown sampler"),
        (["--trials", "0"], "--trials must be positive"),
        (["--trials", "-5"], "--trials must be positive"),
        (["--time-budget", "0"], "--time-budget must be"),
        (["--time-budget", "-1"], "--time-budget must be"),
        (["-f", "3,,5"], "comma list"),
        (["-f", "three"], "comma list"),
        (["-s", "10x"], "WIDTHxHEIGHT"),
        (["-d", "42"], "unknown device"),
    ],
)
def test_bad_search_input_is_one_line_exit_2_and_touches_nothing(tmp_path, args, message):
    path = tmp_path / "tune.db"
    run_cli("search", *SMALL, "-f", "3", "--trials", "3", "--sampler", "random", "--db", db_url(path))
    before = _snapshot(path)
    base = {"-d": "0", "-s": "40x24", "-f": "3", "--db": db_url(path), "--trials": "3"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    argv = [part for pair in base.items() for part in pair]
    result = run_cli("search", *argv)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr
    assert _snapshot(path) == before


def test_bad_database_files(tmp_path):
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(os.urandom(4096))
    folder = tmp_path / "folder.db"
    folder.mkdir()
    readonly = tmp_path / "ro"
    readonly.mkdir()
    readonly.chmod(0o500)
    future = tmp_path / "future.db"
    assert run_cli("search", *SMALL, "-f", "3", "--trials", "2", "--db", db_url(future)).returncode == 0
    with sqlite3.connect(future) as connection:
        connection.execute("UPDATE autotune_alembic_version SET version_num = '9999'")
    cases = [
        (corrupt, "not an SQLite database"),
        (folder, "directory"),
        (future, "newer autotune"),
    ]
    if os.geteuid() != 0:  # root writes anywhere
        cases.append((readonly / "x.db", "cannot write"))
    for path, message in cases:
        before = _snapshot(path) if path.is_file() else None
        for command in (["search", *SMALL, "-f", "3", "--trials", "2"], ["best"], ["history"]):
            result = run_cli(*command, "--db", db_url(path))
            assert result.returncode == 2, (path, result.stderr)
            lines = result.stderr.strip().splitlines()
            if command[0] != "search" and path.parent == readonly:
                message = "no database at"  # reads never create one, so never need the folder
            assert len(lines) == 1 and message in lines[0], (path, result.stderr)
        if before is not None:
            assert _snapshot(path) == before


READ_COMMANDS = (["best"], ["best", "-d", "0", "-f", "3"], ["history"], ["show", "1"])


def test_read_commands_never_create_or_change_a_database(tmp_path):
    """best, history, show and export open the database read-only: a mistyped path is
    an error (no file, no folders), another program's SQLite file keeps its bytes and
    journal mode, a newer schema is refused before anything touches the file."""
    export = ["export", "-d", "0", "--out", str(tmp_path / "out")]
    typo = tmp_path / "no" / "such" / "tune.db"
    for command in (*READ_COMMANDS, export):
        result = run_cli(*command, "--db", db_url(typo))
        assert result.returncode == 2, (command, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and f"no database at {typo}" in lines[0], (command, result.stderr)
    assert not (tmp_path / "no").exists() and not (tmp_path / "out").exists()

    foreign = tmp_path / "notes.db"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE notes (body TEXT)")
        connection.execute("INSERT INTO notes VALUES ('kept')")
    connection.close()
    future = tmp_path / "future.db"
    shutil.copy(ROOT / "tests" / "fixtures" / "schema_0002.db", future)  # rollback journal, not WAL
    with sqlite3.connect(future) as connection:
        connection.execute("UPDATE autotune_alembic_version SET version_num = '9999'")
    connection.close()
    for path, message, commands in (
        (foreign, "is not an autotune database", (*READ_COMMANDS, export)),
        (future, "newer autotune", (*READ_COMMANDS, export, ["search", *SMALL, "-f", "3", "--trials", "2"])),
    ):
        before = path.read_bytes()
        for command in commands:
            result = run_cli(*command, "--db", db_url(path))
            assert result.returncode == 2, (command, result.stderr)
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and message in lines[0], (command, result.stderr)
            assert "Traceback" not in result.stderr
        assert path.read_bytes() == before, path  # no tables added, journal mode unchanged
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(path.name)) == [path.name]


def test_show_unknown_run(tmp_path):
    path = tmp_path / "x.db"
    shutil.copy(ROOT / "tests" / "fixtures" / "schema_0002.db", path)
    result = run_cli("show", "7", "--db", db_url(path))
    assert result.returncode == 2 and "no run 7" in result.stderr


def test_search_engine_is_generic():
    """The same engine optimises a space that has nothing to do with kernels."""
    space = SearchSpace.from_dict(
        {"knobs": {"x": {"values": list(range(10))}, "y": {"values": list(range(10))}}}
    )
    search = Search(space, "tpe", seed=1)
    best = None
    for _ in range(40):
        trial, config = search.ask()  # type: ignore[misc]
        value = (config["x"] - 7) ** 2 + (config["y"] - 2) ** 2
        search.tell(trial, value)
        best = value if best is None else min(best, value)
    assert best <= 1


def test_gp_sampler_on_the_kernel_space_with_points_in_flight():
    """The kernel space is too large to score every point, so the GP ranks a sample
    plus the best points' neighbourhoods; asks made before any tell never repeat."""
    space = CONV2D.space
    valid = lambda c: not space.violations(c, {"filter_width": 9})  # noqa: E731
    search = Search(space, "gp", seed=3, valid=valid, live_values=space.live_values({"filter_width": 9}))
    fastest = {"work_x": 4, "work_y": 8, "filter_space": "local", "unroll": "full"}

    def objective(config):
        return 1.0 + sum(config[k] != v for k, v in fastest.items()) + 0.01 * config["local_x"] / 256

    best = math.inf
    for _ in range(20):
        asked = [search.ask() for _ in range(3)]  # three in flight, as when compiling ahead
        points = [json.dumps(config, sort_keys=True) for _, config in asked]  # type: ignore[misc]
        assert len(set(points)) == 3
        for trial, config in asked:  # type: ignore[misc]
            assert not space.violations(config, {"filter_width": 9})
            value = objective(config)
            search.tell(trial, value)
            best = min(best, value)
    assert best < 1.02, best


def gp_of(search: Search) -> GPSampler:
    """The search's gp sampler, having read what the search's study holds."""
    assert search.gp is not None
    search.gp.prepare(search.distributions)
    search.gp.observe(search.study)
    return search.gp


def test_gp_start_points_favour_powers_of_two():
    """Half the time a knob like block_size_x (16..256 step 16) draws a power of two."""
    space = SearchSpace.from_dict(
        {"knobs": {"block": {"values": list(range(16, 257, 16))}, "flag": {"values": [0, 1]}}}
    )
    search = Search(space, "gp", seed=4)
    blocks = [space.knobs["block"].values[gp_of(search)._start_point()[0]] for _ in range(200)]  # type: ignore[index]
    powers = sum(b & (b - 1) == 0 for b in blocks)
    assert 100 < powers < 160, powers  # uniform draws would give about 62 of 200
    assert len(set(blocks)) > 10  # the other values are still drawn


A = list(range(3, 23, 2))  # knob values without a power of two


def _switch_space_search(seed: int, options: SearchOptions | None = None) -> Search:
    """A best point at (a index 5, s=0, t=0) whose switch s looked bad wherever it was tried;
    a has no power of two, so only s and t give switch moves."""
    space = SearchSpace.from_dict(
        {"knobs": {"a": {"values": A}, "s": {"values": [0, 1]}, "t": {"values": [0, 1]}}}
    )
    search = Search(space, "gp", seed=seed, options=options)
    for a in (0, 1, 2, 3, 4, 6, 7, 8, 9):
        search.add_history({"a": A[a], "s": 0, "t": 1}, 2.0 + abs(a - 5) * 0.1)
    for a in (0, 2, 8):
        search.add_history({"a": A[a], "s": 1, "t": 1}, 50.0)
    search.add_history({"a": A[5], "s": 0, "t": 0}, 1.0)
    return search


def test_gp_local_step_flips_switches_first():
    """The local step tries the best point's two-valued knobs before anything else,
    even where the model expects a flip to be slow; once flipped, other knobs move
    (`switch_scope=0`: every flip at every new best point; single flips alone)."""
    every_flip = SearchOptions(switch_scope=0, switch_pairs="off")
    search = _switch_space_search(seed=6, options=every_flip)
    assert len(search.visited) % 2 == 1  # an odd count: the next step is local
    assert sorted(gp_of(search)._local_candidates()) == [(5, 0, 1), (5, 1, 0)]
    assert gp_of(search)._gp_proposal() in ((5, 0, 1), (5, 1, 0))
    search.add_history({"a": A[5], "s": 1, "t": 0}, 40.0)
    search.add_history({"a": A[0], "s": 0, "t": 0}, 3.0)  # odd again
    assert gp_of(search)._gp_proposal() == (5, 0, 1)  # the one switch flip left
    search.add_history({"a": A[5], "s": 0, "t": 1}, 2.0)
    search.add_history({"a": A[1], "s": 0, "t": 0}, 3.0)
    near = gp_of(search)._local_candidates()
    assert near and all(p[1:] == (0, 0) for p in near)  # switches done: a moves
    every = gp_of(_switch_space_search(6, SearchOptions(switches_first=False)))._local_candidates()
    assert (5, 1, 0) in every and (4, 0, 0) in every


def test_gp_switch_scope_skips_flips_known_near_the_best():
    """With `switch_scope`, a switch move comes first only where no measured point that
    close to the best point has its value: t=1 is known two knobs away (a index 4, t=1),
    s=1 only three knobs away, so s is flipped first and t waits for the model (single flips:
    `switch_pairs=off`)."""
    single = {"switch_pairs": "off", "switch_context": "any"}
    search = _switch_space_search(seed=6, options=SearchOptions(switch_scope=2, **single))
    assert gp_of(search)._local_candidates() == [(5, 1, 0)]
    wide = _switch_space_search(seed=6, options=SearchOptions(switch_scope=3, **single))
    near = gp_of(wide)._local_candidates()
    assert (5, 1, 0) in near and (4, 0, 0) in near  # both known within 3: no flip first


def test_gp_switch_known_only_under_the_best_points_other_switches():
    """By default (`switch_scope=3`, `switch_context=same`) a flip counts as known only from
    points whose other switches match the best point's: s=1 was measured only with t=1, so
    it says nothing of s=1 with t=0 and s is flipped first; t=1 was measured with s=0, as at
    the best point, so t waits for the model."""
    assert SearchOptions().switch_scope == 3 and SearchOptions().switch_context == "same"
    search = _switch_space_search(seed=6)
    assert gp_of(search)._local_candidates() == [(5, 1, 0)]
    search.add_history({"a": A[5], "s": 1, "t": 0}, 40.0)
    search.add_history({"a": A[0], "s": 0, "t": 0}, 3.0)  # odd again: a local step
    near = gp_of(search)._local_candidates()
    assert (5, 0, 1) in near and (4, 0, 0) in near  # every flip known in its context


def test_gp_switch_pairs_flip_two_switches_at_once():
    """With `switch_pairs=on`, both switches flipped at once is a switch move too, known only
    where a near point has both values: s=1 with t=1 was measured three knobs away (a index
    0, 2, 8), so the pair is unknown within 2 knobs and known within 3. With `after`, the
    pair waits until no single flip is unknown. Pairs are on by default."""
    assert SearchOptions().switch_pairs == "on"
    search = _switch_space_search(seed=6, options=SearchOptions(switch_scope=2))
    assert sorted(gp_of(search)._local_candidates()) == [(5, 1, 0), (5, 1, 1)]
    search = _switch_space_search(seed=6)
    assert gp_of(search)._local_candidates() == [(5, 1, 0)]  # s alone: only seen with t=1
    search = _switch_space_search(seed=6, options=SearchOptions(switch_pairs="off", switch_scope=2))
    assert gp_of(search)._local_candidates() == [(5, 1, 0)]  # no pairs
    after = _switch_space_search(seed=6, options=SearchOptions(switch_pairs="after", switch_scope=2))
    assert gp_of(after)._local_candidates() == [(5, 1, 0)]  # a single flip is still unknown
    after.add_history({"a": A[5], "s": 1, "t": 0}, 40.0)
    after.add_history({"a": A[0], "s": 0, "t": 0}, 3.0)  # odd again: a local step
    assert gp_of(after)._local_candidates() == [(5, 1, 1)]  # every single flip known: the pair


def test_gp_global_step_takes_the_lowest_predicted_time():
    """The global step ("mean") goes where the model expects the fastest point, next to
    the measured optimum; expected improvement ("ei") prefers an unexplored far corner."""
    space = SearchSpace.from_dict({"knobs": {"x": {"values": list(range(40))}}})
    proposals = []
    for step in ("mean", "ei"):
        search = Search(space, "gp", seed=7, options=SearchOptions(global_step=step))
        for x in (10, 12, 14, 16, 18):
            search.add_history({"x": x}, 1.0 + abs(x - 14) * 0.2)
        assert len(search.visited) % 2 == 1
        search.add_history({"x": 20}, 2.2)  # even count: the next step is global
        proposals.append(gp_of(search)._gp_proposal())
    assert proposals[0] in ((13,), (15,))
    assert proposals[1][0] > 25  # type: ignore[index]


def test_gp_start_points_split_each_switch_evenly():
    """Each two-valued knob is on in half of the start points and off in the other half."""
    space = SearchSpace.from_dict(
        {
            "knobs": {
                "block": {"values": list(range(16, 257, 16))},
                "shared": {"values": [False, True]},
                "cached": {"values": [0, 1]},
            }
        }
    )
    for seed in range(5):
        search = Search(space, "gp", seed=seed)
        starts = []
        for _ in range(10):
            point = gp_of(search)._start_point()
            assert point is not None
            search.add_history(search.gp.params_of(point), 1.0 + len(starts))
            starts.append(point)
        assert sum(p[1] for p in starts) == 5 and sum(p[2] for p in starts) == 5


def test_gp_local_step_moves_a_knob_to_a_power_of_two_first():
    """From a best point at block 48, the switch moves are blocks 32 and 64 (reshape moves,
    which would add block 96 with tile 1, off)."""
    space = SearchSpace.from_dict(
        {"knobs": {"block": {"values": list(range(16, 257, 16))}, "tile": {"values": [1, 2, 3, 4]}}}
    )
    search = Search(space, "gp", seed=8, options=SearchOptions(reshape_moves="off"))
    for block in (16, 80, 112, 160, 208, 256):
        search.add_history({"block": block, "tile": 1}, 3.0)
    search.add_history({"block": 48, "tile": 2}, 1.0)
    assert len(search.visited) % 2 == 1
    assert sorted(gp_of(search)._local_candidates()) == [(1, 1), (3, 1)]  # value indices of 32 and 64
    search.add_history({"block": 32, "tile": 2}, 2.0)
    search.add_history({"block": 64, "tile": 2}, 2.0)
    assert len(gp_of(search)._local_candidates()) == 13 + 3  # other blocks, other tiles


def test_knobs_that_name_choices_can_be_categorical():
    """A knob with values 0..k-1 (a method) is ordinal by default, so its 1 and 2 count
    as powers of two; as categorical it has none, every value shows up in the start
    points, every other value is a switch move and the model sees it one-hot."""
    knobs = {
        "method": {"values": [0, 1, 2, 3]},
        "block": {"values": [32, 64, 96, 128]},
        "s": {"values": [0, 1]},
    }
    space = SearchSpace.from_dict({"knobs": knobs})
    assert gp_of(Search(space, "gp", seed=1)).powers_of_two[0] == [1, 2]
    # value_offsets off: the layout checked below is the smooth kernel's features only;
    # switch_scope 0: every switch move comes first, none left out as known
    options = SearchOptions(enumerations="categorical", value_offsets=False, switch_scope=0)
    search = Search(space, "gp", seed=1, options=options)
    gp = gp_of(search)
    assert gp.choices == {0} and gp.powers_of_two[0] is None and gp.powers_of_two[1] == [0, 1, 3]
    starts = []
    for _ in range(8):
        point = gp_of(search)._start_point()
        assert point is not None
        search.add_history(search.gp.params_of(point), 5.0 + len(starts))
        starts.append(point)
    assert sorted(p[0] for p in starts) == [0, 0, 1, 1, 2, 2, 3, 3]
    search.add_history({"method": 2, "block": 64, "s": 0}, 1.0)  # nine: the next step is local
    moves = {p for p in gp_of(search)._local_candidates() if p[1:] == (1, 0)}
    assert moves == {(m, 1, 0) for m in (0, 1, 3)} - set(search.visited)
    # one-hot method; block scaled and its power-of-two flag; s and its own flag
    assert gp_of(search)._features([(2, 1, 0)]).tolist() == [[0, 0, 1, 0, 1 / 3, 1, 0, 0]]


def test_ratio_features_show_the_model_each_pair_of_sizes():
    """With `ratio_features` the model also sees log2(a / b) of each pair of size knobs,
    scaled to [0, 1] over the pair's values; knobs that name choices or hold a zero do not
    take part."""
    import numpy as np

    knobs = {
        "tile": {"values": [16, 32, 64, 128]},
        "group": {"values": [4, 8, 16]},
        "vector": {"values": [1, 2, 4]},
        "s": {"values": [0, 1]},
    }
    space = SearchSpace.from_dict({"knobs": knobs})
    # value_offsets off: its value-index columns would follow the ratios
    plain_options = SearchOptions(value_offsets=False)
    plain = gp_of(Search(space, "gp", seed=1, options=plain_options))._features([(3, 0, 1, 0)])
    ratio_options = SearchOptions(ratio_features=True, value_offsets=False)
    gp = gp_of(Search(space, "gp", seed=1, options=ratio_options))
    features = gp._features([(3, 0, 1, 0), (0, 2, 0, 1)])
    assert features.shape == (2, plain.shape[1] + 3)
    np.testing.assert_allclose(features[0, : plain.shape[1]], plain[0])
    # tile/group: log2 from 0 (16/16) to 5 (128/4); tile/vector: 2 to 7; group/vector: 0 to 4
    np.testing.assert_allclose(features[0, plain.shape[1] :], [5 / 5, 4 / 5, 1 / 4])
    np.testing.assert_allclose(features[1, plain.shape[1] :], [0 / 5, 2 / 5, 4 / 4])
    assert ((features >= 0) & (features <= 1)).all()


def test_a_stalled_search_explores_with_its_global_steps():
    """After `stall_after` evaluations without a 1% gain the global step is expected
    improvement (or a random point) until the best time improves again."""
    space = SearchSpace.from_dict({"knobs": {"x": {"values": list(range(40))}}})
    for step, far in (("ei", 25), ("random", -1)):
        options = SearchOptions(stall_after=3, stall_step=step)
        search = Search(space, "gp", seed=7, options=options)
        for x in (10, 12, 14, 16, 18):
            search.add_history({"x": x}, 1.0 + abs(x - 14) * 0.2)
        search.add_history({"x": 20}, 2.2)  # the best (x = 14) came 3 evaluations ago
        assert gp_of(search)._stalled()
        proposal = gp_of(search)._gp_proposal()
        assert proposal is not None and (proposal[0] > far if step == "ei" else search.gp._usable(proposal))
        search.add_history({"x": 13}, 0.5)
        assert not gp_of(search)._stalled()
        assert gp_of(search)._gp_proposal() != proposal or step == "random"


def test_a_stalled_search_takes_its_local_steps_around_a_second_basin():
    """Stalled, the local step moves one knob from the best point measured since the
    stall began (more than one knob from the best), not from the best itself: a
    trap's own neighbours are spent, the other basin's are not."""
    space = SearchSpace.from_dict(
        {"knobs": {"x": {"values": list(range(10))}, "y": {"values": list(range(10))}}}
    )
    history = [((2, 2), 1.0), ((8, 8), 1.5), ((7, 1), 1.2), ((2, 3), 1.1), ((5, 5), 1.4)]
    centres = {}
    for centre in ("best", "explored"):
        options = SearchOptions(stall_after=3, stall_centre=centre, switches_first=False)
        search = Search(space, "gp", seed=3, options=options)
        for (x, y), seconds in history:
            search.add_history({"x": x, "y": y}, seconds)
        gp = gp_of(search)
        assert gp._stalled()
        near = gp._local_candidates()
        assert near and all(gp._usable(p) for p in near)
        centres[centre] = set(near)
    assert centres["best"] == set(one_knob_neighbours((2, 2), [10, 10])) - {(2, 3)}
    # (7, 1) is the best since the stall began that is more than one knob from (2, 2)
    assert centres["explored"] == set(one_knob_neighbours((7, 1), [10, 10]))


def test_local_centres_move_to_a_second_basin_once_the_best_one_is_spent():
    """With `local_centres=2`, once `basin_patience` one-knob neighbours of the best point
    are measured (none better), the local step moves one knob from the best point three
    knobs or more from it, and a new best in that basin becomes its centre. Not yet spent,
    or with one centre, the local step stays around the best point."""
    names = "abcd"
    space = SearchSpace.from_dict({"knobs": {n: {"values": list(range(5))} for n in names}})
    best, other, near_best = (0, 0, 0, 0), (3, 3, 3, 0), (1, 1, 0, 0)
    history = [(best, 1.0), (other, 1.3), (near_best, 1.1)]
    history += [((0, 0, 0, 1), 1.5), ((0, 0, 1, 0), 1.6), ((0, 2, 0, 0), 1.7)]  # the best one's neighbours
    around_best = {p for p in one_knob_neighbours(best, [5] * 4) if p not in dict(history)}

    def offered(centres: int, patience: int, extra: list = ()) -> tuple[set, object]:
        options = SearchOptions(local_centres=centres, basin_patience=patience, switches_first=False)
        search = Search(space, "gp", seed=5, options=options)
        for point, seconds in [*history, *extra]:
            search.add_history(dict(zip(names, point, strict=True)), seconds)
        gp = gp_of(search)
        return set(gp._local_candidates()), gp

    assert offered(1, 3)[0] == around_best
    assert offered(2, 4)[0] == around_best  # three of the best point's neighbours measured: not spent
    moved, gp = offered(2, 3)
    assert gp._basin_centres() == [best, other]  # (1, 1, 0, 0) is two knobs from the best
    assert moved == set(one_knob_neighbours(other, [5] * 4))
    # a better point in the second basin (one knob from its centre) becomes that basin's centre
    better = (3, 3, 4, 0)
    moved, gp = offered(2, 3, [(better, 1.2)])
    assert gp._basin_centres() == [best, better]
    assert moved == {p for p in one_knob_neighbours(better, [5] * 4) if p != other}


def test_local_patience_gives_local_turns_to_the_global_step():
    """With `local_patience=3`, once three one-knob neighbours of the best point are
    measured (none better), its local turns are global steps; a new best point's
    neighbours are tried again. Off (0) or not yet spent, the local step takes its turn."""
    space = SearchSpace.from_dict(
        {"knobs": {"x": {"values": list(range(10))}, "y": {"values": list(range(10))}}}
    )
    history = [((2, 2), 1.0), ((2, 3), 1.2), ((3, 2), 1.3), ((2, 1), 1.4), ((8, 8), 2.0)]
    for patience, spent in ((0, False), (3, True), (4, False)):
        search = Search(space, "gp", seed=6, options=SearchOptions(local_patience=patience))
        for (x, y), seconds in history:
            search.add_history({"x": x, "y": y}, seconds)
        gp = gp_of(search)
        assert len(gp.visited) % 2 == 1  # a local turn
        assert gp._local_spent() is spent
        local_steps: list[int] = []
        gp._local_candidates = lambda calls=local_steps: calls.append(1) or []  # type: ignore[method-assign]
        assert gp._gp_proposal() is not None
        assert bool(local_steps) is not spent
        if spent:
            search.add_history({"x": 6, "y": 6}, 0.5)
            assert not gp_of(search)._local_spent()


@pytest.mark.parametrize("knobs, values", [(3, 4), (6, 7)])  # every point scored; a sample (7**6 > 50 000)
def test_the_local_step_widens_to_two_knobs_once_one_knob_moves_are_spent(knobs, values):
    """With `local_radius=2`, once every one-knob neighbour of the best point is
    measured the local step offers the unmeasured points two knobs away (all of them);
    with the default it offers nothing and the global step takes over."""
    names = "abcdef"[:knobs]
    space = SearchSpace.from_dict({"knobs": {n: {"values": list(range(values))} for n in names}})
    centre = (0,) * knobs
    ring = one_knob_neighbours(centre, [values] * knobs)
    offered = {}
    for radius in (1, 2):
        search = Search(space, "gp", seed=4, options=SearchOptions(local_radius=radius))
        search.add_history(dict.fromkeys(names, 0), 1.0)
        for point in ring:
            search.add_history(dict(zip(names, point, strict=True)), 2.0)
        offered[radius] = gp_of(search)._local_candidates()
    assert offered[1] == []
    two_away = {
        q
        for p in ring
        for q in one_knob_neighbours(p, [values] * knobs)
        if sum(q) and q.count(0) == knobs - 2
    }
    assert len(offered[2]) == len(set(offered[2])) == len(two_away) and set(offered[2]) == two_away


def test_a_stalled_search_can_jump_three_knobs_away():
    """`stall_step=far`: a stalled global step takes the fastest-predicted point three
    knobs or more from the best (out of traps that one- and two-knob moves cannot leave),
    where the plain global step takes one next to it."""
    names = "abcd"
    space = SearchSpace.from_dict({"knobs": {n: {"values": [0, 1, 2, 3]} for n in names}})
    history = [
        (1, 0, 0, 0),
        (0, 1, 0, 0),
        (0, 0, 1, 0),
        (1, 1, 0, 0),
        (2, 2, 2, 2),
        (3, 3, 0, 1),
        (0, 0, 0, 1),
    ]
    knobs_away = {}
    for options in (SearchOptions(stall_after=0), SearchOptions(stall_after=3, stall_step="far")):
        search = Search(space, "gp", seed=2, options=options)
        search.add_history(dict.fromkeys(names, 0), 1.0)
        for point in history:
            search.add_history(dict(zip(names, point, strict=True)), 2.0 + sum(point) / 10)
        gp = gp_of(search)
        assert len(gp.visited) % 2 == 0  # the next step is a global one
        proposal = gp._gp_proposal()
        assert proposal is not None and gp._usable(proposal)
        knobs_away[options.stall_step if options.stall_after else "plain"] = sum(v != 0 for v in proposal)
    assert knobs_away["plain"] < 3 <= knobs_away["far"]


def test_genetic_steps_combine_the_knobs_of_two_good_points():
    """Two good points that are good for different reasons (knobs a-c, knobs d-f): a
    genetic step proposes children that take knobs from both, a jump of several knobs
    that no one-knob neighbour makes. Children are valid and never measured before."""
    names = "abcdef"
    space = SearchSpace.from_dict({"knobs": {n: {"values": [0, 1, 2, 3]} for n in names}})
    search = Search(space, "gp", seed=5, valid=lambda c: c["a"] + c["f"] != 6)
    first, second = (3, 3, 3, 0, 0, 0), (0, 0, 0, 3, 3, 3)
    search.add_history(dict(zip(names, first, strict=True)), 1.0)
    search.add_history(dict(zip(names, second, strict=True)), 1.0)
    for i in range(4):
        search.add_history(dict(zip(names, (i, 1, 2, 1, 2, 3 - i), strict=True)), 10.0 + i)
    gp = gp_of(search)
    children = [gp._genetic_proposal() for _ in range(100)]
    assert all(c is not None and gp._usable(c) for c in children)
    # two knobs or more from each parent: more than a mutation of one parent gives
    mixed = [
        c
        for c in children
        if sum(c[k] == first[k] for k in range(6)) >= 2 and sum(c[k] == second[k] for k in range(6)) >= 2
    ]
    assert len(mixed) >= 5, len(mixed)


def test_compile_ahead_pipeline_gives_the_same_kind_of_result(tmp_path):
    """Forced onto PoCL (where it is off by default), compiling ahead keeps every rule."""
    path = tmp_path / "tune.db"
    data = cli_json(
        "search",
        *SMALL,
        "-f",
        "3",
        "--trials",
        "16",
        "--sampler",
        "random",
        "--compilers",
        "2",
        "--db",
        db_url(path),
    )
    summary = data["results"][0]
    assert summary["trials"] == 16 and summary["time_ms"] > 0
    assert counted_trials(path, 1) == 16
    measured = rows(
        path,
        "SELECT status, compile_ms FROM autotune_trials WHERE origin IN ('preset', 'sampler')"
        " AND status = 'ok'",
    )
    assert measured and all(ms is not None and ms > 0 for _, ms in measured)
    keys = rows(
        path,
        "SELECT config_key FROM autotune_trials WHERE origin IN ('preset', 'sampler', 'warm')"
        " AND status != 'invalid'",
    )
    assert len(keys) == len(set(keys))  # nothing measured twice


def test_database_deleted_mid_run_is_one_clear_error(tmp_path):
    path = tmp_path / "tune.db"
    process = _start_search(path, 300)
    _wait_for_trials(path, 3)
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"tune.db{suffix}").unlink(missing_ok=True)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1, err
    lines = [line for line in err.strip().splitlines() if line.startswith("autotune:")]
    assert len(lines) == 1 and "deleted or replaced" in lines[0] and "Traceback" not in err


def test_database_locked_for_a_while_loses_nothing(tmp_path):
    path = tmp_path / "tune.db"
    process = _start_search(path, 20)
    _wait_for_trials(path, 3)
    blocker = sqlite3.connect(path, timeout=30)
    blocker.execute("BEGIN EXCLUSIVE")
    time.sleep(4)  # the search waits on the lock (busy timeout), it does not fail
    blocker.rollback()
    blocker.close()
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert counted_trials(path, 1) == 20
    assert rows(path, "PRAGMA integrity_check") == [("ok",)]


def test_a_failed_variant_can_never_become_best(tmp_path):
    """Plant the fastest trial of all as wrong_result: best, export and convolve ignore it."""
    path = tmp_path / "tune.db"
    assert (
        run_cli(
            "search", *SMALL, "-f", "3", "--trials", "8", "--sampler", "random", "--db", db_url(path)
        ).returncode
        == 0
    )
    planted = {
        "filter_mode": "define",
        "filter_space": "global",
        "unroll": 2,
        "vector": 1,
        "local_x": 8,
        "local_y": 2,
        "work_x": 2,
        "work_y": 2,
        "cache_local": False,
    }
    key = json.dumps(planted, sort_keys=True, separators=(",", ":"))
    with sqlite3.connect(path) as connection:
        connection.execute(
            "INSERT INTO autotune_trials (run_id, device_id, problem_id, number, origin, config, config_key,"
            " status, time_ms, runs, error, created_at) VALUES (1, 1, 1, 99, 'sampler', ?, ?, 'wrong_result',"
            " 0.000001, 0, 'planted', '2026-01-01 00:00:00')",
            (json.dumps(planted), key),
        )
    # a new run re-times the top trials: the planted one is not among the candidates
    assert (
        run_cli(
            "search",
            *SMALL,
            "-f",
            "3",
            "--trials",
            "10",
            "--sampler",
            "random",
            "--fresh",
            "--db",
            db_url(path),
        ).returncode
        == 0
    )
    best = cli_json("best", "--db", db_url(path))["kernels"]
    assert best and all(b["config"] != planted for b in best)
    (answer,) = cli_json("best", "-d", "0", "-f", "3", "--db", db_url(path))["kernels"]
    assert answer["config"] != planted
    export = tmp_path / "export"
    assert run_cli("export", "-d", "0", "--out", str(export), "--db", db_url(path)).returncode == 0
    assert json.loads((export / "convolve_f3.json").read_text())["config"] != planted


def test_many_processes_creating_one_database_at_once(tmp_path):
    """The first open of a new file (schema creation, switch to WAL) races cleanly."""
    for round_number in range(3):
        url = db_url(tmp_path / f"new{round_number}.db")
        opened = f"Store({url!r}).problem_id('conv2d', {{'filter_width': 3}})"
        code = f"from autotune.store import Store; {opened}; print('ok')"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        processes = [
            subprocess.Popen(
                [sys.executable, "-c", code],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(6)
        ]
        for process in processes:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0 and out.strip() == "ok", err[-2000:]
        assert rows(tmp_path / f"new{round_number}.db", "SELECT COUNT(*) FROM autotune_problems") == [(1,)]


def test_a_finished_search_is_reported_again_unless_the_space_changed(tmp_path):
    path = tmp_path / "tune.db"
    command = ("search", *SMALL, "-f", "3", "--trials", "6", "--sampler", "random", "--db", db_url(path))
    for _ in range(2):
        result = run_cli(*command)
        assert result.returncode == 0, result.stderr
    assert rows(path, "SELECT id, status FROM autotune_runs") == [(1, "finished")]
    assert counted_trials(path, 1) == 6

    # The run as an older release (with a different space) would have written it.
    fingerprint = CONV2D.space.fingerprint
    with sqlite3.connect(path) as db:
        db.execute("UPDATE autotune_runs SET key = replace(key, ?, 'an-older-space')", (fingerprint,))
    result = run_cli(*command)
    assert result.returncode == 0, result.stderr
    assert rows(path, "SELECT id, status FROM autotune_runs") == [(1, "finished"), (2, "finished")]
    assert counted_trials(path, 2) == 6


def test_each_width_tries_winners_found_after_it_was_tuned(tmp_path):
    """F = 3 is tuned before any other width has a winner; once the loop is over it
    must still try them. Here a winner for F = 7 appears in the database right after
    F = 3 is done: F = 3 measures it after its budget, F = 5 in its warm start."""
    from autotune.devices import device_info
    from autotune.store import Store, config_key
    from autotune.tune import Budget, Tuner

    store = Store(db_url(tmp_path / "tune.db"))
    device = device_info(0)
    space = CONV2D.space
    planted = space.complete({"filter_mode": "define", "work_x": 2, "work_y": 2, "local_x": 4, "local_y": 4})
    assert config_key(planted) not in {config_key(p.config) for p in space.presets.values()}

    def listener(kind, data):
        if kind == "problem_done" and data["label"] == "F=3":
            device_id = store.device_id(device)
            problem_id = store.problem_id("conv2d", Conv2DProblem(7, 40, 24).key())
            trial = store.add_trial(
                run_id=tuner.run_id,
                device_id=device_id,
                problem_id=problem_id,
                number=0,
                origin="sampler",
                config=json.dumps(planted),
                config_key=config_key(planted),
                status="ok",
                time_ms=1.0,
            )
            store.set_best(device_id, problem_id, trial, 1.0)

    problems = [Conv2DProblem(3, 40, 24), Conv2DProblem(5, 40, 24)]
    tuner = Tuner(
        store, 0, device, CONV2D, problems, sampler="random", budget=Budget(trials=11), listener=listener
    )
    results = tuner.run()
    tried = {
        width: [
            (origin, number)
            for origin, number in rows(
                tmp_path / "tune.db",
                "SELECT origin, number FROM autotune_trials t JOIN autotune_problems p ON t.problem_id = p.id"
                " WHERE json_extract(p.key, '$.filter_width') = ? AND config_key = ? AND status = 'ok'",
                width,
                config_key(planted),
            )
        ]
        for width in (3, 5)
    }
    # 11 trials a width: the 9 presets a CPU measures, then the sampler's.
    assert ("warm", 11) in tried[3] or ("warm", 12) in tried[3]  # after its 11 trials
    assert any(origin == "warm" and number < 11 for origin, number in tried[5])
    assert results[0].trials >= 12 and results[0].best_ms is not None


def test_times_of_another_kernel_are_measured_again(tmp_path):
    """A stored time is reused only for the kernel it was measured on. Unchanged, the
    next search skips what is stored; after a template change (simulated by changing the
    stored fingerprints) the same points are measured again."""
    path = tmp_path / "tune.db"
    command = ("search", *SMALL, "-f", "3", "--trials", "6", "--sampler", "random", "--db", db_url(path))
    measured = "SELECT config_key, kernel_sha FROM autotune_trials WHERE run_id = ? AND origin != 'retime'"
    assert run_cli(*command).returncode == 0
    first = {key for key, _ in rows(path, measured, 1)}
    assert len(first) == 6
    assert run_cli(*command, "--fresh").returncode == 0
    assert not first & {key for key, _ in rows(path, measured, 2)}
    with sqlite3.connect(path) as db:
        db.execute("UPDATE autotune_trials SET kernel_sha = 'from an older template' WHERE run_id = 1")
    assert run_cli(*command, "--fresh").returncode == 0
    again = rows(path, measured, 3)
    assert first <= {key for key, _ in again}
    assert all(len(sha) == 64 for _, sha in again)


def test_a_seed_that_wins_is_weighed_as_the_best_is(tmp_path):
    """The summary's "vs baseline" compares like with like: where the baseline preset is
    the best kernel, the ratio is 1, however its re-timing rows scatter."""
    from autotune.store import Store
    from autotune.tune.ledger import Ledger
    from autotune.tune.summary import ProblemResult, summarise

    path = tmp_path / "tune.db"
    cli_json("search", *SMALL, "-f", "3", "--trials", "8", "--sampler", "random", "--db", db_url(path))
    store = Store(db_url(path))
    try:
        ((best, device, problem_row),) = store.best()
        problem = CONV2D.problem(problem_row.fields)
        ledger = Ledger(store, CONV2D, problem, device.id, problem_row.id, run_id=1)
        baseline = CONV2D.space.presets["baseline"].config
        first = next(
            t for t in ledger.ok_first() if CONV2D.read_config(t.config) == baseline and t.origin == "preset"
        )
        # the baseline made the best, at a median above its fastest measurement
        store.set_best(device.id, problem_row.id, first, first.time_ms * 1.8)
        result = summarise(ledger, ProblemResult(problem, "F=3"))
        assert result.best_config == baseline
        assert result.baseline_ms == result.best_ms == pytest.approx(first.time_ms * 1.8)
    finally:
        store.close()


def test_a_second_identical_search_never_measures_the_running_one(tmp_path):
    """The run is leased to the process measuring it: the same command started again
    says who holds it and measures nothing; once the holder is gone it resumes."""
    path = tmp_path / "tune.db"
    first = _start_search(path, 400)
    try:
        _wait_for_trials(path, 3)
        second = _start_search(path, 400)
        out, err = second.communicate(timeout=120)
        assert second.returncode == 1, err
        assert "run 1 is this same search, being measured now by" in err and "--fresh" in err
        owners = rows(path, "SELECT owner FROM autotune_runs")
        assert owners == [(lease_owner(first.pid),)]
        assert rows(path, "SELECT COUNT(*) FROM autotune_runs") == [(1,)]
        assert {run for (run,) in rows(path, "SELECT DISTINCT run_id FROM autotune_trials")} == {1}
        measured = rows(
            path, "SELECT config_key, COUNT(*) FROM autotune_trials WHERE origin != 'retime' GROUP BY 1"
        )
        assert all(count == 1 for _, count in measured)  # no point measured twice
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    # the holder is gone (killed, its lease unreleased): the same command takes the run over
    result = run_cli(
        "search", *SMALL, "-f", "3", "--trials", "20", "--sampler", "random", "--db", db_url(path)
    )
    assert result.returncode == 0 and "resuming run" not in result.stderr  # another key: 20 trials
    resumed = _start_search(path, 400)
    deadline = time.monotonic() + 120
    while rows(path, "SELECT owner FROM autotune_runs WHERE id = 1") != [(lease_owner(resumed.pid),)]:
        assert time.monotonic() < deadline and resumed.poll() is None, "the run was not taken over"
        time.sleep(0.2)
    # interrupted once it measures (it says it resumes between taking the run and measuring)
    (done,) = rows(path, "SELECT COUNT(*) FROM autotune_trials WHERE status != 'invalid'")[0]
    _wait_for_trials(path, done + 1)
    resumed.send_signal(signal.SIGINT)
    _, err = resumed.communicate(timeout=120)
    assert "resuming run 1" in err, err


def test_the_same_search_started_twice_at_once_opens_one_run(tmp_path):
    path = tmp_path / "tune.db"
    first, second = _start_search(path, 400), _start_search(path, 400)  # no run exists yet
    try:
        deadline = time.monotonic() + 120
        while first.poll() is None and second.poll() is None:
            assert time.monotonic() < deadline, "neither search gave way"
            time.sleep(0.2)
        refused, running = (first, second) if first.poll() is not None else (second, first)
        _, err = refused.communicate(timeout=30)
        assert refused.returncode == 1 and "being measured now by" in err, err
        assert running.poll() is None
        assert rows(path, "SELECT id, owner FROM autotune_runs") == [(1, lease_owner(running.pid))]
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


def test_a_process_that_lost_its_run_neither_renews_nor_ends_it(tmp_path, monkeypatch):
    """A holder silent past the stale limit (suspended, say) finds the run taken over:
    its heartbeat fails, its end is not recorded, and the heartbeat thread says so."""
    from autotune.devices import device_info
    from autotune.store import Store
    from autotune.tune import control

    store = Store(db_url(tmp_path / "lease.db"))
    try:
        device_id = store.device_id(device_info(0))
        fields = {"family": "conv2d", "problems": "[]", "sampler": "gp", "seed": 0}
        fields |= {"trials_budget": 1, "time_budget_s": None, "tool_version": "test"}
        run, state = store.open_run(device_id, "k", "host-a:1", 120.0, **fields)
        assert state == "new"
        again, state = store.open_run(device_id, "k", "host-b:2", 120.0, **fields)
        assert state == "held" and again.owner == "host-a:1"  # fresh lease of another host
        taken, state = store.open_run(device_id, "k", "host-b:2", 0.0, **fields)  # A silent too long
        assert state == "resumed" and taken.id == run.id
        assert not store.heartbeat(run.id, "host-a:1")
        assert not store.set_run_status(run.id, "finished", owner="host-a:1")
        lost = []
        monkeypatch.setattr(control, "HEARTBEAT_S", 0.05)
        with control.Heartbeat(store, run.id, "host-a:1", lambda: lost.append(True)):
            deadline = time.monotonic() + 10
            while not lost and time.monotonic() < deadline:
                time.sleep(0.05)
        assert lost == [True]
        assert store.heartbeat(run.id, "host-b:2")
        assert store.set_run_status(run.id, "finished", owner="host-b:2")
        finished, state = store.open_run(device_id, "k", "host-c:3", 120.0, **fields)
        assert state == "finished"
    finally:
        store.close()


def test_gp_settings_are_one_options_object_read_from_text():
    """Bench scripts pass settings explicitly: nothing module-wide is overwritten."""
    assert SearchOptions.parse("") == SearchOptions()
    options = SearchOptions.parse("global_step=ei, switches_first=off,genetic_every=4,pow2_share=0.75")
    assert (options.global_step, options.switches_first, options.genetic_every) == ("ei", False, 4)
    assert options.pow2_share == 0.75
    assert options.describe() == "pow2_share=0.75,global_step=ei,switches_first=False,genetic_every=4"
    assert SearchOptions.parse(options.describe()) == options
    for bad in (
        "nope=1",
        "genetic_every=x",
        "switches_first=maybe",
        "switch_scope=-1",
        "switch_context=other",
        "switch_pairs=both",
        "global_step=lcb",
        "genetic_every",
    ):
        with pytest.raises(UsageError):
            SearchOptions.parse(bad)


DAMAGE = [
    "UPDATE autotune_trials SET config = '{not json' WHERE id = 3",
    "UPDATE autotune_trials SET time_ms = 'abc' WHERE id = 4",
    "UPDATE autotune_trials SET problem_id = 99 WHERE id = 5",
    "UPDATE autotune_trials SET created_at = 'junk' WHERE id = 6",
    "UPDATE autotune_runs SET started_at = 'junk'",
    "UPDATE autotune_best SET config = '{not json' WHERE problem_id = 1",
    "UPDATE autotune_problems SET key = '{bad' WHERE id = 2",
]


def test_damaged_rows_break_no_command(tmp_path):
    """Rows edited by hand or damaged (config not JSON, a time that is text, a dangling
    problem id, junk timestamps, an unreadable problem key) are shown as they are or
    left out: no command that reads them fails, and a search of another width runs."""
    path = tmp_path / "tune.db"
    cli_json("search", *SMALL, "-f", "3,5", "--trials", "4", "--sampler", "random", "--db", db_url(path))
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA foreign_keys = OFF")
        for statement in DAMAGE:
            assert connection.execute(statement).rowcount >= 1, statement
    for command in (["best"], ["history"], ["show", "1"], ["best", "-d", "0", "-f", "3"]):
        for as_json in ([], ["--json"]):
            result = run_cli(*command, *as_json, "--db", db_url(path))
            assert result.returncode == 0, (command, result.stderr)
            assert "internal error" not in result.stderr
    shown = cli_json("show", "1", "--db", db_url(path))["trials"]
    damaged = {t["trial_id"]: t for t in shown}
    assert damaged[3]["config"] == "{not json" and damaged[4]["time_ms"] is None
    assert damaged[5]["problem"] == "?"
    again = run_cli("search", *SMALL, "-f", "7", "--trials", "2", "--db", db_url(path))
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("sampler", ["random", "gp"])
def test_a_point_several_knobs_from_any_valid_one_is_repaired(sampler):
    """A CPU layout proposed on a GPU breaks rules that only changing several knobs at
    once mends; told how many rules a point breaks, the repair always finds a valid one
    (a random walk gave up on 35 of 200 seeds, and ended a real GPU search at 17 trials)."""
    space = CONV2D.space
    problem = {"filter_width": 3}
    far = {"x_vector": 16, "work_x": 64, "vector": 4, "image_vector": 4, "cache_local": True}
    far["filter_mode"] = "arg"
    for seed in range(60):
        search = Search(
            space,
            sampler,
            seed,
            valid=lambda c: not space.violations(c, problem, GPU_LIMITS),
            violations=lambda c: len(space.violations(c, problem, GPU_LIMITS)),
        )
        repaired = search._repair(search._point(search.encode(space.complete(far))))
        assert repaired is not None, f"seed {seed}"
        assert space.violations(search.decode(search._params(repaired)), problem, GPU_LIMITS) == []


def test_a_gpu_separable_search_with_compiles_ahead_runs_its_whole_budget():
    """On a GPU few points of the separable space are valid (1 in 400 when this was written,
    4 in 20,000 at F = 9 with today's knobs: bench/repair_rare_points.py), and the points breaking
    the fewest rules form plateaus (the streaming form needs `x_vector`, which the device
    rules out): with 16 points in flight and a start point drawn 100 times, repairs gave
    up and a real H200 search ended F = 9 after 5 trials. Each width must get its 70."""
    from autotune.families.separable import SEPARABLE

    space = SEPARABLE.space
    for width in (9, 33):
        problem = {"filter_width": width, "rank": 1}
        search = Search(
            space,
            "gp",
            width,
            valid=lambda c, p=problem: not space.violations(c, p, GPU_LIMITS),
            violations=lambda c, p=problem: len(space.violations(c, p, GPU_LIMITS)),
        )
        times = random.Random(width)
        pending: list = []
        told = 0
        while told < 70:
            while len(pending) < 16 and told + len(pending) < 70:
                asked = search.ask()
                assert asked is not None, f"F={width}: the search ended after {told} trials"
                pending.append(asked)
            trial, config = pending.pop(0)
            assert space.violations(config, problem, GPU_LIMITS) == []
            search.tell(trial, times.uniform(0.05, 0.2))
            told += 1


# A space where only the points next to one are valid: steps from a far point and random
# draws (1 valid point in 10^8) both miss; the neighbours of a valid point do not.
NEEDLE_KNOBS = [f"k{i}" for i in range(12)]
NEEDLE = {"knobs": {name: {"values": list(range(5))} for name in NEEDLE_KNOBS}}


def _next_to_zero(config):
    return sum(config[name] != 0 for name in NEEDLE_KNOBS) <= 1


def test_a_repair_where_valid_points_are_too_rare_to_draw_takes_a_known_ones_neighbour():
    """At F = 33, rank 2 the separable space has 1 valid point in 20,000 on the H200, and
    a real search there ended after 8 of 30 trials: a repair's steps and draws found
    nothing. With a valid point in flight or measured, the repair takes its nearest free
    neighbour."""
    space = SearchSpace.from_dict(NEEDLE)
    far = {name: 4 for name in NEEDLE_KNOBS}
    for seed in range(1):  # each failing repair walks every step and draw: seconds
        alone = Search(space, "random", seed, valid=_next_to_zero)
        assert alone._repair(alone._point(alone.encode(far))) is None  # nothing known: nothing found
        search = Search(space, "random", seed, valid=_next_to_zero)
        search.enqueue({name: 0 for name in NEEDLE_KNOBS})
        _, centre = search.ask()  # in flight
        repaired = search._repair(search._point(search.encode(far)))
        assert repaired is not None
        config = search.decode(search._params(repaired))
        assert _next_to_zero(config) and config != centre
        assert sum(v == 4 for v in config.values()) == 1  # the neighbour nearest the far point
        trial, _ = search.ask()
        search.tell(trial, 1.0)
        assert all(_next_to_zero(search.ask()[1]) for _ in range(5))


def test_a_shared_search_takes_a_known_points_neighbour_where_valid_points_are_rare():
    import optuna

    from autotune.store import config_key
    from autotune.tune.shared import SharedSearch

    space = SearchSpace.from_dict(NEEDLE)
    search = SharedSearch(
        None,  # type: ignore[arg-type] - a repair reads no table
        optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)),  # seeds the repair's draws
        space,
        _next_to_zero,
        budget=None,
        seed=0,
    )
    far = {name: 4 for name in NEEDLE_KNOBS}
    assert search._repair(far, held=set()) is None
    centre = {name: 0 for name in NEEDLE_KNOBS}
    repaired = search._repair(far, held={config_key(centre)}, known=[centre])
    assert repaired is not None and _next_to_zero(repaired) and repaired != centre


def test_a_shared_search_asks_on_past_a_proposal_no_step_or_draw_can_mend(tmp_path):
    """Through `ask`: the points workers claimed are the known valid points a repair falls
    back on (a real SQLite store, a study every worker would share)."""
    import optuna

    from autotune.store import Store
    from autotune.tune.shared import SharedSearch

    space = SearchSpace.from_dict(NEEDLE)
    centre = {name: 0 for name in NEEDLE_KNOBS}
    store = Store(f"sqlite:///{tmp_path / 'shared.db'}")
    try:
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        search = SharedSearch(store, study, space, _next_to_zero, budget=None, seed=0)
        search.enqueue(centre)
        assert search.ask()[1] == centre  # claimed: a worker measures it
        for _ in range(3):  # random proposals, none valid: each repaired next to a claimed point
            asked = search.ask()
            assert asked is not None, "the shared search gave up"
            assert _next_to_zero(asked[1]) and asked[1] != centre
    finally:
        store.close()


def test_a_shared_search_repairs_the_streaming_form_on_a_gpu():
    """The shared search's repair ends as the single one's does: a CPU-only point of the
    separable space (the streaming form) is mended into a valid GPU point."""
    import optuna

    from autotune.families.separable import SEPARABLE
    from autotune.tune.shared import SharedSearch

    space = SEPARABLE.space
    problem = {"filter_width": 9, "rank": 1}
    cpu_only = space.complete({"stream_rows": 256, "x_vector": 16, "work_x": 64, "local_x": 1, "local_y": 1})
    for seed in range(10):
        search = SharedSearch(
            None,  # type: ignore[arg-type] - a repair reads no table
            optuna.create_study(),
            space,
            lambda c: not space.violations(c, problem, GPU_LIMITS),
            budget=None,
            seed=seed,
            violations=lambda c: len(space.violations(c, problem, GPU_LIMITS)),
        )
        repaired = search._repair(cpu_only, held=set())
        assert repaired is not None, f"seed {seed}"
        assert space.violations(repaired, problem, GPU_LIMITS) == []
