"""The same schema upgrade on a real PostgreSQL server (`.ci/run` starts one; see
checks/postgres.sh): PostgreSQL alters tables in place where SQLite rebuilds them.

AUTOTUNE_TEST_POSTGRES names a server URL whose user may create databases; each test
makes a database of its own. Without a server the test fails: it does not skip."""

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from autotune.store import SCHEMA_HEAD, Store
from tests.conftest import ROOT, cli_json, run_cli
from tests.test_studies import listed_studies

SERVER = os.environ.get("AUTOTUNE_TEST_POSTGRES", "postgresql+psycopg://autotune:autotune@localhost/autotune")
SECOND = Path(__file__).parent / "fixtures" / "schema_0002.db"
TABLES = ("autotune_devices", "autotune_problems", "autotune_runs", "autotune_trials", "autotune_best")


@pytest.fixture
def database():
    """A new, empty PostgreSQL database; dropped afterwards."""
    name = f"autotune_test_{uuid.uuid4().hex[:12]}"
    server = sa.create_engine(SERVER, isolation_level="AUTOCOMMIT")
    try:
        with server.connect() as connection:
            connection.exec_driver_sql(f"CREATE DATABASE {name}")
    except sa.exc.OperationalError as exc:
        pytest.fail(f"no PostgreSQL server at {SERVER} (run checks/postgres.sh): {exc.orig}")
    url = sa.make_url(SERVER).set(database=name).render_as_string(hide_password=False)
    yield url
    server.dispose()
    drop_database(name, missing_ok=True)


def drop_database(name: str, missing_ok: bool = False) -> None:
    """Drop a test database and end its sessions.

    `WITH (FORCE)` refuses while an autovacuum worker is in the database (a role without
    superuser may not signal it, since PostgreSQL's fix for CVE-2023-5870); the worker
    finishes in moments on these small databases, so the drop is tried again."""
    server = sa.create_engine(SERVER, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    exists = "IF EXISTS " if missing_ok else ""
    deadline = time.time() + 60
    try:
        while True:
            try:
                with server.connect() as connection:
                    connection.exec_driver_sql(f"DROP DATABASE {exists}{name} WITH (FORCE)")
                return
            except sa.exc.ProgrammingError as exc:
                if exc.orig is None or exc.orig.sqlstate != "42501" or time.time() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        server.dispose()


def _at_schema_0002(url):
    """The fixture's rows in a PostgreSQL database at schema 0002, as release 0.1.0 left it."""
    from alembic import command
    from alembic.config import Config

    from autotune.resources import resource_path

    engine = sa.create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(resource_path("db", "env.py").parent))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0002")
    with sqlite3.connect(SECOND) as source, engine.begin() as target:
        for table in TABLES:
            cursor = source.execute(f"SELECT * FROM {table} ORDER BY 1")
            columns = [c[0] for c in cursor.description]
            rows = [dict(zip(columns, row, strict=True)) for row in cursor]
            target.execute(sa.table(table, *map(sa.column, columns)).insert(), rows)
        for table in ("autotune_devices", "autotune_problems", "autotune_runs", "autotune_trials"):
            target.exec_driver_sql(f"SELECT setval('{table}_id_seq', (SELECT MAX(id) FROM {table}))")
    engine.dispose()


