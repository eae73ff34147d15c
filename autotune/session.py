"""The measuring worker's child side: one device context, the current problem's
buffers; compile, verify against the family's reference, time with profiling events.

Runs in `python -m autotune.worker`, a process that may die with the variant it runs.
"""

from __future__ import annotations

import base64
import json
import math
import signal
import statistics
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np

from autotune.families import get_family, problem_from_dict
from autotune.families.base import KernelFamily, KernelVariant, Problem
from autotune.launcher import Launcher
from autotune.outcomes import Measurement, Status, TimingPolicy, clip

# Output elements after the output that a correct kernel never touches.
CANARY_ELEMENTS = 4096
CANARY_VALUE = -7.25e30
# Output elements compared with the reference at a time: a block and its float64
# difference stay in the CPU's cache (one pass over a 4096x4096 output, not four).
VERIFY_BLOCK = 1 << 16
# References kept for the problems measured last (a search of seven widths at 4096x4096
# holds 7 x 128 MiB).
ANSWERS_BYTES = 1 << 30


class Session:
    def __init__(self, device_index: int) -> None:
        import pyopencl as cl

        from autotune.devices import open_device

        self.cl = cl
        _, device = open_device(device_index)
        self.device = device
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.problem: Problem | None = None
        # Problem -> (reference, tolerance), the most recent last: a search comes back to
        # each of its problems (warm starts, re-timing), and a 4096x4096 reference takes
        # seconds to compute.
        self.answers: OrderedDict[Problem, tuple[np.ndarray, float]] = OrderedDict()

    def _answer(self, problem: Problem) -> tuple[np.ndarray, float]:
        """The problem's reference and tolerance, kept for the problems last measured up
        to ANSWERS_BYTES of references."""
        if problem in self.answers:
            self.answers.move_to_end(problem)
            return self.answers[problem]
        reference = np.ascontiguousarray(problem.reference())
        reference.setflags(write=False)
        answer = (reference, problem.tolerance())
        self.answers[problem] = answer
        while len(self.answers) > 1 and sum(r.nbytes for r, _ in self.answers.values()) > ANSWERS_BYTES:
            self.answers.popitem(last=False)
        return answer

    def _prepare(self, problem: Problem) -> None:
        if problem == self.problem:
            return
        cl, mf = self.cl, self.cl.mem_flags
        self.reference, self.tolerance = self._answer(problem)
        self.difference = np.empty(min(self.reference.size, VERIFY_BLOCK), np.float64)
        self.buffers = {
            name: cl.Buffer(
                self.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(array)
            )
            for name, array in problem.inputs().items()
        }
        n_out = self.reference.size
        self.blank, self.canary = _blank(problem.output_dtype, n_out)
        self.buffers["output"] = cl.Buffer(self.context, mf.READ_WRITE, size=self.blank.nbytes)
        self.problem = problem

    def compile(self, variant: KernelVariant) -> dict[str, Any]:
        """Build from source; the binary lets the measuring worker skip the compiler."""
        cl = self.cl
        start = time.perf_counter()
        try:
            program = cl.Program(self.context, variant.source).build(options=list(variant.build_options))
            for launch in variant.launches:
                cl.Kernel(program, launch.kernel_name)
        except (cl.Error, cl.RuntimeError) as exc:
            return {"error": clip(str(exc)), "compile_ms": (time.perf_counter() - start) * 1e3}
        compile_ms = (time.perf_counter() - start) * 1e3
        return {"binary": base64.b64encode(program.binaries[0]).decode(), "compile_ms": compile_ms}

    def _build(
        self,
        family: KernelFamily,
        variant: KernelVariant,
        binary: bytes | None,
        scratch: dict[tuple[Any, str], Any] | None = None,
    ) -> Launcher:
        cl = self.cl
        if binary is not None:
            try:
                program = cl.Program(self.context, [self.device], [binary]).build(
                    options=list(variant.build_options)
                )
                return Launcher(family, variant, program, scratch=scratch)
            except (cl.Error, cl.RuntimeError):
                pass  # a binary the driver will not take back: compile the source instead
        program = cl.Program(self.context, variant.source).build(options=list(variant.build_options))
        return Launcher(family, variant, program, scratch=scratch)

    def _verify(self, result: np.ndarray, compile_ms: float | None) -> Measurement | float:
        """The first run's output against the reference: a failure, or the max error."""
        n_out = self.reference.size
        if not np.all(result[n_out:] == self.canary):
            return Measurement(
                Status.WRONG_RESULT, compile_ms=compile_ms, error="wrote past the end of the output buffer"
            )
        max_error = self._max_error(result[:n_out])
        if math.isfinite(max_error) and max_error <= self.tolerance:
            return max_error
        out = result[:n_out].reshape(self.reference.shape)
        difference = np.abs(out - self.reference)
        if not np.all(np.isfinite(difference)):
            where = tuple(int(i) for i in np.argwhere(~np.isfinite(difference))[0][::-1])
            return Measurement(
                Status.WRONG_RESULT,
                compile_ms=compile_ms,
                error=f"output {where} is {out[where[::-1]]} (not written or not finite)",
            )
        max_error = float(difference.max())
        if max_error > self.tolerance:
            index = np.unravel_index(int(difference.argmax()), difference.shape)
            where = tuple(int(i) for i in index[::-1])
            return Measurement(
                Status.WRONG_RESULT,
                compile_ms=compile_ms,
                max_error=max_error,
                error=f"max error {max_error:.3g} > tolerance {self.tolerance:.3g}"
                f" at output {where}: got {out[index]:.6g}, expected {self.reference[index]:.6g}",
            )
        return max_error

    def _max_error(self, out: np.ndarray) -> float:
        """The largest |output - reference| (NaN or inf where an output is not finite or
        not written), a block at a time; a failure is then located over the whole output."""
        reference = self.reference.reshape(-1)
        largest = 0.0
        for start in range(0, reference.size, VERIFY_BLOCK):
            stop = min(start + VERIFY_BLOCK, reference.size)
            block = self.difference[: stop - start]
            np.subtract(out[start:stop], reference[start:stop], out=block)
            np.abs(block, out=block)
            block_max = float(block.max())
            if not math.isfinite(block_max):
                return block_max
            largest = max(largest, block_max)
        return largest

    def measure(
        self,
        variant: KernelVariant,
        problem: Problem,
        policy: TimingPolicy,
        binary: bytes | None = None,
        compile_ms: float | None = None,
    ) -> Measurement:
        ready = self._ready(variant, problem, binary, compile_ms)
        if isinstance(ready, Measurement):
            return ready
        launch, gate, verified = ready
        try:
            times = _time(launch, policy, gate)
        except (self.cl.Error, self.cl.RuntimeError) as exc:
            return Measurement(Status.LAUNCH_ERROR, error=clip(str(exc)), compile_ms=verified.compile_ms)
        return _timed(verified, times)

    def measure_together(
        self,
        variants: list[KernelVariant],
        problem: Problem,
        policy: TimingPolicy,
        binaries: list[bytes | None],
        compile_ms: list[float | None] | None = None,
    ) -> list[Measurement]:
        """Several variants of one problem, each verified, then timed in turn a few runs at a
        time (`_time_together`): a GPU whose speed moves between two levels for seconds at a
        time (an H100 ran the same kernel 4-6% apart from one measurement to the next, every
        kernel at once) moves them all alike, so their times compare."""
        built_ms = compile_ms or [None] * len(variants)
        scratch: dict[tuple[Any, str], Any] = {}  # one of each, not one for each variant
        readied = [
            self._ready(v, problem, b, ms, scratch)
            for v, b, ms in zip(variants, binaries, built_ms, strict=True)
        ]
        ready = [r for r in readied if not isinstance(r, Measurement)]
        errors = (self.cl.Error, self.cl.RuntimeError)
        times = _time_together([(launch, gate) for launch, gate, _ in ready], policy, errors)
        timed = iter(
            Measurement(Status.LAUNCH_ERROR, error=t, compile_ms=verified.compile_ms)
            if isinstance(t, str)
            else _timed(verified, t)
            for (_, _, verified), t in zip(ready, times, strict=True)
        )
        return [r if isinstance(r, Measurement) else next(timed) for r in readied]

    def _ready(
        self,
        variant: KernelVariant,
        problem: Problem,
        binary: bytes | None,
        compile_ms: float | None,
        scratch: dict[tuple[Any, str], Any] | None = None,
    ) -> Measurement | tuple[Callable[[Any], list[Any]], Callable[[], Any] | None, Measurement]:
        """Build the variant and run it once against the reference: its failure, or how to
        launch it, the gate its runs need, and what the check found (compile time, error)."""
        cl = self.cl
        family = get_family(problem.family)
        self._prepare(problem)
        start = time.perf_counter()
        try:
            launcher = self._build(family, variant, binary, scratch)
        except (cl.Error, cl.RuntimeError) as exc:
            return Measurement(Status.COMPILE_ERROR, error=clip(str(exc)))
        if compile_ms is None:
            compile_ms = (time.perf_counter() - start) * 1e3
        buffers = self.buffers

        def launch(wait_for: Any = None) -> list[Any]:
            return launcher.enqueue(self.queue, problem, buffers, wait_for)

        # Several launches are timed from the first's start to the last's end: each batch
        # waits behind a gate until all of it is queued, so the host's queueing (slow on a
        # host busy compiling ahead) leaves no gaps between them that the device would not.
        gate = (lambda: cl.UserEvent(self.context)) if len(variant.launches) > 1 else None

        # First run: warm-up and verification against the reference.
        try:
            cl.enqueue_copy(self.queue, self.buffers["output"], self.blank).wait()
            launch()[-1].wait()
            result = np.empty_like(self.blank)
            cl.enqueue_copy(self.queue, result, self.buffers["output"]).wait()
        except (cl.Error, cl.RuntimeError) as exc:
            return Measurement(Status.LAUNCH_ERROR, error=clip(str(exc)), compile_ms=compile_ms)
        verdict = self._verify(result, compile_ms)
        if isinstance(verdict, Measurement):
            return verdict
        return launch, gate, Measurement(Status.OK, compile_ms=compile_ms, max_error=verdict)


