"""The measuring worker: compile, verify and time one kernel variant, in a process
that may die.

A variant that hangs the device or crashes the driver takes its worker process with
it; the parent records `timeout` or `crashed` and starts a fresh worker for the next
variant. Timings come from OpenCL profiling events, never host clocks.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from autotune.errors import AutotuneError
from autotune.families.conv2d.problem import Problem
from autotune.families.conv2d.render import KernelVariant

# Floats after the output that a correct kernel never touches.
CANARY_FLOATS = 4096
CANARY_VALUE = -7.25e30
ERROR_TEXT_LIMIT = 4000
DEATH_POLL_S = 0.5  # how often a waiting parent checks that the worker is still alive


class Status(enum.StrEnum):
    OK = "ok"
    INVALID = "invalid"
    COMPILE_ERROR = "compile_error"
    LAUNCH_ERROR = "launch_error"
    WRONG_RESULT = "wrong_result"
    TIMEOUT = "timeout"
    CRASHED = "crashed"


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


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= ERROR_TEXT_LIMIT else "..." + text[-ERROR_TEXT_LIMIT:]


@dataclass
class Compiled:
    """A variant built ahead: its binary, or why it could not be built."""

    status: Status
    binary: bytes | None = None
    compile_ms: float | None = None
    error: str | None = None

    def as_failure(self) -> Measurement:
        return Measurement(self.status, error=self.error, compile_ms=self.compile_ms)


class _Session:
    """Lives in the worker process: one context, the current problem's buffers."""

    def __init__(self, device_index: int) -> None:
        import pyopencl as cl

        from autotune.devices import open_device

        self.cl = cl
        _, device = open_device(device_index)
        self.device = device
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.problem: Problem | None = None

    def _prepare(self, problem: Problem) -> None:
        if problem == self.problem:
            return
        import numpy as np

        from autotune.families.conv2d.problem import correlate_valid, tolerance

        cl, mf = self.cl, self.cl.mem_flags
        image, filt = problem.data()
        self.reference = correlate_valid(image, filt)
        self.tolerance = tolerance(image, filt)
        self.input = cl.Buffer(self.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=image)
        self.filter = cl.Buffer(self.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=filt)
        n_out = problem.out_width * problem.out_height
        self.blank = np.full(n_out + CANARY_FLOATS, np.nan, dtype=np.float32)
        self.blank[n_out:] = CANARY_VALUE
        self.output = cl.Buffer(self.context, mf.READ_WRITE, size=self.blank.nbytes)
        self.problem = problem

    def compile(self, variant: KernelVariant) -> dict[str, Any]:
        """Build from source; the binary lets the measuring worker skip the compiler."""
        cl = self.cl
        start = time.perf_counter()
        try:
            program = cl.Program(self.context, variant.source).build(options=list(variant.build_options))
            cl.Kernel(program, variant.kernel_name)
        except (cl.Error, cl.RuntimeError) as exc:
            return {"error": _clip(str(exc)), "compile_ms": (time.perf_counter() - start) * 1e3}
        compile_ms = (time.perf_counter() - start) * 1e3
        return {"binary": base64.b64encode(program.binaries[0]).decode(), "compile_ms": compile_ms}

    def _build(self, variant: KernelVariant, binary: bytes | None) -> Any:
        cl = self.cl
        if binary is not None:
            try:
                program = cl.Program(self.context, [self.device], [binary]).build(
                    options=list(variant.build_options)
                )
                return cl.Kernel(program, variant.kernel_name)
            except (cl.Error, cl.RuntimeError):
                pass  # a binary the driver will not take back: compile the source instead
        program = cl.Program(self.context, variant.source).build(options=list(variant.build_options))
        return cl.Kernel(program, variant.kernel_name)

    def measure(
        self,
        variant: KernelVariant,
        problem: Problem,
        policy: TimingPolicy,
        binary: bytes | None = None,
        compile_ms: float | None = None,
    ) -> Measurement:
        import numpy as np

        cl = self.cl
        self._prepare(problem)
        start = time.perf_counter()
        try:
            kernel = self._build(variant, binary)
        except (cl.Error, cl.RuntimeError) as exc:
            return Measurement(Status.COMPILE_ERROR, error=_clip(str(exc)))
        if compile_ms is None:
            compile_ms = (time.perf_counter() - start) * 1e3
        kernel.set_args(
            *variant.arguments(self.input, self.filter, self.output, problem.out_width, problem.out_height)
        )
        global_size = variant.global_size(problem.out_width, problem.out_height)

        def launch() -> Any:
            return cl.enqueue_nd_range_kernel(self.queue, kernel, global_size, variant.local_size)

        # First run: warm-up and verification against the reference.
        try:
            cl.enqueue_copy(self.queue, self.output, self.blank).wait()
            launch().wait()
            result = np.empty_like(self.blank)
            cl.enqueue_copy(self.queue, result, self.output).wait()
        except (cl.Error, cl.RuntimeError) as exc:
            return Measurement(Status.LAUNCH_ERROR, error=_clip(str(exc)), compile_ms=compile_ms)
        n_out = problem.out_width * problem.out_height
        if not np.all(result[n_out:] == CANARY_VALUE):
            return Measurement(
                Status.WRONG_RESULT, compile_ms=compile_ms, error="wrote past the end of the output buffer"
            )
        out = result[:n_out].reshape(problem.out_height, problem.out_width)
        difference = np.abs(out - self.reference)
        if not np.all(np.isfinite(difference)):
            y, x = np.argwhere(~np.isfinite(difference))[0]
            return Measurement(
                Status.WRONG_RESULT,
                compile_ms=compile_ms,
                error=f"output ({x}, {y}) is {out[y, x]} (not written or not finite)",
            )
        max_error = float(difference.max())
        if max_error > self.tolerance:
            y, x = np.unravel_index(int(difference.argmax()), difference.shape)
            return Measurement(
                Status.WRONG_RESULT,
                compile_ms=compile_ms,
                max_error=max_error,
                error=f"max error {max_error:.3g} > tolerance {self.tolerance:.3g}"
                f" at output ({x}, {y}): got {out[y, x]:.6g}, expected {self.reference[y, x]:.6g}",
            )

        times: list[float] = []
        batch = 1
        try:
            while True:
                events = [launch() for _ in range(batch)]
                events[-1].wait()
                times += [(e.profile.end - e.profile.start) * 1e-6 for e in events]
                total_s = sum(times) * 1e-3
                if len(times) >= policy.max_runs or total_s >= policy.max_time_s:
                    break
                if len(times) >= policy.min_runs and total_s >= policy.min_time_s:
                    break
                per_run_s = max(total_s / len(times), 1e-7)
                wanted = max(policy.min_runs - len(times), int((policy.min_time_s - total_s) / per_run_s) + 1)
                batch = max(1, min(wanted, 64, policy.max_runs - len(times)))
        except (cl.Error, cl.RuntimeError) as exc:
            return Measurement(Status.LAUNCH_ERROR, error=_clip(str(exc)), compile_ms=compile_ms)
        return Measurement(
            Status.OK,
            time_ms=statistics.median(times),
            min_ms=min(times),
            max_ms=max(times),
            runs=len(times),
            compile_ms=compile_ms,
            max_error=max_error,
            times_ms=times,
        )


