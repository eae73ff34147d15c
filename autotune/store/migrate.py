"""Bring a database to the current schema with Alembic (scripts in db/)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from autotune.errors import UsageError
from autotune.resources import resource_path
from autotune.store.locks import MIGRATION_LOCK, advisory_xact_lock
from autotune.store.models import SCHEMA_HEAD, VERSION_TABLE


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        if not sa.inspect(connection).has_table(VERSION_TABLE):
            return None
        return connection.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def _config() -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(resource_path("db", "env.py").parent))
    return config


def check_revision(revision: str | None) -> None:
    """Refuse a database written by a newer schema than this release knows."""
    if revision is None or revision == SCHEMA_HEAD:
        return
    from alembic.script import ScriptDirectory

    known = {s.revision for s in ScriptDirectory.from_config(_config()).walk_revisions()}
    if revision not in known:
        raise UsageError(
            f"the database was written by a newer autotune (schema {revision}; this one knows up to "
            f"{SCHEMA_HEAD}): upgrade autotune or use another --db"
        )


def upgrade(engine: Engine) -> None:
    revision = current_revision(engine)
    if revision == SCHEMA_HEAD:
        return
    from alembic import command

    check_revision(revision)
    config = _config()
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as connection:
        raw = connection.connection.dbapi_connection
        if sqlite:
            # Rebuilding a table that others point at: SQLite's own recipe turns foreign
            # key enforcement off around the transaction and checks every key before commit.
            raw.execute("PRAGMA foreign_keys = OFF")  # type: ignore[union-attr]
        try:
            with connection.begin():
                # Many processes may open a new database at once: one migrates, the others
                # wait here and then find it done (SQLite: BEGIN IMMEDIATE's write lock).
                advisory_xact_lock(connection, MIGRATION_LOCK)
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
                if sqlite:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise RuntimeError(f"the schema upgrade would break foreign keys: {broken[:3]}")
        finally:
            if sqlite:
                raw.execute("PRAGMA foreign_keys = ON")  # type: ignore[union-attr]