def _timed(verified: Measurement, times: list[float]) -> Measurement:
    return Measurement(
        Status.OK,
        time_ms=statistics.median(times),
        min_ms=min(times),
        max_ms=max(times),
        runs=len(times),
        compile_ms=verified.compile_ms,
        max_error=verified.max_error,
        times_ms=times,
    )


def _blank(dtype: np.dtype, n_out: int) -> tuple[np.ndarray, Any]:
    """What the output buffer holds before a first run, and the canary past its end.
    Float outputs start as NaN, so an output never written fails verification; an
    integer output starts as a byte pattern a correct kernel overwrites."""
    if dtype.kind == "f":
        blank = np.full(n_out + CANARY_ELEMENTS, np.nan, dtype=dtype)
        canary = dtype.type(CANARY_VALUE if dtype.itemsize >= 4 else -7.25e3)
    else:
        pattern = np.full((n_out + CANARY_ELEMENTS) * dtype.itemsize, 0xA5, np.uint8)
        blank = pattern.view(dtype)
        canary = dtype.type(np.iinfo(dtype).max - 7)
    blank[n_out:] = canary
    return blank, canary


def _time(launch: Any, policy: TimingPolicy, gate: Callable[[], Any] | None = None) -> list[float]:
    """Kernel times in ms, each from the profiling events of its launches (the first's
    start to the last's end), launched in batches until the policy has enough runs and
    enough total time (or hits a cap). `gate`: makes a user event each batch waits
    behind until it is all queued (opened whatever happens: a launch that fails must not
    leave the queue waiting for the next variant)."""
    import pyopencl as cl

    times: list[float] = []
    batch = 1
    while True:
        opened = gate() if gate is not None else None
        try:
            runs = [launch([opened] if opened is not None and i == 0 else None) for i in range(batch)]
        finally:
            if opened is not None:
                opened.set_status(cl.command_execution_status.COMPLETE)
        runs[-1][-1].wait()
        times += [(run[-1].profile.end - run[0].profile.start) * 1e-6 for run in runs]
        total_s = sum(times) * 1e-3
        if len(times) >= policy.max_runs or total_s >= policy.max_time_s:
            return times
        if len(times) >= policy.min_runs and total_s >= policy.min_time_s:
            return times
        per_run_s = max(total_s / len(times), 1e-7)
        wanted = max(policy.min_runs - len(times), int((policy.min_time_s - total_s) / per_run_s) + 1)
        batch = max(1, min(wanted, 64, policy.max_runs - len(times)))


