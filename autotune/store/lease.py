"""A run's lease: which process measures it (`host:pid@namespace`) and whether that
process is gone, so two identical searches never both measure one run, and a shared
search's workers give back the claims of a worker that is gone."""

from __future__ import annotations

import datetime as dt
import os
import socket

from autotune.store.models import now


def _pid_namespace() -> str:
    """This process's PID namespace (Linux): containers that share a host name see
    other process ids; empty where unknown."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def lease_owner(pid: int | None = None) -> str:
    """This process (or process `pid` of this host and namespace), as a run's lease names it."""
    return f"{socket.gethostname()}:{os.getpid() if pid is None else pid}@{_pid_namespace()}"


def lease_gone(owner: str, heartbeat_at: dt.datetime | None, stale_s: float) -> bool:
    """Whether the process holding a lease is gone: silent for `stale_s`, or a process of
    this host and PID namespace that no longer exists (an owner written without its
    namespace, by an earlier release, is judged by its heartbeat only)."""
    if heartbeat_at is None or (now() - heartbeat_at).total_seconds() > stale_s:
        return True
    host, _, process = owner.rpartition(":")
    pid, at, namespace = process.partition("@")
    if host == socket.gethostname() and at and namespace == _pid_namespace() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
    return False
