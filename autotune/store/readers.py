"""Read-only databases kept open for `convolve()`, `plan()` and `Convolver`, and the
cheap check that says whether a database changed since an answer was read from it.

Opening a database read-only checks its schema and reading the best rows takes a few
queries (8.5 ms on SQLite on the 2-core CPU, `bench/convolve_calls.py --repeated`); a
process that convolves many images would pay that on every call. So the stores are
kept, one per URL (the few most recently used), and `generation(url)` answers in one
aggregate query on a pooled connection (66 µs there) with a value that changes
whenever a best kernel or a trial is added or replaced. Callers that cache
what they read (the plan cache) compare generations instead of reading again.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from autotune.store.engine import default_url, failure, sqlite_file

KEPT = 4  # databases kept open per process, least recently used closed first

# Rows are only added or replaced (never deleted) by autotune, and a replaced best row
# gets a new `updated_at`: the count and the newest time of the best rows and the
# newest trial id change with every write a lookup could see.
GENERATION_QUERY = (
    "SELECT (SELECT count(*) FROM autotune_best), (SELECT max(updated_at) FROM autotune_best), "
    "(SELECT max(id) FROM autotune_trials)"
)
NO_DATABASE = ("no database",)

_lock = threading.RLock()
_stores: OrderedDict[str, tuple[Any, tuple[Any, ...] | None]] = OrderedDict()


def resolved(url: str | None) -> str:
    """The URL a call reads: the given one, else `AUTOTUNE_DB`, else the default file."""
    return url or default_url()


@functools.lru_cache(maxsize=64)
def _sqlite_file(url: str) -> Path | None:
    return sqlite_file(url)  # parsing a URL costs more than the generation query


def _absent(url: str) -> bool:
    """No database to read: an SQLite file not there yet (never created by reading) or
    an in-memory one (it starts empty)."""
    path = _sqlite_file(url)
    if path is not None:
        return not path.exists()
    return url.startswith("sqlite:")


def _file_state(path: Path | None) -> tuple[Any, ...] | None:
    """What changes when an SQLite file (or its write-ahead log) is written."""
    if path is None:
        return None
    state: list[Any] = []
    for part in (path, Path(f"{path}-wal")):
        try:
            status = part.stat()
        except OSError:
            state.append(None)
        else:
            state.append((status.st_ino, status.st_size, status.st_mtime_ns))
    return tuple(state)


def store(url: str) -> Any | None:
    """The kept read-only Store for `url`; None when there is no database. A store whose
    file was replaced is reopened; so is an in-memory upgraded copy of an older schema
    once its file changes (a writer upgrades the file when it writes)."""
    from autotune.store import SCHEMA_HEAD, Store

    with _lock:
        if _absent(url):
            _close(url)
            return None
        kept = _stores.get(url)
        if kept is not None:
            opened, state = kept
            stale = opened._file is not None and opened._identity() != opened._file
            copy = opened.schema_found not in (None, SCHEMA_HEAD)
            if stale or (copy and _file_state(_sqlite_file(url)) != state):
                _close(url)
                kept = None
        if kept is None:
            state = _file_state(_sqlite_file(url))  # before opening: a write meanwhile reopens it
            _stores[url] = (Store(url, read_only=True), state)
            while len(_stores) > KEPT:
                _close(next(iter(_stores)))
        _stores.move_to_end(url)
        return _stores[url][0]


def _close(url: str) -> None:
    kept = _stores.pop(url, None)
    if kept is not None:
        kept[0].close()


def close_all() -> None:
    """Close every kept database connection."""
    with _lock:
        for url in list(_stores):
            _close(url)


def generation(url: str) -> tuple[Any, ...]:
    """A value equal for two calls only if no best kernel or trial was written in between
    (for a database of an older schema, read through an upgraded copy: the file's state)."""
    from autotune.store import SCHEMA_HEAD

    with _lock:
        opened = store(url)
        if opened is None:
            return NO_DATABASE
        if opened.schema_found not in (None, SCHEMA_HEAD):
            return ("file", _stores[url][1])
        raw = opened.engine.raw_connection()  # no ORM session: this runs on every call
        try:
            cursor = raw.cursor()
            cursor.execute(GENERATION_QUERY)
            row = cursor.fetchone()
            cursor.close()
        except opened.engine.dialect.loaded_dbapi.Error as exc:
            raise failure(url, exc, "read") from None
        finally:
            raw.close()
        return ("rows", *row)


def best_rows(url: str) -> list[Any]:
    """`Store.best()` of the kept store; none without a database."""
    with _lock:
        opened = store(url)
        return [] if opened is None else opened.best()


def trials(url: str, device_id: int, problem_id: int) -> list[Any]:
    """`Store.trials()` for one device and problem, from the kept store."""
    with _lock:
        opened = store(url)
        return [] if opened is None else opened.trials(device_id=device_id, problem_id=problem_id)
