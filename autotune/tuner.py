"""Tune kernels on a device: the search loop per filter width, every trial persisted.

Order per filter width: the seed presets (so the result is never worse than the seed
kernels), then the best configs of other widths on the same device (warm start),
then the sampler. Points already measured for this device and problem are answered from
the database. At the end the top few are re-timed interleaved, and the winner becomes
the best kernel for (device, problem).
"""

from __future__ import annotations

import contextlib
import json
import signal
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from autotune import __version__
from autotune.compiler import CompilePool, default_compilers
from autotune.devices import DeviceInfo
from autotune.errors import AutotuneError, UsageError
from autotune.evaluate import Evaluator
from autotune.families.conv2d.problem import Problem
from autotune.families.conv2d.render import KernelVariant, generate
from autotune.search import DEFAULT_SAMPLER, Search
from autotune.space import Config, convolution_space
from autotune.store import Best, Store, Trial, config_key
from autotune.worker import Compiled, Measurement, Status, TimingPolicy

MAX_INVALID_IN_A_ROW = 500
WARM_START_WIDTHS = 8  # warm start: best configs of up to this many other widths


@dataclass(frozen=True)
class Budget:
    trials: int | None = 60  # per filter width, counting measured and cached points
    time_s: float | None = None  # for the whole search, shared among filter widths


@dataclass
class WidthResult:
    filter_width: int
    problem: Problem
    trials: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    best_ms: float | None = None
    best_config: Config | None = None
    baseline_ms: float | None = None
    best_seed_ms: float | None = None
    best_seed_preset: str | None = None
    interrupted: bool = False

    @property
    def gflops(self) -> float | None:
        return self.problem.flops / (self.best_ms * 1e-3) / 1e9 if self.best_ms else None

    @property
    def gbs(self) -> float | None:
        return self.problem.min_bytes / (self.best_ms * 1e-3) / 1e9 if self.best_ms else None


class StopFlag:
    """Ctrl-C once: finish the current trial, then stop. Twice: stop now."""

    def __init__(self) -> None:
        self.requested = False

    @contextmanager
    def installed(self) -> Iterator[StopFlag]:
        def handler(signum: int, frame: Any) -> None:
            if self.requested:
                raise KeyboardInterrupt
            self.requested = True

        try:
            previous = signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main thread: no signal handling
            yield self
            return
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, previous)


Listener = Callable[[str, dict[str, Any]], None]


@dataclass
class _Pending:
    """A point asked of the sampler, waiting for its turn on the device."""

    trial: Any
    config: Config
    key: str
    origin: str
    variant: KernelVariant | None = None
    future: Future[Compiled] | None = None


