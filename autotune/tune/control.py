"""What steers a running search from outside its loop: Ctrl-C and SIGTERM (`StopFlag`),
and the run's lease, renewed from a thread (`Heartbeat`)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from autotune.errors import AutotuneError
from autotune.store import Store


class StopFlag:
    """Ctrl-C (or SIGTERM) once: finish the current trial, then stop, the run marked
    interrupted. Twice: stop now."""

    def __init__(self) -> None:
        self.requested = False

    @contextmanager
    def installed(self) -> Iterator[StopFlag]:
        def handler(signum: int, frame: Any) -> None:
            if self.requested:
                raise KeyboardInterrupt
            self.requested = True

        try:
            previous = {number: signal.signal(number, handler) for number in (signal.SIGINT, signal.SIGTERM)}
        except ValueError:  # not the main thread: no signal handling
            yield self
            return
        try:
            yield self
        finally:
            for number, earlier in previous.items():
                signal.signal(number, earlier)


# A run is measured by one process: it renews its lease every HEARTBEAT_S; another
# process takes the run over once the lease is LEASE_STALE_S old (at once when the
# holder was a process of this host that is gone).
HEARTBEAT_S = 10.0
LEASE_STALE_S = 120.0


class Heartbeat:
    """Renews a run's lease from a thread while the search runs (a kernel that takes
    minutes must not let the lease lapse); `on_lost` is called once if another process
    has taken the run over meanwhile."""

    def __init__(self, store: Store, run_id: int, owner: str, on_lost: Callable[[], None]) -> None:
        self.store, self.run_id, self.owner, self.on_lost = store, run_id, owner, on_lost
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="run-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._done.wait(HEARTBEAT_S):
            with contextlib.suppress(AutotuneError):
                if not self.store.heartbeat(self.run_id, self.owner):
                    self.on_lost()
                    return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
