"""The tables. Names carry an `autotune_` prefix and the migration version table is
`autotune_alembic_version`, so Optuna's tables (`studies`, `trials`, `alembic_version`)
can share the database without clashes. A problem is (family, key): the key is the
family's problem fields as JSON, in the family's field order."""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

VERSION_TABLE = "autotune_alembic_version"
SCHEMA_HEAD = "0004"


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def config_key(config: dict[str, Any]) -> str:
    """Canonical text of a config: equal configs, equal keys."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def problem_key(key: dict[str, Any]) -> str:
    """A problem's key as stored: JSON in the family's field order (not sorted), so
    rows sort the way the family lists its fields."""
    return json.dumps(key, separators=(",", ":"))


class _Lenient(TypeDecorator):
    """A column type whose unreadable stored values (a hand-edited or damaged row) read
    as None instead of failing the whole query: one bad row must not break commands
    that never needed it."""

    cache_ok = True

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        inner = dialect.type_descriptor(self.impl_instance).result_processor(dialect, coltype)

        def process(value: Any) -> Any:
            try:
                value = inner(value) if inner is not None else value
            except (ValueError, TypeError, OverflowError):
                return None
            return self.check(value)

        return process

    def check(self, value: Any) -> Any:
        return value


class Timestamp(_Lenient):
    impl = sa.DateTime
    cache_ok = True

    def check(self, value: Any) -> Any:
        return value if value is None or isinstance(value, dt.datetime) else None


class Milliseconds(_Lenient):
    """A time or error measure: a finite number, else None."""

    impl = sa.Float
    cache_ok = True

    def check(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return float(value)


class Base(DeclarativeBase):
    type_annotation_map = {dt.datetime: Timestamp, float: Milliseconds}


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

    @property
    def fingerprint(self) -> dict[str, str]:
        return {"name": self.name, "vendor": self.vendor, "driver": self.driver, "platform": self.platform}


class ProblemRow(Base):
    __tablename__ = "autotune_problems"
    __table_args__ = (sa.UniqueConstraint("family", "key", name="uq_autotune_problems_family_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    family: Mapped[str] = mapped_column(sa.String(40))
    key: Mapped[str] = mapped_column(sa.Text)

    @property
    def fields(self) -> dict[str, Any] | None:
        """The key's fields; None for a key that is not a JSON object (a damaged row)."""
        try:
            fields = json.loads(self.key)
        except (ValueError, TypeError):
            return None
        return fields if isinstance(fields, dict) else None


class Run(Base):
    __tablename__ = "autotune_runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    device_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_devices.id"))
    key: Mapped[str] = mapped_column(sa.Text, index=True)  # what makes two commands "the same search"
    family: Mapped[str] = mapped_column(sa.String(40))
    problems: Mapped[str] = mapped_column(sa.Text)  # JSON list of the problem keys, in search order
    sampler: Mapped[str] = mapped_column(sa.String(40))
    seed: Mapped[int]
    trials_budget: Mapped[int | None]
    time_budget_s: Mapped[float | None]
    status: Mapped[str] = mapped_column(sa.String(20))  # running, finished, interrupted, failed
    started_at: Mapped[dt.datetime]
    finished_at: Mapped[dt.datetime | None]
    tool_version: Mapped[str] = mapped_column(sa.String(40))
    # Who is searching it now ("host:pid") and when that process last said so: a run
    # is measured by one process at a time.
    owner: Mapped[str | None] = mapped_column(sa.String(300), nullable=True)
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)

    @property
    def problem_keys(self) -> list[dict[str, Any]]:
        return json.loads(self.problems)


class Trial(Base):
    __tablename__ = "autotune_trials"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_runs.id"), index=True)
    device_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_devices.id"))
    problem_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_problems.id"))
    number: Mapped[int]  # order within the run and problem
    origin: Mapped[str] = mapped_column(sa.String(20))  # outcomes.Origin
    config: Mapped[str] = mapped_column(sa.Text)
    config_key: Mapped[str] = mapped_column(sa.Text)
    status: Mapped[str] = mapped_column(sa.String(20))  # outcomes.Status
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