def _serve(commands: BinaryIO, results: BinaryIO, device_index: int) -> None:
    """Worker process main loop: one JSON line in, one JSON line out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop

    def reply(data: dict[str, Any]) -> None:
        results.write(json.dumps(data).encode() + b"\n")
        results.flush()

    try:
        session = _Session(device_index)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, not raised
        reply({"fatal": f"cannot open device {device_index}: {exc}"})
        return
    reply({"ready": True})
    for line in commands:
        message = json.loads(line)
        if message is None:
            return
        variant = KernelVariant.from_dict(message["variant"])
        try:
            if message["op"] == "compile":
                reply(session.compile(variant))
                continue
            binary = base64.b64decode(message["binary"]) if message.get("binary") else None
            result = session.measure(
                variant,
                Problem(**message["problem"]),
                TimingPolicy(**message["policy"]),
                binary=binary,
                compile_ms=message.get("compile_ms"),
            )
        except Exception:  # noqa: BLE001 - any surprise is this variant's failure
            result = Measurement(Status.CRASHED, error=_clip(traceback.format_exc()))
        reply(result.to_dict())


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
        return _clip(note)

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

    def _call(self, message: dict[str, Any]) -> dict[str, Any] | Measurement:
        """Send one request; a failure of the process itself comes back as a Measurement."""
        if self._process is None or self._process.poll() is not None:
            self._kill()
            self._start()
        assert self._commands is not None
        try:
            self._commands.write(json.dumps(message).encode() + b"\n")
            self._commands.flush()
            reply = self._receive(self.timeout_s)
        except (OSError, EOFError):
            reply = None  # the child died; _death_note waits for its exit status
        else:
            if reply is not None:
                return reply
            self._kill()
            return Measurement(Status.TIMEOUT, error=f"no result within {self.timeout_s:g} s")
        note = self._death_note()
        self._kill()
        return Measurement(Status.CRASHED, error=f"worker process died ({note})")

    def measure(
        self,
        variant: KernelVariant,
        problem: Problem,
        policy: TimingPolicy | None = None,
        compiled: Compiled | None = None,
    ) -> Measurement:
        """Verify and time a variant; with `compiled`, the binary built ahead is used."""
        message: dict[str, Any] = {
            "op": "measure",
            "variant": variant.to_dict(),
            "problem": problem.to_dict(),
            "policy": asdict(policy or TimingPolicy()),
        }
        if compiled is not None and compiled.binary is not None:
            message["binary"] = base64.b64encode(compiled.binary).decode()
            message["compile_ms"] = compiled.compile_ms
        reply = self._call(message)
        return reply if isinstance(reply, Measurement) else Measurement.from_dict(reply)

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


if __name__ == "__main__":
    # Processes a driver starts (compilers, linkers) must not hold the pipes open.
    for fd in (int(sys.argv[1]), int(sys.argv[2])):
        os.set_inheritable(fd, False)
    _serve(
        os.fdopen(int(sys.argv[1]), "rb"),
        os.fdopen(int(sys.argv[2]), "wb"),
        int(sys.argv[3]),
    )
