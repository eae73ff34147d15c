"""PostgreSQL advisory locks: one name, one lock, across every process and machine that
uses the database. SQLite needs none (its write lock, taken at BEGIN IMMEDIATE, already
serialises writers), so on other databases these do nothing."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

MIGRATION_LOCK = "autotune schema migration"
OPTUNA_TABLES_LOCK = "autotune optuna tables"


def lock_key(name: str) -> int:
    """A name as PostgreSQL's 64-bit advisory lock key."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def advisory_xact_lock(connection: Connection | Session, name: str) -> None:
    """Wait for the lock `name`, held until the current transaction ends (PostgreSQL
    only; a no-op elsewhere). `connection` must be inside a transaction."""
    bind = connection.get_bind() if isinstance(connection, Session) else connection
    if bind.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key(name)})


@contextmanager
def advisory_lock(engine: Engine, name: str) -> Iterator[None]:
    """Hold the lock `name` for the block, on a connection of its own (PostgreSQL only;
    a no-op elsewhere): for work done through other connections, such as Optuna's."""
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect() as connection:
        connection.execute(sa.text("SELECT pg_advisory_lock(:key)"), {"key": lock_key(name)})
        connection.commit()
        try:
            yield
        finally:
            connection.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": lock_key(name)})
            connection.commit()
