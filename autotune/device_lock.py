"""One measurement at a time on a physical device, across every process of this host.

Two searches timing one device at once slow each other down and corrupt both sets of
timings; they need not be in one database, or even one user's. Each measurement takes
an exclusive `flock` on a file named after the device in the system's temporary
folder; a second search waits its turn trial by trial, so both advance and neither
times while the other does. The kernel releases the lock of a process that dies.

A device is known by its stable index on this host (`autotune devices`), except that
every CPU device is one: OpenCL drivers of one CPU (pip's PoCL, Debian's) share its
cores."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autotune.devices import DeviceInfo
from autotune.errors import AutotuneError


def lock_path(device: DeviceInfo) -> Path:
    """The file whose lock stands for this device on this host."""
    name = "cpu" if device.is_cpu else f"device-{device.index}"
    folder = Path(os.environ.get("AUTOTUNE_LOCK_DIR") or tempfile.gettempdir())
    return folder / f"autotune-{name}.lock"


class DeviceLock:
    """The lock of one device, opened once and taken around each measurement."""

    def __init__(self, device: DeviceInfo) -> None:
        self.path = lock_path(device)
        try:
            # 0o666 less the umask; other users' searches lock the same file.
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as exc:
            raise AutotuneError(f"cannot open the device lock {self.path}: {exc.strerror or exc}") from None

    @contextmanager
    def held(self) -> Iterator[None]:
        """Wait until no other process measures on the device, and hold it."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)
