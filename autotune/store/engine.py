"""Opening databases: URLs, the default location, SQLite's pragmas and retries, and
the read-only connections and in-memory upgraded copies that commands which only read
use."""

from __future__ import annotations

import os
import random
import re
import sqlite3
import time
import urllib.parse
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.pool import StaticPool

from autotune.errors import AutotuneError, UsageError
from autotune.store.migrate import upgrade
from autotune.store.models import VERSION_TABLE


def default_url() -> str:
    if os.environ.get("AUTOTUNE_DB"):
        return os.environ["AUTOTUNE_DB"]
    from platformdirs import user_data_dir

    return f"sqlite:///{Path(user_data_dir('autotune')) / 'autotune.db'}"


def retry_locked(action: Any, seconds: float = 60.0) -> Any:
    """Run `action`, retrying while SQLite says the database is locked."""
    deadline = time.monotonic() + seconds
    delay = 0.05
    while True:
        try:
            return action()
        except Exception as exc:  # sqlite3 or SQLAlchemy's wrapper of it
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay + random.random() * delay)
        delay = min(delay * 2, 1.0)


def sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let us issue BEGIN ourselves: IMMEDIATE takes the write lock up front, so two
        # writers wait for each other (busy_timeout) instead of failing with "locked".
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 60000")
        # Switching a new file to WAL needs a lock that SQLite does not wait for when
        # another process is creating the same file: retry instead.
        retry_locked(lambda: cursor.execute("PRAGMA journal_mode = WAL"))
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def mask_url(url: str | sa.URL) -> str:
    """A database URL as it may be printed: its password replaced by ***. Also for text
    that does not parse as a URL (`user:secret@host` is masked all the same)."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError, TypeError):
        return re.sub(r"(://[^/@:]*:)[^@]*@", r"\1***@", str(url))


def _without_password(text: str, url: str) -> str:
    """`text` (a driver's message) with the URL's password masked wherever it appears."""
    text = text.replace(url, mask_url(url))
    try:
        parsed = sa.make_url(url)
    except (ArgumentError, ValueError, TypeError):
        return " ".join(text.split())
    password = str(parsed.password or "")
    # Not shorter ones (they would mask ordinary letters), nor one that is the user name,
    # which the masked URL shows anyway (and which names tables: `autotune_devices`).
    if len(password) >= 4 and password != parsed.username:
        text = text.replace(password, "***")
    return " ".join(text.split())


def failure(url: str, exc: Exception, doing: str = "use") -> AutotuneError:
    """One line for a database error met while opening or using the database at `url`,
    with its password masked. An SQLite file that is not a database (corrupt, foreign)
    is bad input (exit 2); a database that cannot be reached or used (server down,
    wrong password, no such database, locked, disk full) is a failure at run time (1)."""
    orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    message = f"cannot {doing} the database {mask_url(url)}: {_without_password(str(orig), url)}"
    bad_file = isinstance(orig, sqlite3.DatabaseError) and not isinstance(orig, sqlite3.OperationalError)
    return UsageError(message) if bad_file else AutotuneError(message)


def parse(url: str) -> sa.URL:
    try:
        return sa.make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise UsageError(f"not a database URL: {mask_url(url)!r} (e.g. sqlite:///tuning.db)") from None


def sqlite_file(url: str) -> Path | None:
    """The file behind an SQLite URL; None for other databases and in-memory ones."""
    parsed = parse(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if not database.startswith("file:"):
        return Path(database)
    # SQLite's URI form (`sqlite:///file:PATH?uri=true`): the same file, named another way.
    location = urllib.parse.urlsplit(database)
    if location.path in ("", ":memory:") or parsed.query.get("mode") == "memory":
        return None
    return Path(urllib.parse.unquote(location.path))


def check_url(url: str) -> sa.URL:
    path = sqlite_file(url)
    if path is not None:
        if path.exists() and path.is_dir():
            raise UsageError(f"--db points at a directory: {path}")
        if path.exists() and path.stat().st_size:
            with open(path, "rb") as f:
                if f.read(16) != b"SQLite format 3\x00":
                    raise UsageError(f"{path} is not an SQLite database")
    return parse(url)


def connect_read_only(path: Path) -> sqlite3.Connection:
    """An SQLite connection that cannot change the database: it never creates the file
    (`mode=rw` fails on a missing one), never changes its journal mode, and
    `query_only` refuses every write. Not `mode=ro`: on a WAL database that would leave
    -wal and -shm files behind that only a writer removes."""
    connection = sqlite3.connect(
        f"file:{urllib.parse.quote(str(path.resolve()))}?mode=rw", uri=True, check_same_thread=False
    )
    connection.execute("PRAGMA query_only = ON")
    connection.execute("PRAGMA busy_timeout = 60000")
    return connection


def peek_revision(path: Path) -> str | None:
    """The schema revision of an SQLite file, read without writing anything."""
    connection = connect_read_only(path)
    try:
        tables = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (VERSION_TABLE,)
        ).fetchone()
        if tables is None:
            return None
        row = connection.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
        return row[0] if row else None
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"cannot read the database {path}: {exc}") from None
    finally:
        connection.close()


def upgraded_copy(path: Path) -> Engine:
    """The database of an older schema, copied into memory and upgraded there: reads
    answer as after an upgrade while the file stays as its release left it."""
    memory = sqlite3.connect(":memory:", check_same_thread=False)
    source = connect_read_only(path)
    try:
        source.backup(memory)
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"cannot read the database {path}: {exc}") from None
    finally:
        source.close()
    engine = sa.create_engine("sqlite://", creator=lambda: memory, poolclass=StaticPool)
    sqlite_pragmas(engine)
    upgrade(engine)
    return engine