def test_schema_0002_upgrades_on_postgresql_as_on_sqlite(database, tmp_path):
    _at_schema_0002(database)
    # Commands that read never upgrade: on PostgreSQL (no copy in memory) they say how to.
    for command in (("best",), ("history",), ("show", "1")):
        result = run_cli(*command, "--db", database)
        assert result.returncode == 2 and "autotune upgrade" in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert cli_json("upgrade", "--db", database) == {"from_schema": "0002", "schema": SCHEMA_HEAD}
    engine = sa.create_engine(database)
    with engine.connect() as connection:
        problems = connection.execute(
            sa.text("SELECT id, family, key FROM autotune_problems ORDER BY id")
        ).all()
        runs = connection.execute(sa.text("SELECT id, family, problems FROM autotune_runs ORDER BY id")).all()
        columns = {c["name"] for c in sa.inspect(connection).get_columns("autotune_problems")}
        unique = sa.inspect(connection).get_unique_constraints("autotune_problems")
    engine.dispose()
    with sqlite3.connect(SECOND) as source:
        old_problems = source.execute(
            "SELECT id, filter_width, out_width, out_height, dtype FROM autotune_problems"
        )
        expected = [
            (i, "conv2d", {"filter_width": f, "out_width": w, "out_height": h, "dtype": d})
            for i, f, w, h, d in old_problems
        ]
    assert [(i, family, json.loads(key)) for i, family, key in problems] == expected
    assert columns == {"id", "family", "key"}
    assert [u["column_names"] for u in unique] == [["family", "key"]]
    assert [(i, family, [k["filter_width"] for k in json.loads(keys)]) for i, family, keys in runs] == [
        (1, "conv2d", [3, 5, 7]),
        (2, "conv2d", [5]),
    ]
    # The CLI answers from PostgreSQL exactly what it answers from the SQLite upgrade.
    sqlite_copy = tmp_path / "copy.db"
    sqlite_copy.write_bytes(SECOND.read_bytes())
    for command in (("best",), ("history",), ("show", "1")):
        on_postgres = cli_json(*command, "--db", database)
        on_sqlite = cli_json(*command, "--db", f"sqlite:///{sqlite_copy}")
        if command == ("history",):
            for run in (*on_postgres["runs"], *on_sqlite["runs"]):
                run.pop("finished_at"), run.pop("started_at")
        assert on_postgres == on_sqlite, command
    # and new problems get new ids
    store = Store(database)
    assert store.problem_id("conv2d", {"filter_width": 9}) == len(expected) + 1
    store.close()


def open_at_once(url: str, processes: int = 8) -> list[subprocess.CompletedProcess]:
    """`processes` processes that open the database at `url` at the same moment (each
    imports first, then waits for a shared start time), as many searches starting
    together on a new database do."""
    start = time.time() + 6
    code = (
        "import sys, time\n"
        "from autotune.store import Store\n"
        f"time.sleep(max(0.0, {start} - time.time()))\n"
        f"Store({url!r}).close()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    running = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    done = []
    for process in running:
        _, err = process.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, "", err))
    return done


def test_eight_processes_create_a_fresh_database_at_once(database, tmp_path):
    """The first migration of a new database is serialised (PostgreSQL: an advisory lock;
    SQLite: the write lock): every opener succeeds and the schema is made once."""
    for url in (database, f"sqlite:///{tmp_path / 'fresh.db'}"):
        results = open_at_once(url)
        assert [r.returncode for r in results] == [0] * len(results), [r.stderr[-300:] for r in results]
        engine = sa.create_engine(url)
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT version_num FROM autotune_alembic_version")).all() == [
                (SCHEMA_HEAD,)
            ]
            assert set(TABLES) <= set(sa.inspect(connection).get_table_names())
        engine.dispose()
        assert Store(url).schema_found == SCHEMA_HEAD


def _one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: ") and "Traceback" not in result.stderr
    return lines[0]


def test_database_failures_exit_1_and_never_print_the_password(database, tmp_path):
    secret = "Wr0ngSecret"
    wrong = sa.make_url(database).set(password=secret).render_as_string(hide_password=False)
    no_server = sa.make_url(database).set(password=secret, port=1).render_as_string(hide_password=False)
    commands = (
        ["search", "-d", "0", "-s", "40x24", "-f", "3", "--trials", "1"],
        ["best"],
        ["history"],
        ["show", "1"],
        ["upgrade"],
        ["export", "-d", "0", "--out", str(tmp_path / "out")],
    )
    for url, says in ((wrong, "password authentication failed"), (no_server, "port 1 failed")):
        for command in commands:
            result = run_cli(*command, "--db", url)
            assert result.returncode == 1, (command, result.stderr)
            line = _one_line(result)
            assert secret not in result.stderr + result.stdout and ":***@" in line and says in line, line
    # a URL that does not parse is bad input (exit 2), masked all the same
    result = run_cli("best", "--db", f"postgresql+psycopg://autotune:{secret}@localhost:notaport/x")
    assert result.returncode == 2 and secret not in result.stderr and ":***@" in _one_line(result)
    assert not (tmp_path / "out").exists()


