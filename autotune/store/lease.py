"""A run's lease: which process measures it (`host:pid`) and whether that process is
gone, so two identical searches never both measure one run."""

from __future__ import annotations

import datetime as dt
import os
import socket

from autotune.store.models import now


def lease_owner() -> str:
    """This process, as a run's lease names it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def lease_gone(owner: str, heartbeat_at: dt.datetime | None, stale_s: float) -> bool:
    """Whether the process holding a lease is gone: silent for `stale_s`, or a process of
    this host that no longer exists."""
    if heartbeat_at is None or (now() - heartbeat_at).total_seconds() > stale_s:
        return True
    host, _, pid = owner.rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
    return False