class Tuner:
    def __init__(
        self,
        store: Store,
        device_index: int,
        device: DeviceInfo,
        filter_widths: list[int],
        image_size: tuple[int, int],
        sampler: str = DEFAULT_SAMPLER,
        seed: int = 0,
        budget: Budget | None = None,
        policy: TimingPolicy | None = None,
        retime_top: int = 3,
        retime_rounds: int = 3,
        fresh: bool = False,
        listener: Listener | None = None,
        compilers: int | None = None,
    ) -> None:
        self.store = store
        self.device_index = device_index
        self.device = device
        self.filter_widths = filter_widths
        self.image_size = image_size
        self.sampler = sampler
        self.seed = seed
        self.budget = budget or Budget()
        self.policy = policy
        self.retime_top = retime_top
        self.retime_rounds = retime_rounds
        self.fresh = fresh
        self.compilers = compilers  # processes compiling ahead; None: all but one core on GPUs, none on CPUs
        self.compile_pool: CompilePool | None = None
        self.listener = listener or (lambda kind, data: None)
        self.stop = StopFlag()
        self.run_id: int | None = None
        self.resumed = False
        self.already_finished = False
        self._fingerprints: dict[tuple[int, str], str | None] = {}

    # -- the run -------------------------------------------------------------

    def _run_key(self) -> str:
        return json.dumps(
            {
                "widths": self.filter_widths,
                "size": list(self.image_size),
                "sampler": self.sampler,
                "seed": self.seed,
                "trials": self.budget.trials,
                "time": self.budget.time_s,
                "space": convolution_space().fingerprint,
            },
            sort_keys=True,
        )

    def run(self) -> list[WidthResult]:
        device_id = self.store.device_id(self.device)
        key = self._run_key()
        previous = None if self.fresh else self.store.latest_run(device_id, key)
        if previous is not None and previous.status == "finished":
            # The same search is already done: report it instead of measuring again.
            self.run_id, self.already_finished = previous.id, True
            self.listener("run", {"run_id": self.run_id, "resumed": False, "finished": True})
            return [self._summary_of(device_id, width) for width in self.filter_widths]
        if previous is not None:
            self.run_id, self.resumed = previous.id, True
            self.store.set_run_status(previous.id, "running")
        else:
            run = self.store.start_run(
                device_id=device_id,
                key=key,
                filter_widths=",".join(map(str, self.filter_widths)),
                out_width=self.image_size[0],
                out_height=self.image_size[1],
                sampler=self.sampler,
                seed=self.seed,
                trials_budget=self.budget.trials,
                time_budget_s=self.budget.time_s,
                tool_version=__version__,
            )
            self.run_id = run.id
        self.listener("run", {"run_id": self.run_id, "resumed": self.resumed, "finished": False})
        results: list[WidthResult] = []
        status = "failed"
        deadline = time.monotonic() + self.budget.time_s if self.budget.time_s else None
        try:
            compilers = (
                self.compilers
                if self.compilers is not None
                else (0 if self.device.is_cpu else default_compilers())
            )
            with (
                self.stop.installed(),
                Evaluator(self.device_index, policy=self.policy) as evaluator,
                CompilePool(self.device_index, compilers) if compilers > 0 else nullcontext() as pool,
            ):
                self.compile_pool = pool
                for position, width in enumerate(self.filter_widths):
                    width_deadline = None
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        width_deadline = time.monotonic() + max(0.0, left) / (
                            len(self.filter_widths) - position
                        )
                    results.append(self._tune_width(evaluator, device_id, width, width_deadline))
                    if self.stop.requested:
                        break
                for index, width in enumerate(self.filter_widths[: len(results)]):
                    if self.stop.requested or (deadline is not None and time.monotonic() >= deadline):
                        break
                    if self._cross_check(evaluator, device_id, width):
                        results[index] = self._summary_of(device_id, width)
        except BaseException as exc:
            # Record how it ended if the database still can; the error itself goes on up.
            with contextlib.suppress(AutotuneError):
                self.store.set_run_status(
                    self.run_id, "interrupted" if isinstance(exc, KeyboardInterrupt) else status
                )
            raise
        self.store.set_run_status(self.run_id, "interrupted" if self.stop.requested else "finished")
        return results

    # -- one filter width ----------------------------------------------------

    def _tune_width(
        self, evaluator: Evaluator, device_id: int, width: int, deadline: float | None
    ) -> WidthResult:
        assert self.run_id is not None
        space = evaluator.space
        problem = Problem(width, self.image_size[0], self.image_size[1], seed=0)
        problem_id = self.store.problem_id(width, *self.image_size)
        result = WidthResult(width, problem)
        search = Search(
            space,
            self.sampler,
            self.seed + width,
            valid=lambda c: not space.violations(c, {"filter_width": width}, self.device),
        )

        known: dict[str, Trial] = {}  # config key -> first measurement on this device and problem
        mine = 0
        for trial in self.store.trials(device_id=device_id, problem_id=problem_id):
            counted = trial.origin != "retime" and trial.status != Status.INVALID.value
            if trial.run_id == self.run_id and counted:
                mine += 1
                if trial.status != Status.OK.value:
                    result.failures[trial.status] += 1
            key = self._current_key(trial, width)
            if trial.origin in ("retime", "cached") or key is None or key in known:
                continue
            known[key] = trial
            if trial.status != Status.INVALID.value:
                search.add_history(json.loads(key), trial.time_ms if trial.status == "ok" else None)
        measured_here = {t.config_key for t in self.store.trials(run_id=self.run_id, problem_id=problem_id)}

        queued: dict[str, str] = {}  # config key -> why it was put first
        for preset in space.presets.values():
            queued.setdefault(config_key(preset.config), "preset")
        for config in self._neighbour_bests(device_id, width):
            queued.setdefault(config_key(config), "warm")
        for key in queued:
            if key not in measured_here:
                search.enqueue(json.loads(key))

        total = self.budget.trials
        self.listener("width", {"filter_width": width, "total": total, "done": mine})
        result.trials = mine
        pool = self.compile_pool
        lookahead = pool.size if pool is not None else 1
        pending: deque[_Pending] = deque()
        invalid_in_a_row = 0
        asking = True
        while not self.stop.requested and (total is None or result.trials < total):
            # Keep `lookahead` valid points in flight: their compiles run while one is timed.
            while (
                asking
                and len(pending) < lookahead
                and (total is None or result.trials + len(pending) < total)
            ):
                if (deadline is not None and time.monotonic() >= deadline) or search.exhausted:
                    asking = False
                    break
                asked = search.ask()
                if asked is None:  # every valid point has been measured
                    asking = False
                    break
                optuna_trial, config = asked
                key = config_key(config)
                reasons = space.violations(config, {"filter_width": width}, self.device)
                if reasons:
                    search.tell(optuna_trial, None)
                    if key not in known:
                        known[key] = self._record(
                            Measurement(Status.INVALID, error="; ".join(reasons)),
                            config,
                            key,
                            "sampler",
                            device_id,
                            problem_id,
                            -1,
                        )
                    invalid_in_a_row += 1
                    asking = invalid_in_a_row < MAX_INVALID_IN_A_ROW
                    continue
                invalid_in_a_row = 0
                item = _Pending(optuna_trial, config, key, queued.pop(key, "sampler"))
                if key not in known and all(p.key != key for p in pending):
                    item.variant = generate(config, width, space, problem.taps())
                    item.future = pool.submit(item.variant) if pool is not None else None
                pending.append(item)
            if not pending:
                break
            item = pending.popleft()
            if item.key in known:
                record = self._record_cached(known[item.key], result.trials, device_id, problem_id)
            else:
                variant = item.variant or generate(item.config, width, space, problem.taps())
                measurement = self._measure(evaluator, variant, problem, item.future)
                record = self._record(
                    measurement,
                    item.config,
                    item.key,
                    item.origin,
                    device_id,
                    problem_id,
                    result.trials,
                    variant.fingerprint,
                )
                known[item.key] = record
            search.tell(item.trial, record.time_ms if record.status == Status.OK.value else None)
            result.trials += 1
            if record.status != Status.OK.value:
                result.failures[record.status] += 1
            self.listener(
                "trial",
                {
                    "filter_width": width,
                    "trial": record,
                    "done": result.trials,
                    "total": total,
                    "failures": dict(result.failures),
                },
            )
        for item in pending:  # asked but not needed: budget, time or Ctrl-C
            if item.future is not None:
                item.future.cancel()

        result.interrupted = self.stop.requested
        if not self.stop.requested:
            self._retime(evaluator, device_id, problem_id, problem, result)
        self._summarise(device_id, problem_id, result)
        self.listener("width_done", {"filter_width": width, "result": result})
        return result

    def _cross_check(self, evaluator: Evaluator, device_id: int, width: int) -> bool:
        """Try the other widths' winners that this width has not measured (re-timing the
        top few if one beat its best); True if any was measured. A width tuned early never
        saw the winners of widths tuned after it (F = 17 goes before 33, whose winner is
        also fast at 17)."""
        space = evaluator.space
        problem = Problem(width, self.image_size[0], self.image_size[1], seed=0)
        problem_id = self.store.problem_id(width, *self.image_size)
        trials = self.store.trials(device_id=device_id, problem_id=problem_id)
        current = [(key, t) for t in trials if (key := self._current_key(t, width)) is not None]
        measured = {key for key, _ in current}
        best_before = min(
            (t.time_ms for _, t in current if t.status == Status.OK.value and t.time_ms is not None),
            default=float("inf"),
        )
        candidates = [
            config
            for config in self._neighbour_bests(device_id, width)
            if config_key(config) not in measured
            and not space.violations(config, {"filter_width": width}, self.device)
        ]
        pool = self.compile_pool
        variants = [generate(config, width, space, problem.taps()) for config in candidates]
        futures = [pool.submit(v) if pool is not None else None for v in variants]
        counted = [t for t in trials if t.origin not in ("retime", "cached")]
        number = sum(1 for t in counted if t.status != Status.INVALID.value)
        improved = False
        for done, (config, variant, future) in enumerate(zip(candidates, variants, futures, strict=True)):
            if self.stop.requested:
                break
            measurement = self._measure(evaluator, variant, problem, future)
            record = self._record(
                measurement,
                config,
                config_key(config),
                "warm",
                device_id,
                problem_id,
                number + done,
                variant.fingerprint,
            )
            improved |= record.status == Status.OK.value and (record.time_ms or best_before) < best_before
            self.listener(
                "cross_check",
                {"filter_width": width, "trial": record, "done": done + 1, "total": len(candidates)},
            )
        for future in futures:
            if future is not None:
                future.cancel()
        if improved and not self.stop.requested:
            self._retime(evaluator, device_id, problem_id, problem, WidthResult(width, problem))
        return bool(candidates)

    @staticmethod
    def _measure(
        evaluator: Evaluator, variant: KernelVariant, problem: Problem, future: Future[Compiled] | None
    ) -> Measurement:
        """Time a variant, with the binary compiled ahead when there is one (a failed
        compile is the trial's answer)."""
        compiled = future.result() if future is not None else None
        if compiled is not None and compiled.status is not Status.OK:
            return compiled.as_failure()
        return evaluator.worker.measure(variant, problem, evaluator.policy, compiled)

    def _current_key(self, trial: Trial, width: int) -> str | None:
        """The trial's config key if what it measured is the kernel this release renders
        for that config (invalid points: always), else None: a time measured on another
        template's kernel says nothing about today's."""
        key = self._key(trial, convolution_space())
        if key is None or trial.status == Status.INVALID.value:
            return key
        if (width, key) not in self._fingerprints:
            try:
                taps = Problem(width, *self.image_size).taps()
                fingerprint: str | None = generate(json.loads(key), width, taps=taps).fingerprint
            except UsageError:
                fingerprint = None
            self._fingerprints[width, key] = fingerprint
        current = self._fingerprints[width, key]
        return key if current is not None and trial.kernel_sha == current else None

    @staticmethod
    def _key(trial: Trial | Best, space: Any) -> str | None:
        """The trial's config key under the current space (rows written before a knob
        existed get its default), or None for a config from another space."""
        try:
            return config_key(space.complete(json.loads(trial.config)))
        except UsageError:
            return None

    def _record_cached(self, earlier: Trial, number: int, device_id: int, problem_id: int) -> Trial:
        """A point measured before on this device and problem: answered, not re-run."""
        answer = Measurement(
            Status(earlier.status),
            error=earlier.error,
            time_ms=earlier.time_ms,
            min_ms=earlier.min_ms,
            max_ms=earlier.max_ms,
            max_error=earlier.max_error,
        )
        config = json.loads(earlier.config)
        return self._record(
            answer, config, earlier.config_key, "cached", device_id, problem_id, number, earlier.kernel_sha
        )

    def _record(
        self,
        m: Measurement,
        config: Config,
        key: str,
        origin: str,
        device_id: int,
        problem_id: int,
        number: int,
        kernel_sha: str | None = None,
    ) -> Trial:
        assert self.run_id is not None
        return self.store.add_trial(
            run_id=self.run_id,
            device_id=device_id,
            problem_id=problem_id,
            number=number,
            origin=origin,
            config=json.dumps(config),
            config_key=key,
            status=m.status.value,
            time_ms=m.time_ms,
            min_ms=m.min_ms,
            max_ms=m.max_ms,
            runs=m.runs,
            compile_ms=m.compile_ms,
            max_error=m.max_error,
            error=m.error,
            kernel_sha=kernel_sha if m.status is not Status.INVALID else None,
        )

    def _neighbour_bests(self, device_id: int, width: int) -> list[Config]:
        """Best configs of this device at other filter widths, nearest first (same image
        size). Far widths count too: F = 33's winner is also fast at F = 17 and leads the
        search into a region it would not reach from F = 9 or 11."""
        space = convolution_space()
        rows = [
            (abs(problem.filter_width - width), key)
            for best, _, problem in self.store.best(device_id=device_id)
            if problem.filter_width != width
            and (problem.out_width, problem.out_height) == tuple(self.image_size)
            and (key := self._key(best, space)) is not None  # a config from another space: skipped
        ]
        rows.sort(key=lambda item: item[0])
        configs: list[Config] = []
        for _, key in rows:
            config = json.loads(key)
            if config not in configs:
                configs.append(config)
        return configs[:WARM_START_WIDTHS]

    def _retime(
        self, evaluator: Evaluator, device_id: int, problem_id: int, problem: Problem, result: WidthResult
    ) -> None:
        """Re-time the top few side by side, several rounds, before naming a winner."""
        ok = [
            t
            for t in self.store.trials(device_id=device_id, problem_id=problem_id)
            if t.status == Status.OK.value
            and t.origin not in ("retime", "cached")
            and self._current_key(t, problem.filter_width) is not None
        ]
        if not ok:
            return
        ok.sort(key=lambda t: t.time_ms or float("inf"))
        candidates: list[Trial] = []
        for trial in ok:
            if trial.config_key not in {c.config_key for c in candidates}:
                candidates.append(trial)
            if len(candidates) >= self.retime_top:
                break
        rounds = self.retime_rounds if len(candidates) > 1 else 1
        times: dict[str, list[float]] = {c.config_key: [] for c in candidates}
        last: dict[str, Trial] = {}
        for _ in range(rounds):
            for candidate in candidates:
                if self.stop.requested:
                    return
                config = json.loads(candidate.config)
                m = evaluator.evaluate(config, problem)
                last[candidate.config_key] = self._record(
                    m,
                    config,
                    candidate.config_key,
                    "retime",
                    device_id,
                    problem_id,
                    -1,
                    candidate.kernel_sha,
                )
                if m.ok and m.time_ms is not None:
                    times[candidate.config_key].append(m.time_ms)
        scored = [(statistics.median(v), k) for k, v in times.items() if len(v) == rounds]
        if not scored:
            return
        time_ms, winner_key = min(scored)
        self.store.set_best(device_id, problem_id, last[winner_key], time_ms)

    def _summary_of(self, device_id: int, width: int) -> WidthResult:
        problem_id = self.store.problem_id(width, *self.image_size)
        result = WidthResult(width, Problem(width, self.image_size[0], self.image_size[1]))
        for trial in self.store.trials(run_id=self.run_id, problem_id=problem_id):
            if trial.origin != "retime" and trial.status != Status.INVALID.value:
                result.trials += 1
                if trial.status != Status.OK.value:
                    result.failures[trial.status] += 1
        self._summarise(device_id, problem_id, result)
        return result

    def _summarise(self, device_id: int, problem_id: int, result: WidthResult) -> None:
        space = convolution_space()
        for best, _, problem in self.store.best(device_id=device_id):
            if problem.id == problem_id:
                result.best_ms = best.time_ms
                result.best_config = space.read_stored(best.config)
        if result.best_ms is None:  # interrupted before re-timing: the best seen so far
            ok = [
                t
                for t in self.store.trials(run_id=self.run_id, problem_id=problem_id)
                if t.status == Status.OK.value and t.time_ms is not None
            ]
            if ok:
                top = min(ok, key=lambda t: t.time_ms or 0.0)
                result.best_ms, result.best_config = top.time_ms, space.read_stored(top.config)
        presets = {config_key(p.config): name for name, p in space.presets.items()}
        seed_times: dict[str, float] = {}
        for t in self.store.trials(device_id=device_id, problem_id=problem_id):
            key = self._current_key(t, result.filter_width)
            if t.status == Status.OK.value and key in presets and t.time_ms is not None:
                name = presets[key]
                seed_times[name] = min(seed_times.get(name, float("inf")), t.time_ms)
        result.baseline_ms = seed_times.get("baseline")
        if seed_times:
            result.best_seed_preset, result.best_seed_ms = min(seed_times.items(), key=lambda kv: kv[1])