def test_database_lost_mid_search_is_one_line_exit_1_without_the_password(database):
    process = subprocess.Popen(
        [sys.executable, "-m", "autotune", "search", "-d", "0", "-s", "40x24", "-f", "3"]
        + ["--trials", "300", "--sampler", "random", "--db", database],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    engine = sa.create_engine(database, poolclass=sa.pool.NullPool)
    deadline = time.time() + 120
    while time.time() < deadline:
        with contextlib.suppress(sa.exc.DBAPIError), engine.connect() as connection:
            if connection.execute(sa.text("SELECT COUNT(*) FROM autotune_trials")).scalar() >= 3:
                break
        time.sleep(0.3)
    engine.dispose()
    drop_database(sa.make_url(database).database)  # ends every session of the database
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1, err
    lines = [line for line in err.splitlines() if line.startswith("autotune:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert ":autotune@" not in err and ":***@" in lines[0], err


def test_two_searches_at_once_on_a_fresh_database_each_an_optuna_study(database):
    """Two searches (F = 3 and F = 4) start together on a new PostgreSQL database: both
    create what they need (our schema, Optuna's tables) and finish; `optuna studies`
    lists each width's study with every point measured."""
    from tests.test_studies import MEASURED, check_studies

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    searches = [
        subprocess.Popen(
            [sys.executable, "-m", "autotune", "search", "-d", "0", "-s", "40x24", "-f", width]
            + ["--trials", "6", "--sampler", "random", "--db", database],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for width in ("3", "4")
    ]
    for search in searches:
        _, err = search.communicate(timeout=300)
        assert search.returncode == 0, err
    engine = sa.create_engine(database)
    with engine.connect() as connection:
        rows = [tuple(r) for r in connection.execute(sa.text(MEASURED))]
    engine.dispose()
    check_studies(database, rows, (3, 4))


WORKER = """
import sys
from autotune.devices import device_info
from autotune.families.landscape import LandscapeEvaluator, LandscapeFamily, LandscapeProblem
from autotune.replay import load
from autotune.store import Store
from autotune.tune import Budget, Tuner

url, landscape, trials, shared = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "shared"
sampler = sys.argv[5]
family = LandscapeFamily(load(landscape))
evaluator = LandscapeEvaluator(family, device_info(0))
store = Store(url)
tuner = Tuner(store, 0, evaluator.device, family, [LandscapeProblem("bowl")], sampler=sampler,
              budget=Budget(trials=trials), evaluator=evaluator, shared=shared)
(result,) = tuner.run()
print(result.best_ms, result.trials)
"""


def _workers(url: str, landscape, trials: int, count: int, mode: str, sampler: str = "tpe") -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", WORKER, url, str(landscape), str(trials), mode, sampler]
    running = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    running += [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(count - 1)
    ]
    outputs = []
    for process in running:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-2000:]
        outputs.append(out)
    return outputs


def _measured_points(url: str) -> list[tuple[str, int]]:
    """Each point measured (first measurements, not cached answers, re-timings or points
    refused before compiling) and how many times."""
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(
            sa.text(
                "SELECT config_key, COUNT(*) FROM autotune_trials WHERE origin NOT IN ('cached', 'retime') "
                "AND status != 'invalid' GROUP BY config_key"
            )
        ).all()
    engine.dispose()
    return [tuple(row) for row in rows]


@pytest.mark.parametrize("sampler", ["tpe", "gp"])
def test_four_workers_share_one_search_and_measure_no_point_twice(database, tmp_path, sampler):
    """Four processes share the search of one (device, problem) of a replayed landscape
    through its Optuna study: no point measured twice, the budget counts all of them,
    and the best is the one process's best for the same number of trials."""
    from autotune.replay import load
    from tests.test_replay import synthetic

    landscape = synthetic(tmp_path / "bowl.json.gz")
    optimum = load(landscape).optimum
    budget = 120
    _workers(database, landscape, budget, 4, "shared", sampler)
    keys = _measured_points(database)
    engine = sa.create_engine(database)
    with engine.connect() as connection:
        best = connection.execute(sa.text("SELECT time_ms FROM autotune_best")).scalar()
        runs = connection.execute(sa.text("SELECT COUNT(*) FROM autotune_runs")).scalar()
    engine.dispose()
    assert runs == 4 and all(count == 1 for _, count in keys), [k for k in keys if k[1] > 1]
    assert len(keys) == budget  # claimed under the study's lock: the budget, all workers together
    (one,) = _workers(f"sqlite:///{tmp_path / 'one.db'}", landscape, budget, 1, "alone", sampler)
    assert best == float(one.split()[0]) == optimum


def test_shared_search_from_the_command_line(database, tmp_path):
    """Two `autotune search --shared` processes on one device of this host: one search,
    the budget for both together, no point twice; bad combinations are one line, exit 2."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "autotune", "search", "-d", "0", "-s", "40x24", "-f", "3", "--trials", "12"]
    workers = [
        subprocess.Popen(
            [*argv, "--shared", "--db", database], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
    keys = _measured_points(database)
    assert len(keys) == 12 and all(count == 1 for _, count in keys), keys
    (study,) = [s for s in listed_studies(database) if " F=3 " in s["name"]]
    for args, says in (
        (["--shared", "--db", f"sqlite:///{tmp_path / 'x.db'}"], "--shared needs a PostgreSQL database"),
        (["--shared", "--fresh", "--db", database], "--fresh does not go with it"),
        (["--shared", "--sampler", "cmaes", "--db", database], "gp, tpe or random, not 'cmaes'"),
    ):
        result = run_cli(*argv[3:], *args)
        assert result.returncode == 2 and says in _one_line(result), result.stderr
    assert not (tmp_path / "x.db").exists()


DYING_WORKER = """
import os, signal, sys
from autotune.devices import device_info
from autotune.families.landscape import LandscapeEvaluator, LandscapeFamily, LandscapeProblem
from autotune.replay import load
from autotune.store import Store
from autotune.tune import Budget, Tuner

url, landscape, trials, dies_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


class Dying(LandscapeEvaluator):
    def measure(self, *args, **kwargs):
        if self.measured + 1 == dies_at:  # killed while it holds the point it claimed
            os.kill(os.getpid(), signal.SIGKILL)
        return super().measure(*args, **kwargs)


family = LandscapeFamily(load(landscape))
evaluator = Dying(family, device_info(0))
Tuner(Store(url), 0, evaluator.device, family, [LandscapeProblem("bowl")], sampler="gp",
      budget=Budget(trials=trials), evaluator=evaluator, shared=True).run()
"""


def _study_trials(url: str) -> list[tuple[str, dict]]:
    """Each trial of the database's Optuna studies: its state and user attributes (none
    before Optuna's tables exist)."""
    engine = sa.create_engine(url)
    if not sa.inspect(engine).has_table("trial_user_attributes"):
        engine.dispose()
        return []
    with engine.connect() as connection:
        rows = connection.execute(
            sa.text("SELECT trial_id, state FROM trials WHERE study_id IN (SELECT study_id FROM studies)")
        ).all()
        attributes = connection.execute(
            sa.text("SELECT trial_id, key, value_json FROM trial_user_attributes")
        ).all()
    engine.dispose()
    by_trial: dict[int, dict] = {}
    for trial_id, key, value in attributes:
        by_trial.setdefault(trial_id, {})[key] = json.loads(value)
    return [(state, by_trial.get(trial_id, {})) for trial_id, state in rows]


def test_a_killed_workers_claim_is_given_back_and_the_budget_still_measured(database, tmp_path):
    """A shared worker killed (SIGKILL) while it measures the point it claimed: the next
    worker to ask gives that claim back (its run's process is gone), the point holds
    nothing and counts in no budget, and the workers together still measure the budget."""
    from tests.test_replay import synthetic

    landscape = synthetic(tmp_path / "bowl.json.gz")
    budget, dies_at = 16, 6
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    dying = subprocess.run(
        [sys.executable, "-c", DYING_WORKER, database, str(landscape), str(budget), str(dies_at)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert dying.returncode == -9, dying.stderr[-2000:]
    (left,) = [attrs for state, attrs in _study_trials(database) if state == "RUNNING"]
    assert left.get("claimed") and left.get("claimed_by_run"), left
    _workers(database, landscape, budget, 1, "shared", "gp")
    trials = _study_trials(database)
    assert not [attrs for state, attrs in trials if state == "RUNNING"]
    given_back = [attrs for state, attrs in trials if attrs.get("skipped") == "its worker stopped"]
    assert [attrs["claimed_by_run"] for attrs in given_back] == [left["claimed_by_run"]]
    measured = _measured_points(database)  # the killed worker's first five, then the second worker's
    assert len(measured) == budget and all(count == 1 for _, count in measured)


def test_a_shared_search_stopped_with_ctrl_c_gives_back_the_points_it_asked_ahead(database, tmp_path):
    """A shared search that compiles ahead, stopped with Ctrl-C, has points asked and not
    measured: it gives them back as it stops (no trial of the study is left RUNNING,
    none counts in the budget)."""
    argv = [sys.executable, "-m", "autotune", "search", "-d", "0", "-s", "40x24", "-f", "5", "--shared"]
    with open(tmp_path / "stderr.txt", "w+") as stderr:
        search = subprocess.Popen(
            [*argv, "--db", database, "--trials", "200", "--compilers", "2"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        deadline = time.monotonic() + 240
        while sum(state == "COMPLETE" for state, _ in _study_trials(database)) < 4:
            assert search.poll() is None and time.monotonic() < deadline, "the search ended early"
            time.sleep(0.2)
        search.send_signal(signal.SIGINT)
        search.wait(timeout=300)
        stderr.seek(0)
        err = stderr.read()
    assert search.returncode == 130 and "Traceback" not in err and "internal error" not in err, err
    trials = _study_trials(database)
    assert not [attrs for state, attrs in trials if state == "RUNNING"], trials
    released = [attrs for state, attrs in trials if attrs.get("skipped") == "released"]
    assert released and all(attrs.get("claimed") for attrs in released), trials


def test_searches_that_record_one_best_at_once_all_succeed(database):
    """Workers of a shared search each record the best kernel when they finish a problem,
    and may do so at the same moment: none fails on the other's new row (a read of the
    row, then an insert, raced: 'duplicate key ... autotune_best_pkey')."""
    from autotune.devices import device_info
    from autotune.families.conv2d import Conv2DProblem

    workers = 4
    stores = [Store(database) for _ in range(workers)]
    device_id = stores[0].device_id(device_info(0))
    run = stores[0].start_run(
        device_id=device_id, key="race", family="conv2d", problems="[]", sampler="random", seed=0,
        trials_budget=1, time_budget_s=None, tool_version="test",
    )  # fmt: skip
    rounds = 15
    problem_ids = [stores[0].problem_id("conv2d", Conv2DProblem(3, 16 + n, 16).key()) for n in range(rounds)]
    trials = [
        [
            stores[0].add_trial(
                run_id=run.id,
                device_id=device_id,
                problem_id=problem_id,
                number=w,
                origin="sampler",
                config="{}",
                config_key=f"k{w}",
                status="ok",
                time_ms=1.0 + w,
            )  # fmt: skip
            for w in range(workers)
        ]
        for problem_id in problem_ids
    ]
    barrier = threading.Barrier(workers)
    failures: list[BaseException] = []

    def record(worker: int) -> None:
        for problem_id, candidates in zip(problem_ids, trials, strict=True):
            barrier.wait()
            try:
                stores[worker].set_best(device_id, problem_id, candidates[worker], candidates[worker].time_ms)
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

    threads = [threading.Thread(target=record, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[0]
    rows = stores[0].best(device_id)
    for store in stores:
        store.close()
    assert sorted(row.problem_id for row, _, _ in rows) == sorted(problem_ids)
    for row, _, _ in rows:  # one of the workers' trials, whole
        trial = next(t for t in trials[problem_ids.index(row.problem_id)] if t.id == row.trial_id)
        assert row.time_ms == trial.time_ms