#: Runs of one variant in a row, before the next variant's, when several are timed in turn.
TURN_RUNS = 16


def _time_together(
    variants: list[tuple[Callable[[Any], list[Any]], Callable[[], Any] | None]],
    policy: TimingPolicy,
    launch_errors: tuple[type[BaseException], ...],
) -> list[list[float] | str]:
    """Each variant's run times in ms (or why its launch failed: it is then timed no more),
    the variants timed in turn a few runs at a time (`TURN_RUNS` of a, then of b, ..., then a
    again) until every variant has what `policy` asks of one measurement or one hits a cap;
    all get the same number of runs. The first cycle is one run each, to size the turns.
    Each turn starts with one run left out: right after another kernel a run reads up to 20%
    slow, differently for each pair of kernels (an H100 at F = 9, kernels launched a, b, c,
    a, b, c)."""
    times: list[list[float] | str] = [[] for _ in variants]
    runs = 1
    while True:
        for index, (launch, gate) in enumerate(variants):
            own = times[index]
            if isinstance(own, str):
                continue
            try:
                own.extend(_time(launch, TimingPolicy(runs + 1, 0.0, runs + 1, math.inf), gate)[1:])
            except launch_errors as exc:
                times[index] = clip(str(exc))
        timed = [own for own in times if not isinstance(own, str)]
        if not timed:
            return times
        done = len(timed[0])
        spent_s = [sum(own) * 1e-3 for own in timed]
        if done >= policy.max_runs or max(spent_s) >= policy.max_time_s:
            return times
        if done >= policy.min_runs and min(spent_s) >= policy.min_time_s:
            return times
        # the next turns: as many runs as the slowest variant may still take under the cap
        per_run_s = max(spent_s) / done
        under_cap = math.ceil((policy.max_time_s - max(spent_s)) / per_run_s) if per_run_s > 0 else TURN_RUNS
        runs = max(1, min(TURN_RUNS, policy.max_runs - done, under_cap))


