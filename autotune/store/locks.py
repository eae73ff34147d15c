"""PostgreSQL advisory locks: one name, one lock, across every process and machine that
uses the database. SQLite needs none (its write lock, taken at BEGIN IMMEDIATE, already
serialises writers), so on other databases these do nothing."""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

MIGRATION_LOCK = "autotune schema migration"


def lock_key(name: str) -> int:
    """A name as PostgreSQL's 64-bit advisory lock key."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def advisory_xact_lock(connection: Connection | Session, name: str) -> None:
    """Wait for the lock `name`, held until the current transaction ends (PostgreSQL
    only; a no-op elsewhere). `connection` must be inside a transaction."""
    bind = connection.get_bind() if isinstance(connection, Session) else connection
    if bind.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key(name)})
