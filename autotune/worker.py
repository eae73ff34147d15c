"""The measuring worker's parent side: compile, verify and time one kernel variant in
a child process that may die (the child's side is autotune/session.py).

A variant that hangs the device or crashes the driver takes its worker process with
it; the parent records `timeout` or `crashed` and starts a fresh worker for the next
variant. Timings come from OpenCL profiling events, never host clocks.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, BinaryIO

from autotune.errors import AutotuneError
from autotune.families import KernelVariant, Problem, problem_as_dict
from autotune.outcomes import Compiled, Measurement, Status, TimingPolicy, clip

DEATH_POLL_S = 0.5  # how often a waiting parent checks that the worker is still alive


class Worker:
    """Parent side: runs each measurement in a child process with a time-out.

    The child is a fresh interpreter (`python -m autotune.worker`) talking JSON lines
    over two pipes of its own, so driver chatter on stdout cannot corrupt the
    protocol, and scripts that use the worker need no `__main__` guard.
    """

    def __init__(self, device_index: int, timeout_s: float = 120.0, start_timeout_s: float = 120.0):
        self.device_index = device_index
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._commands: BinaryIO | None = None
        self._results: BinaryIO | None = None
        self._log: BinaryIO | None = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        command_read, command_write = os.pipe()
        result_read, result_write = os.pipe()
        package_root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "autotune.worker",
                str(command_read),
                str(result_write),
                str(self.device_index),
            ],
            pass_fds=(command_read, result_write),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        os.close(command_read)
        os.close(result_write)
        self._commands = os.fdopen(command_write, "wb")
        self._results = os.fdopen(result_read, "rb")
        try:
            hello = self._receive(self.start_timeout_s)
        except EOFError:
            hello = None
        if hello is None:
            detail = self._death_note()
            self._kill()
            raise AutotuneError(f"the measuring worker did not start: {detail}")
        if "fatal" in hello:
            self._kill()
            raise AutotuneError(hello["fatal"])

    def _receive(self, timeout_s: float) -> dict[str, Any] | None:
        """The next reply; None on time-out; EOFError when the child is gone.

        The child's exit is checked between short waits: a process the child started
        (a compiler's linker) can hold the reply pipe open after the child is killed."""
        assert self._results is not None and self._process is not None
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self._results], [], [], max(0.0, min(remaining, DEATH_POLL_S)))
            if ready:
                break
            if self._process.poll() is not None:
                raise EOFError
            if remaining <= 0:
                return None
        line = self._results.readline()
        if not line.endswith(b"\n"):
            raise EOFError  # the pipe closed: the child is exiting (maybe not reaped yet)
        return json.loads(line)

    def _death_note(self) -> str:
        """Why the child is gone: exit status and the end of what it printed."""
        assert self._process is not None
        try:
            code = self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "still running"
        note = _describe_exit(code)
        if self._log is not None:
            self._log.seek(0)
            tail = self._log.read().decode(errors="replace").strip().splitlines()[-3:]
            if tail:
                note += ": " + " | ".join(tail)
        return clip(note)

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=10)
        for stream in (self._commands, self._results, self._log):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._process = self._commands = self._results = self._log = None

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None and self._commands:
            try:
                self._commands.write(b"null\n")
                self._commands.flush()
                self._process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()

    def _send(self, message: dict[str, Any]) -> Measurement | None:
        """Send one request (the child started first if it is not running); None, or a
        failure of the process itself as a Measurement."""
        if self._process is None or self._process.poll() is not None:
            self._kill()
            self._start()
        assert self._commands is not None
        try:
            self._commands.write(json.dumps(message).encode() + b"\n")
            self._commands.flush()
        except OSError:
            return self._died()
        return None

    def _reply(
        self, sent_at: float | None = None, timeout_s: float | None = None
    ) -> dict[str, Any] | Measurement:
        """The reply to the request sent last (at `sent_at`, monotonic: the time-out, the
        worker's unless given, runs from there); a failure of the process as a Measurement."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        waited = 0.0 if sent_at is None else time.monotonic() - sent_at
        try:
            reply = self._receive(max(0.0, timeout_s - waited))
        except (OSError, EOFError):
            return self._died()
        if reply is None:
            self._kill()
            return Measurement(Status.TIMEOUT, error=f"no result within {timeout_s:g} s")
        return reply

    def _died(self) -> Measurement:
        note = self._death_note()  # waits for the child's exit status
        self._kill()
        return Measurement(Status.CRASHED, error=f"worker process died ({note})")

    def _call(self, message: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any] | Measurement:
        failed = self._send(message)
        return failed if failed is not None else self._reply(timeout_s=timeout_s)

    def start_measure(
        self,
        variant: KernelVariant,
        problem: Problem,
        policy: TimingPolicy | None = None,
        compiled: Compiled | None = None,
    ) -> Callable[[], Measurement]:
        """Send a variant to be verified and timed (with `compiled`, the binary built
        ahead is used) and return what waits for its measurement: the caller may work
        meanwhile, and calls it before the worker's next request."""
        message: dict[str, Any] = {
            "op": "measure",
            "variant": variant.to_dict(),
            "problem": problem_as_dict(problem),
            "policy": asdict(policy or TimingPolicy()),
        }
        if compiled is not None and compiled.binary is not None:
            message["binary"] = base64.b64encode(compiled.binary).decode()
            message["compile_ms"] = compiled.compile_ms
        failed = self._send(message)
        sent_at = time.monotonic()

        def measurement() -> Measurement:
            reply = failed if failed is not None else self._reply(sent_at)
            return reply if isinstance(reply, Measurement) else Measurement.from_dict(reply)

        return measurement

    def measure(
        self,
        variant: KernelVariant,
        problem: Problem,
        policy: TimingPolicy | None = None,
        compiled: Compiled | None = None,
    ) -> Measurement:
        """Verify and time a variant; with `compiled`, the binary built ahead is used."""
        return self.start_measure(variant, problem, policy, compiled)()

    def measure_together(
        self,
        variants: list[KernelVariant],
        problem: Problem,
        policy: TimingPolicy | None = None,
        compiled: list[Compiled | None] | None = None,
    ) -> list[Measurement]:
        """Verify each variant, then time them in turns of a few runs each (the final re-time:
        kernels whose times must compare, on a device whose speed drifts). A variant that hangs
        or kills the process fails them all (after the time-out of one measurement each)."""
        built = compiled or [None] * len(variants)
        reply = self._call(
            {
                "op": "together",
                "variants": [v.to_dict() for v in variants],
                "problem": problem_as_dict(problem),
                "policy": asdict(policy or TimingPolicy()),
                "binaries": [base64.b64encode(c.binary).decode() if c and c.binary else None for c in built],
                "compile_ms": [c.compile_ms if c else None for c in built],
            },
            self.timeout_s * max(1, len(variants)),  # the time-out of one measurement each
        )
        if isinstance(reply, Measurement):  # the process failed: all of them with it
            return [reply for _ in variants]
        return [Measurement.from_dict(m) for m in reply["measurements"]]

    def compile(self, variant: KernelVariant) -> Compiled:
        reply = self._call({"op": "compile", "variant": variant.to_dict()})
        if isinstance(reply, Measurement):
            return Compiled(status=reply.status, error=reply.error)
        if "error" in reply:
            return Compiled(Status.COMPILE_ERROR, error=reply["error"], compile_ms=reply["compile_ms"])
        return Compiled(Status.OK, binary=base64.b64decode(reply["binary"]), compile_ms=reply["compile_ms"])


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _die_with_parent(parent: int, poll_s: float = 0.5) -> None:
    """In the child: when the process that started it is gone (killed, even by SIGKILL),
    kill the child's whole process group, compilers included. A thread, because the main
    thread may be inside a kernel that never returns; the child is re-parented then, so
    a changed parent id is the sign."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


if __name__ == "__main__":
    # Processes a driver starts (compilers, linkers) must not hold the pipes open.
    for fd in (int(sys.argv[1]), int(sys.argv[2])):
        os.set_inheritable(fd, False)
    _die_with_parent(os.getppid())
    from autotune.session import serve

    serve(
        os.fdopen(int(sys.argv[1]), "rb"),
        os.fdopen(int(sys.argv[2]), "wb"),
        int(sys.argv[3]),
    )