def serve(commands: BinaryIO, results: BinaryIO, device_index: int) -> None:
    """Worker process main loop: one JSON line in, one JSON line out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop

    def reply(data: dict[str, Any]) -> None:
        results.write(json.dumps(data).encode() + b"\n")
        results.flush()

    try:
        session = Session(device_index)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, not raised
        reply({"fatal": f"cannot open device {device_index}: {exc}"})
        return
    reply({"ready": True})
    for line in commands:
        message = json.loads(line)
        if message is None:
            return
        if message["op"] == "together":
            reply({"measurements": [m.to_dict() for m in _together(session, message)]})
            continue
        variant = KernelVariant.from_dict(message["variant"])
        try:
            if message["op"] == "compile":
                reply(session.compile(variant))
                continue
            binary = base64.b64decode(message["binary"]) if message.get("binary") else None
            result = session.measure(
                variant,
                problem_from_dict(message["problem"]),
                TimingPolicy(**message["policy"]),
                binary=binary,
                compile_ms=message.get("compile_ms"),
            )
        except Exception:  # noqa: BLE001 - any surprise is this variant's failure
            result = Measurement(Status.CRASHED, error=clip(traceback.format_exc()))
        reply(result.to_dict())


def _together(session: Session, message: dict[str, Any]) -> list[Measurement]:
    try:
        variants = [KernelVariant.from_dict(v) for v in message["variants"]]
        binaries = [base64.b64decode(b) if b else None for b in message["binaries"]]
    except Exception:  # noqa: BLE001 - a malformed request fails, the worker stays
        failed = Measurement(Status.CRASHED, error=clip(traceback.format_exc()))
        return [failed for _ in message.get("variants", [])]
    try:
        return session.measure_together(
            variants,
            problem_from_dict(message["problem"]),
            TimingPolicy(**message["policy"]),
            binaries,
            message.get("compile_ms"),
        )
    except Exception:  # noqa: BLE001 - any surprise is a failure of all of them
        failed = Measurement(Status.CRASHED, error=clip(traceback.format_exc()))
        return [failed for _ in variants]
