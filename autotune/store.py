"""The one place results are persisted: devices, problems, runs, every trial, and the
best kernel per (device, problem), in any SQLAlchemy database (SQLite by default).

Every finished trial is committed on its own, so a killed process loses nothing it
reported. Table names carry an `autotune_` prefix and the migration version table is
`autotune_alembic_version`, so Optuna's tables (`studies`, `trials`, `alembic_version`)
can share the database without clashes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from autotune.errors import AutotuneError, UsageError

VERSION_TABLE = "autotune_alembic_version"
SCHEMA_HEAD = "0002"


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def config_key(config: dict[str, Any]) -> str:
    """Canonical text of a config: equal configs, equal keys."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


class Base(DeclarativeBase):
    pass


class Device(Base):
    __tablename__ = "autotune_devices"
    __table_args__ = (sa.UniqueConstraint("platform", "name", "vendor", "driver"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    platform: Mapped[str] = mapped_column(sa.String(200))
    name: Mapped[str] = mapped_column(sa.String(200))
    vendor: Mapped[str] = mapped_column(sa.String(200))
    driver: Mapped[str] = mapped_column(sa.String(200))
    type: Mapped[str] = mapped_column(sa.String(40))
    info: Mapped[str] = mapped_column(sa.Text)  # JSON of DeviceInfo


class Problem(Base):
    __tablename__ = "autotune_problems"
    __table_args__ = (sa.UniqueConstraint("filter_width", "out_width", "out_height", "dtype"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    filter_width: Mapped[int]
    out_width: Mapped[int]
    out_height: Mapped[int]
    dtype: Mapped[str] = mapped_column(sa.String(20), default="float32")


class Run(Base):
    __tablename__ = "autotune_runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    device_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_devices.id"))
    key: Mapped[str] = mapped_column(sa.Text, index=True)  # what makes two commands "the same search"
    filter_widths: Mapped[str] = mapped_column(sa.String(400))
    out_width: Mapped[int]
    out_height: Mapped[int]
    sampler: Mapped[str] = mapped_column(sa.String(40))
    seed: Mapped[int]
    trials_budget: Mapped[int | None]
    time_budget_s: Mapped[float | None]
    status: Mapped[str] = mapped_column(sa.String(20))  # running, finished, interrupted, failed
    started_at: Mapped[dt.datetime]
    finished_at: Mapped[dt.datetime | None]
    tool_version: Mapped[str] = mapped_column(sa.String(40))


class Trial(Base):
    __tablename__ = "autotune_trials"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_runs.id"), index=True)
    device_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_devices.id"))
    problem_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_problems.id"))
    number: Mapped[int]  # order within the run and problem
    origin: Mapped[str] = mapped_column(sa.String(20))  # preset, warm, sampler, cached, retime
    config: Mapped[str] = mapped_column(sa.Text)
    config_key: Mapped[str] = mapped_column(sa.Text)
    status: Mapped[str] = mapped_column(sa.String(20))
    time_ms: Mapped[float | None]
    min_ms: Mapped[float | None]
    max_ms: Mapped[float | None]
    runs: Mapped[int] = mapped_column(default=0)
    compile_ms: Mapped[float | None]
    max_error: Mapped[float | None]
    error: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[dt.datetime]
    # KernelVariant.fingerprint of what was measured; None for invalid points and for
    # rows written before schema 0002 (never reused as measurements of today's kernels)
    kernel_sha: Mapped[str | None] = mapped_column(sa.String(64))
    __table_args__ = (sa.Index("ix_autotune_trials_lookup", "device_id", "problem_id", "config_key"),)


class Best(Base):
    __tablename__ = "autotune_best"
    device_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_devices.id"), primary_key=True)
    problem_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_problems.id"), primary_key=True)
    trial_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_trials.id"))
    config: Mapped[str] = mapped_column(sa.Text)
    time_ms: Mapped[float]
    updated_at: Mapped[dt.datetime]


def default_url() -> str:
    if os.environ.get("AUTOTUNE_DB"):
        return os.environ["AUTOTUNE_DB"]
    from platformdirs import user_data_dir

    return f"sqlite:///{Path(user_data_dir('autotune')) / 'autotune.db'}"


def _retry_locked(action: Any, seconds: float = 60.0) -> Any:
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


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let us issue BEGIN ourselves: IMMEDIATE takes the write lock up front, so two
        # writers wait for each other (busy_timeout) instead of failing with "locked".
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 60000")
        # Switching a new file to WAL needs a lock that SQLite does not wait for when
        # another process is creating the same file: retry instead.
        _retry_locked(lambda: cursor.execute("PRAGMA journal_mode = WAL"))
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _check_url(url: str) -> sa.URL:
    try:
        parsed = sa.make_url(url)
    except ArgumentError:
        raise UsageError(f"--db is not a database URL: {url!r} (e.g. sqlite:///tuning.db)") from None
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            path = Path(database)
            if path.exists() and path.is_dir():
                raise UsageError(f"--db points at a directory: {path}")
            if path.exists() and path.stat().st_size:
                with open(path, "rb") as f:
                    if f.read(16) != b"SQLite format 3\x00":
                        raise UsageError(f"{path} is not an SQLite database")
    return parsed


class Store:
    """Open (and create or upgrade) the database; every write is a short transaction."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_url()
        parsed = _check_url(self.url)
        if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
            path = Path(parsed.database)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"cannot create the database folder {path.parent}: {exc.strerror}") from None
            if not os.access(path.parent, os.W_OK):
                raise UsageError(f"cannot write the database folder {path.parent}")
            if path.exists() and not os.access(path, os.W_OK):
                raise UsageError(f"the database {path} is read-only")
        try:
            self.engine = sa.create_engine(parsed)
        except (NoSuchModuleError, ImportError, ArgumentError) as exc:
            raise UsageError(f"unsupported database URL {self.url!r}: {exc}") from None
        if parsed.get_backend_name() == "sqlite":
            _sqlite_pragmas(self.engine)
        try:
            _retry_locked(self._migrate)
        except (OperationalError, DatabaseError) as exc:
            raise UsageError(f"cannot use the database {self.url}: {exc.orig or exc}") from None
        self._file = self._identity()

    def _identity(self) -> tuple[Path, int, int] | None:
        """The SQLite file's (path, device, inode), to notice it vanish under us."""
        parsed = sa.make_url(self.url)
        if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
            return None
        path = Path(str(parsed.database))
        try:
            status = path.stat()
        except OSError:
            return None
        return path, status.st_dev, status.st_ino

    def _migrate(self) -> None:
        from autotune.migrations import upgrade

        upgrade(self.engine)

    @contextmanager
    def session(self) -> Iterator[Session]:
        if self._file is not None and self._identity() != self._file:
            raise AutotuneError(
                f"the database file {self._file[0]} was deleted or replaced while in use; "
                "everything finished before that was in it"
            )
        try:
            with Session(self.engine, expire_on_commit=False) as session, session.begin():
                yield session
        except (OperationalError, DatabaseError) as exc:
            raise AutotuneError(f"database error ({self.url}): {exc.orig or exc}") from None

    def close(self) -> None:
        self.engine.dispose()

    # --- writes -------------------------------------------------------------

    def device_id(self, info: Any) -> int:
        fp = info.fingerprint
        with self.session() as s:
            row = s.scalar(
                sa.select(Device).filter_by(
                    platform=fp["platform"], name=fp["name"], vendor=fp["vendor"], driver=fp["driver"]
                )
            )
            if row is None:
                row = Device(
                    platform=fp["platform"],
                    name=fp["name"],
                    vendor=fp["vendor"],
                    driver=fp["driver"],
                    type=info.type,
                    info=json.dumps(info.to_dict()),
                )
                s.add(row)
                s.flush()
            return row.id

    def problem_id(self, filter_width: int, out_width: int, out_height: int) -> int:
        with self.session() as s:
            row = s.scalar(
                sa.select(Problem).filter_by(
                    filter_width=filter_width, out_width=out_width, out_height=out_height, dtype="float32"
                )
            )
            if row is None:
                row = Problem(
                    filter_width=filter_width, out_width=out_width, out_height=out_height, dtype="float32"
                )
                s.add(row)
                s.flush()
            return row.id

    def start_run(self, **fields: Any) -> Run:
        with self.session() as s:
            run = Run(status="running", started_at=now(), finished_at=None, **fields)
            s.add(run)
            s.flush()
            return run

    def latest_run(self, device_id: int, key: str) -> Run | None:
        with self.session() as s:
            return s.scalar(
                sa.select(Run).filter_by(device_id=device_id, key=key).order_by(Run.id.desc()).limit(1)
            )

    def set_run_status(self, run_id: int, status: str) -> None:
        with self.session() as s:
            run = s.get(Run, run_id)
            assert run is not None
            run.status = status
            run.finished_at = now() if status != "running" else None

    def add_trial(self, **fields: Any) -> Trial:
        fields.setdefault("created_at", now())
        with self.session() as s:
            trial = Trial(**fields)
            s.add(trial)
            s.flush()
            return trial

    def set_best(self, device_id: int, problem_id: int, trial: Trial, time_ms: float) -> None:
        with self.session() as s:
            row = s.get(Best, (device_id, problem_id))
            if row is None:
                s.add(
                    Best(
                        device_id=device_id,
                        problem_id=problem_id,
                        trial_id=trial.id,
                        config=trial.config,
                        time_ms=time_ms,
                        updated_at=now(),
                    )
                )
            else:
                row.trial_id, row.config, row.time_ms, row.updated_at = trial.id, trial.config, time_ms, now()

    # --- reads --------------------------------------------------------------

    def trials(
        self, run_id: int | None = None, device_id: int | None = None, problem_id: int | None = None
    ) -> list[Trial]:
        query = sa.select(Trial).order_by(Trial.id)
        if run_id is not None:
            query = query.where(Trial.run_id == run_id)
        if device_id is not None:
            query = query.where(Trial.device_id == device_id)
        if problem_id is not None:
            query = query.where(Trial.problem_id == problem_id)
        with self.session() as s:
            return list(s.scalars(query))

    def measured(self, device_id: int, problem_id: int, key: str) -> Trial | None:
        """An earlier measurement of this exact point (not a re-timing)."""
        with self.session() as s:
            return s.scalar(
                sa.select(Trial)
                .filter_by(device_id=device_id, problem_id=problem_id, config_key=key)
                .where(Trial.origin != "retime", Trial.origin != "cached")
                .order_by(Trial.id)
                .limit(1)
            )

    def runs(self) -> list[tuple[Run, Device]]:
        with self.session() as s:
            return [
                (r, d)
                for r, d in s.execute(
                    sa.select(Run, Device).join(Device, Run.device_id == Device.id).order_by(Run.id)
                )
            ]

    def run(self, run_id: int) -> Run | None:
        with self.session() as s:
            return s.get(Run, run_id)

    def best(
        self, device_id: int | None = None, filter_width: int | None = None
    ) -> list[tuple[Best, Device, Problem]]:
        query = (
            sa.select(Best, Device, Problem)
            .join(Device, Best.device_id == Device.id)
            .join(Problem, Best.problem_id == Problem.id)
            .order_by(Device.id, Problem.filter_width, Problem.out_width, Problem.out_height)
        )
        if device_id is not None:
            query = query.where(Best.device_id == device_id)
        if filter_width is not None:
            query = query.where(Problem.filter_width == filter_width)
        with self.session() as s:
            return [tuple(row) for row in s.execute(query)]  # type: ignore[misc]

    def devices(self) -> list[Device]:
        with self.session() as s:
            return list(s.scalars(sa.select(Device).order_by(Device.id)))

    def problems(self) -> dict[int, Problem]:
        with self.session() as s:
            return {p.id: p for p in s.scalars(sa.select(Problem))}
