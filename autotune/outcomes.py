"""What a trial can end as, where it came from, and how long to time it: the words
the worker, the tuner, the store and the CLI share."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

ERROR_TEXT_LIMIT = 4000


class Status(enum.StrEnum):
    OK = "ok"
    INVALID = "invalid"  # rejected before compiling: breaks a rule of the space
    COMPILE_ERROR = "compile_error"
    LAUNCH_ERROR = "launch_error"
    WRONG_RESULT = "wrong_result"
    TIMEOUT = "timeout"
    CRASHED = "crashed"


_KNOWN_STATUSES = frozenset(status.value for status in Status)


class Origin(enum.StrEnum):
    """Why a trial was run. `cached` and `retime` rows repeat an earlier measurement's
    point: they are never a point's first measurement."""

    PRESET = "preset"  # a seed kernel of the family
    WARM = "warm"  # another problem's best on this device
    OTHER_DEVICE = "other_device"  # fast on another device for this kind of problem
    SAMPLER = "sampler"
    CACHED = "cached"  # answered from an earlier measurement, not run
    RETIME = "retime"  # the top few timed again, interleaved


def first_measurement(origin: str) -> bool:
    """Whether a stored trial's origin is a point's first measurement. Any origin but
    the two repeats is: a database shared with a later release may hold origins this one
    does not know, and its rows stay readable."""
    return origin not in (Origin.CACHED, Origin.RETIME)


def known_status(status: str) -> bool:
    """Whether a stored trial's status is one this release knows. A database shared with
    a later release may hold statuses added since: such a row is read and reported as it
    is, but never answers for a point (the point is measured again)."""
    return status in _KNOWN_STATUSES


def counts_as_trial(origin: str, status: str) -> bool:
    """Whether a trial row counts toward a search's budget (and what `search` and
    `history` report): not a re-timing, not a point rejected before compiling."""
    return origin != Origin.RETIME and status != Status.INVALID


@dataclass(frozen=True)
class TimingPolicy:
    """When to stop repeating: enough runs and enough total time, or a cap."""

    min_runs: int = 5
    min_time_s: float = 0.1
    max_runs: int = 500
    max_time_s: float = 2.0


@dataclass
class Measurement:
    status: Status
    error: str | None = None
    time_ms: float | None = None  # median
    min_ms: float | None = None
    max_ms: float | None = None
    runs: int = 0
    compile_ms: float | None = None
    max_error: float | None = None
    times_ms: list[float] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        data = dict(data)
        data["status"] = Status(data["status"])
        return cls(**data)


@dataclass
class Compiled:
    """A variant built ahead: its binary, or why it could not be built."""

    status: Status
    binary: bytes | None = None
    compile_ms: float | None = None
    error: str | None = None

    def as_failure(self) -> Measurement:
        return Measurement(self.status, error=self.error, compile_ms=self.compile_ms)


def clip(text: str) -> str:
    """Error text short enough to store: its end, where compilers put the cause."""
    text = text.strip()
    return text if len(text) <= ERROR_TEXT_LIMIT else "..." + text[-ERROR_TEXT_LIMIT:]
