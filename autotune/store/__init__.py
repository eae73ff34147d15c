"""The one place results are persisted: devices, problems, runs, every trial, and the
best kernel per (device, problem), in any SQLAlchemy database (SQLite by default).

Every finished trial is committed on its own, so a killed process loses nothing it
reported. The tables are in `models`; migrations (db/, run by `migrate`) bring older
databases up to date when they are opened.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session

from autotune.errors import AutotuneError, UsageError
from autotune.store.engine import (
    check_url,
    connect_read_only,
    default_url,
    failure,
    mask_url,
    peek_revision,
    retry_locked,
    sqlite_file,
    sqlite_pragmas,
    upgraded_copy,
)
from autotune.store.lease import lease_gone, lease_owner
from autotune.store.locks import advisory_xact_lock
from autotune.store.migrate import check_revision, current_revision, upgrade
from autotune.store.models import (
    SCHEMA_HEAD,
    VERSION_TABLE,
    Best,
    Device,
    ProblemRow,
    Run,
    Trial,
    config_key,
    now,
    problem_key,
)

__all__ = [
    "SCHEMA_HEAD",
    "VERSION_TABLE",
    "Best",
    "Device",
    "ProblemRow",
    "Run",
    "Store",
    "Trial",
    "config_key",
    "default_url",
    "mask_url",
    "lease_owner",
    "now",
    "sqlite_file",
    "problem_key",
]


class Store:
    """Open (and create or upgrade) the database; every write is a short transaction.

    `read_only=True` is for commands that only read: the database must exist and be an
    autotune database; it is opened read-only, never created, upgraded or switched to
    WAL. An SQLite database of an older schema is answered from an upgraded copy in
    memory, so the file stays as it is; other databases of an older schema are refused
    with the command that upgrades them.
    """

    def __init__(self, url: str | None = None, *, read_only: bool = False, must_exist: bool = False) -> None:
        self.url = url or default_url()
        self.read_only = read_only
        self.schema = SCHEMA_HEAD
        self.schema_found: str | None = None  # the schema the database had when opened
        parsed = check_url(self.url)
        path = sqlite_file(self.url)
        if read_only:
            self.engine = self._open_read_only(parsed, path)
            self._file = self._identity()
            return
        if must_exist and path is not None:
            if not path.exists():
                raise UsageError(f"no database at {path} (check --db)")
            if peek_revision(path) is None:
                raise UsageError(f"{path} is not an autotune database (it has no autotune tables)")
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"cannot create the database folder {path.parent}: {exc.strerror}") from None
            if not os.access(path.parent, os.W_OK):
                raise UsageError(f"cannot write the database folder {path.parent}")
            if path.exists() and not os.access(path, os.W_OK):
                raise UsageError(f"the database {path} is read-only")
            if path.exists() and path.stat().st_size:
                # Refuse a newer schema before anything (the WAL switch included) touches the file.
                check_revision(peek_revision(path))
        try:
            self.engine = sa.create_engine(parsed)
        except (NoSuchModuleError, ImportError, ArgumentError) as exc:
            raise UsageError(f"unsupported database URL {mask_url(self.url)!r}: {exc}") from None
        if parsed.get_backend_name() == "sqlite":
            sqlite_pragmas(self.engine)
        try:
            retry_locked(self._migrate)
        except (OperationalError, DatabaseError) as exc:
            raise failure(self.url, exc) from None
        self._file = self._identity()

    def _open_read_only(self, parsed: sa.URL, path: Path | None) -> Engine:
        if path is not None and not path.exists():
            raise UsageError(f"no database at {path} (check --db, or run `autotune search` to create one)")
        try:
            if path is not None:
                engine = sa.create_engine("sqlite://", creator=lambda: connect_read_only(path))
            else:
                engine = sa.create_engine(parsed)
        except (NoSuchModuleError, ImportError, ArgumentError) as exc:
            raise UsageError(f"unsupported database URL {mask_url(self.url)!r}: {exc}") from None
        try:
            revision = retry_locked(lambda: current_revision(engine))
        except (OperationalError, DatabaseError) as exc:
            engine.dispose()
            raise failure(self.url, exc, "read") from None
        where = path if path is not None else mask_url(parsed)
        if revision is None:
            engine.dispose()
            raise UsageError(
                f"{where} is not an autotune database (it has no autotune tables; "
                "`autotune search` creates them)"
            )
        try:
            check_revision(revision)
        except UsageError:
            engine.dispose()
            raise
        self.schema_found = revision
        if revision == SCHEMA_HEAD:
            return engine
        if path is None:
            engine.dispose()
            raise UsageError(
                f"the database {where} was written by an older autotune (schema {revision}): "
                "run `autotune upgrade --db URL` once to bring it to this release"
            )
        engine.dispose()
        return upgraded_copy(path)

    def _identity(self) -> tuple[Path, int, int] | None:
        """The SQLite file's (path, device, inode), to notice it vanish under us."""
        path = sqlite_file(self.url)
        if path is None:
            return None
        try:
            status = path.stat()
        except OSError:
            return None
        return path, status.st_dev, status.st_ino

    def _migrate(self) -> None:
        self.schema_found = current_revision(self.engine)
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
            raise failure(self.url, exc) from None

    def close(self) -> None:
        self.engine.dispose()

    # --- writes -------------------------------------------------------------

    def device_id(self, info: Any) -> int:
        fp = info.fingerprint
        with self.session() as s:
            advisory_xact_lock(s, f"device {json.dumps(fp, sort_keys=True)}")  # two searches starting at once
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
            else:
                try:
                    stored = json.loads(row.info)
                except (TypeError, ValueError):
                    stored = None  # a damaged row stays as it is
                live = info.to_dict()
                if isinstance(stored, dict) and set(live) - set(stored):
                    row.info = json.dumps({**live, **stored})  # limits recorded since: added
            return row.id

    def problem_id(self, family: str, key: dict[str, Any]) -> int:
        text = problem_key(key)
        with self.session() as s:
            advisory_xact_lock(s, f"problem {family} {text}")  # two searches starting at once
            row = s.scalar(sa.select(ProblemRow).filter_by(family=family, key=text))
            if row is None:
                row = ProblemRow(family=family, key=text)
                s.add(row)
                s.flush()
            return row.id

    def open_run(
        self, device_id: int, key: str, owner: str, stale_s: float, **fields: Any
    ) -> tuple[Run, str]:
        """This search's run, and what `owner` may do with it: "finished" (report it),
        "held" (another live process measures it: the run says who), "resumed" (taken
        over), or "new" (started, with `fields`). One transaction, serialised per key
        (SQLite takes the write lock at BEGIN; PostgreSQL an advisory lock on the key),
        so two processes opening the same search never both measure it. A holder is gone
        when its heartbeat is older than `stale_s`, or it was a process of this host that
        no longer exists."""
        with self.session() as s:
            advisory_xact_lock(s, key)
            run = s.scalar(
                sa.select(Run).filter_by(device_id=device_id, key=key).order_by(Run.id.desc()).limit(1)
            )
            if run is not None and run.status == "finished":
                return run, "finished"
            held = run is not None and run.owner not in (None, owner)
            if held and not lease_gone(run.owner, run.heartbeat_at, stale_s):
                return run, "held"
            if run is None:
                run = Run(device_id=device_id, key=key, started_at=now(), **fields)
                s.add(run)
                state = "new"
            else:
                state = "resumed"
            run.owner, run.heartbeat_at, run.status, run.finished_at = owner, now(), "running", None
            s.flush()
            return run, state

    def start_run(self, owner: str | None = None, **fields: Any) -> Run:
        """A new run, outside any lease check (a `--fresh` search)."""
        with self.session() as s:
            run = Run(status="running", started_at=now(), finished_at=None, owner=owner, **fields)
            if owner is not None:
                run.heartbeat_at = now()
            s.add(run)
            s.flush()
            return run

    def set_run_status(self, run_id: int, status: str, owner: str | None = None) -> bool:
        """Record how a run ended (its lease ends with it); with `owner`, only while the
        run is still that process's. False if it was not (taken over meanwhile)."""
        with self.session() as s:
            query = sa.update(Run).where(Run.id == run_id)
            if owner is not None:
                query = query.where(Run.owner == owner)
            ended = status != "running"
            values = {"status": status, "finished_at": now() if ended else None}
            if ended:
                values["owner"] = None
            return s.execute(query.values(**values)).rowcount == 1

    def heartbeat(self, run_id: int, owner: str) -> bool:
        """Renew `owner`'s lease on a run; False if it is no longer `owner`'s."""
        with self.session() as s:
            renewed = s.execute(
                sa.update(Run).where(Run.id == run_id, Run.owner == owner).values(heartbeat_at=now())
            ).rowcount
        return renewed == 1

    def runs_gone(self, run_ids: set[int], stale_s: float) -> set[int]:
        """Those of `run_ids` no live process measures any more: ended (finished,
        interrupted, failed), missing, or held by a process that is gone (`lease_gone`)."""
        if not run_ids:
            return set()
        with self.session() as s:
            rows = s.execute(
                sa.select(Run.id, Run.status, Run.owner, Run.heartbeat_at).where(Run.id.in_(run_ids))
            ).all()
        live = {
            run_id
            for run_id, status, owner, heartbeat_at in rows
            if status == "running" and owner is not None and not lease_gone(owner, heartbeat_at, stale_s)
        }
        return set(run_ids) - live

    def add_trial(self, **fields: Any) -> Trial:
        fields.setdefault("created_at", now())
        with self.session() as s:
            trial = Trial(**fields)
            s.add(trial)
            s.flush()
            return trial

    def set_best(self, device_id: int, problem_id: int, trial: Trial, time_ms: float) -> None:
        """The best kernel of a device and problem, the row made or replaced. Workers of one
        search finish a problem together: the lock keeps two from both making the row."""
        with self.session() as s:
            advisory_xact_lock(s, f"best {device_id} {problem_id}")
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

    def fastest_elsewhere(
        self, problem_ids: list[int], device_id: int, per_problem: int
    ) -> list[tuple[int, int, float, str, Device]]:
        """(device id, problem id, ms, config) of the `per_problem` fastest successful
        first measurements of each of these problems on each device other than
        `device_id`, with the device (a warm start on a device new to them). Rows
        written before kernels had fingerprints are left out."""
        if not problem_ids:
            return []
        rank = (
            sa.func.row_number()
            .over(partition_by=(Trial.device_id, Trial.problem_id), order_by=(Trial.time_ms, Trial.id))
            .label("rank")
        )
        ranked = (
            sa.select(Trial.device_id, Trial.problem_id, Trial.time_ms, Trial.config, rank)
            .where(
                Trial.problem_id.in_(problem_ids),
                Trial.device_id != device_id,
                Trial.status == "ok",
                Trial.time_ms.is_not(None),
                Trial.kernel_sha.is_not(None),
                Trial.origin.not_in(("cached", "retime")),
            )
            .subquery()
        )
        query = (
            sa.select(ranked.c.device_id, ranked.c.problem_id, ranked.c.time_ms, ranked.c.config, Device)
            .join(Device, ranked.c.device_id == Device.id)
            .where(ranked.c.rank <= per_problem)
            .order_by(ranked.c.time_ms)
        )
        with self.session() as s:
            return [tuple(row) for row in s.execute(query)]  # type: ignore[misc]

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
        self, device_id: int | None = None, family: str | None = None
    ) -> list[tuple[Best, Device, ProblemRow]]:
        """Best rows, by device, then family, then the problem's fields in order."""
        query = (
            sa.select(Best, Device, ProblemRow)
            .join(Device, Best.device_id == Device.id)
            .join(ProblemRow, Best.problem_id == ProblemRow.id)
        )
        if device_id is not None:
            query = query.where(Best.device_id == device_id)
        if family is not None:
            query = query.where(ProblemRow.family == family)
        with self.session() as s:
            rows = [tuple(row) for row in s.execute(query)]
        # A damaged row (problem key or config not JSON, no time) is left out, not fatal.
        rows = [r for r in rows if r[2].fields is not None and r[0].time_ms and _json_object(r[0].config)]
        rows.sort(key=lambda r: (r[1].id, r[2].family, tuple(map(str, r[2].fields.values()))))
        return rows  # type: ignore[return-value]

    def devices(self) -> list[Device]:
        with self.session() as s:
            return list(s.scalars(sa.select(Device).order_by(Device.id)))

    def problems(self) -> dict[int, ProblemRow]:
        with self.session() as s:
            return {p.id: p for p in s.scalars(sa.select(ProblemRow))}

    def device_row(self, fingerprint: dict[str, str]) -> Device | None:
        """The row of a device with this fingerprint; None if it never was tuned."""
        with self.session() as s:
            return s.scalar(sa.select(Device).filter_by(**fingerprint))


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, TypeError):
        return False
