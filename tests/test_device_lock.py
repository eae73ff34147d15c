"""Two searches never time one device at once: each measurement holds the device's
host-wide lock (autotune/device_lock.py)."""

import fcntl
import os
import signal
import sqlite3
import subprocess
import sys
import time

from autotune.device_lock import lock_path
from autotune.devices import device_info
from tests.conftest import ROOT

MEASURED = (
    "SELECT COUNT(*) FROM autotune_trials WHERE status != 'invalid' AND origin NOT IN ('cached', 'retime')"
)


def _measured(path) -> int:
    try:
        with sqlite3.connect(path, timeout=30) as connection:
            return connection.execute(MEASURED).fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def _wait_for(path, count: int, timeout: float = 120) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (found := _measured(path)) >= count:
            return found
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} measured trials after {timeout} s")


def test_a_search_waits_while_another_process_measures_on_its_device(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_LOCK_DIR", str(tmp_path))
    path = tmp_path / "tune.db"
    search = subprocess.Popen(
        [sys.executable, "-m", "autotune", "search", "-d", "0", "-s", "40x24", "-f", "3"]
        + ["--trials", "300", "--sampler", "random", "--db", f"sqlite:///{path}"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(path, 3)
        # This process measures on the device now (as another search would): the search waits.
        with open(lock_path(device_info(0)), "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # A measurement that ended just before may still be written: wait until the count
            # holds still for a second (a busy machine can take longer than that to write it).
            before = _measured(path)
            for _ in range(30):
                time.sleep(1)
                now = _measured(path)
                if now == before:
                    break
                before = now
            time.sleep(3)
            during = _measured(path)
            fcntl.flock(lock, fcntl.LOCK_UN)
        assert during == before, (before, during)
        _wait_for(path, during + 2)  # and it goes on once the device is free
        assert search.poll() is None
    finally:
        search.send_signal(signal.SIGTERM)
        _, err = search.communicate(timeout=120)
    assert search.returncode == 130, err
