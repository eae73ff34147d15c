"""Tune kernels of one family on a device: the search loop per problem, every trial
persisted.

Order per problem: the family's seed presets (so the result is never worse than the
seed kernels), then the best configs of other problems on the same device (warm
start), then the fastest configs other devices measured for this kind, then the
sampler. Start points this device measured for the problem in any run are left out
(the sampler learns them from the history), and points already measured are answered
from the ledger. The loop per problem is ask -> compile ahead -> measure ->
record; at the end the top few are re-timed interleaved and the winner becomes the best
kernel for (device, problem).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from autotune import __version__
from autotune.compiler import CompilePool, default_compilers
from autotune.devices import DeviceInfo
from autotune.errors import AutotuneError
from autotune.evaluate import Evaluator
from autotune.families import KernelFamily, KernelVariant, Problem
from autotune.families.base import size_distance
from autotune.outcomes import Compiled, Origin, Status, TimingPolicy
from autotune.search import DEFAULT_SAMPLER, Search, SearchOptions, by_rank
from autotune.space import Config
from autotune.store import Store, config_key, lease_owner, now
from autotune.tune.control import LEASE_STALE_S, Heartbeat, StopFlag
from autotune.tune.ledger import Ledger
from autotune.tune.retime import RETIME_MOST, cross_check, retime
from autotune.tune.shared import SharedSearch, check_shared, shared_sampler
from autotune.tune.studies import Studies
from autotune.tune.summary import ProblemResult, summarise

WARM_START = 8  # warm start: up to this many distinct best configs of other problems, nearest first
# ... and then the fastest configs each other device of the same type measured for this
# kind, this many from each: replayed searches started from other GPUs' five fastest were
# within 0.3% of the optimum after 50 evaluations on 10 of 11 landscapes (median; one from
# each did worse, three no better; BENCHMARKS.md, "Searches started from other devices' results").
OTHER_DEVICES = 5


@dataclass(frozen=True)
class Budget:
    trials: int | None = 60  # per problem, counting measured and cached points
    time_s: float | None = None  # for the whole search, shared among problems


Listener = Callable[[str, dict[str, Any]], None]


@dataclass
class _Pending:
    """A point asked of the sampler, waiting for its turn on the device."""

    trial: Any
    config: Config
    key: str
    origin: Origin
    variant: KernelVariant | None = None
    future: Future[Compiled] | None = None


class Tuner:
    def __init__(
        self,
        store: Store,
        device_index: int,
        device: DeviceInfo,
        family: KernelFamily,
        problems: list[Problem],
        sampler: str = DEFAULT_SAMPLER,
        seed: int = 0,
        budget: Budget | None = None,
        policy: TimingPolicy | None = None,
        retime_top: int = 3,
        retime_rounds: int = 3,
        retime_most: int = RETIME_MOST,
        fresh: bool = False,
        listener: Listener | None = None,
        compilers: int | None = None,
        evaluator: Any = None,
        warm_start: int = WARM_START,
        other_devices: int = OTHER_DEVICES,
        search_options: SearchOptions | None = None,
        studies: bool = True,
        shared: bool = False,
    ) -> None:
        """`evaluator`: what measures (default: an Evaluator on the device, in a worker
        process); anything with `device`, `evaluate` and `measure` will do.
        `search_options`: the `gp` sampler's settings (default: `SearchOptions()`).
        `studies`: keep each problem's trials as an Optuna study in the database too.
        `shared`: search with every other shared worker of the device model, through
        those studies (`autotune.tune.shared`; the sampler is gp, tpe or random)."""
        self.store = store
        self.device_index = device_index
        self.device = device
        self.family = family
        self.problems = problems
        self.sampler = sampler
        self.seed = seed
        self.budget = budget or Budget()
        self.policy = policy
        self.retime_top = retime_top
        self.retime_rounds = retime_rounds
        self.retime_most = retime_most  # with those within RETIME_WITHIN of the fastest
        self.fresh = fresh
        self.compilers = compilers  # processes compiling ahead; None: all but one core on GPUs, none on CPUs
        self.compile_pool: CompilePool | None = None
        self.listener = listener or (lambda kind, data: None)
        self.stop = StopFlag()
        self.run_id: int | None = None
        self.resumed = False
        self.already_finished = False
        self.device_id: int | None = None
        self.evaluator = evaluator
        self.warm_start = warm_start
        self.other_devices = other_devices
        self.owner = lease_owner()
        self.lease_lost = False
        self.search_options = search_options
        self.studies = studies or shared
        self.shared = shared
        if shared:
            check_shared(sampler, fresh, store.url)
        self._studies: Studies | None = None  # once the run is open

    # -- the run ----------------------------------------------------------------

    def _run_key(self) -> str:
        return json.dumps(
            {
                **self.family.run_key(self.problems),
                "sampler": self.sampler,
                "seed": self.seed,
                "trials": self.budget.trials,
                "time": self.budget.time_s,
                "space": self.family.space.fingerprint,
                # only when not the default: runs of earlier releases keep their keys
                **({"other_devices": self.other_devices} if self.other_devices != OTHER_DEVICES else {}),
            },
            sort_keys=True,
        )

    def _start(self) -> bool:
        """Open this search's run (resumed, or new); False if it is already finished."""
        self.device_id = self.store.device_id(self.device)
        key = self._run_key()
        fields = {
            "family": self.family.name,
            "problems": json.dumps([p.key() for p in self.problems], separators=(",", ":")),
            "sampler": self.sampler,
            "seed": self.seed,
            "trials_budget": self.budget.trials,
            "time_budget_s": self.budget.time_s,
            "tool_version": __version__,
        }
        if self.fresh or self.shared:  # a shared search: a run of this worker's own
            self.run_id = self.store.start_run(
                owner=self.owner, device_id=self.device_id, key=key, **fields
            ).id
        else:
            run, state = self.store.open_run(self.device_id, key, self.owner, LEASE_STALE_S, **fields)
            self.run_id = run.id
            if state == "finished":
                # The same search is already done: report it instead of measuring again.
                self.already_finished = True
                self.listener("run", {"run_id": self.run_id, "resumed": False, "finished": True})
                return False
            if state == "held":
                since = (now() - run.heartbeat_at).total_seconds() if run.heartbeat_at else None
                beat = f", heard from {since:.0f} s ago" if since is not None else ""
                raise AutotuneError(
                    f"run {run.id} is this same search, being measured now by {run.owner}{beat}: "
                    "wait for it (the same command then reports it), or use --fresh for a run of your own"
                )
            self.resumed = state == "resumed"
        self.listener("run", {"run_id": self.run_id, "resumed": self.resumed, "finished": False})
        return True

    def _lost_lease(self) -> None:
        """Another process took the run over: stop after the current trial."""
        self.lease_lost = True
        self.stop.requested = True

    def run(self) -> list[ProblemResult]:
        if not self._start():
            return [self.summary(problem) for problem in self.problems]
        assert self.run_id is not None
        if self.studies:
            self._studies = Studies(self.store, self.family, self.device, mirror_records=not self.shared)
        results: list[ProblemResult] = []
        deadline = time.monotonic() + self.budget.time_s if self.budget.time_s else None
        try:
            compilers = self.compilers
            if compilers is None:
                compilers = 0 if self.device.is_cpu or self.evaluator is not None else default_compilers()
            measuring = self.evaluator or Evaluator(self.device_index, self.family, policy=self.policy)
            with (
                Heartbeat(self.store, self.run_id, self.owner, self._lost_lease),
                self.stop.installed(),
                measuring as evaluator,
                CompilePool(self.device_index, compilers) if compilers > 0 else nullcontext() as pool,
            ):
                self.compile_pool = pool
                for position, problem in enumerate(self.problems):
                    share = None
                    if deadline is not None:
                        left = max(0.0, deadline - time.monotonic())
                        share = time.monotonic() + left / (len(self.problems) - position)
                    results.append(self._tune(evaluator, problem, share))
                    if self.stop.requested:
                        break
                for index, problem in enumerate(self.problems[: len(results)]):
                    if self.stop.requested or (deadline is not None and time.monotonic() >= deadline):
                        break
                    if self._cross_check(evaluator, problem):
                        results[index] = self.summary(problem)
        except BaseException as exc:
            # Record how it ended if the database still can; the error itself goes on up.
            with contextlib.suppress(AutotuneError):
                status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
                self.store.set_run_status(self.run_id, status, owner=self.owner)
            raise
        status = "interrupted" if self.stop.requested else "finished"
        if self.lease_lost or not self.store.set_run_status(self.run_id, status, owner=self.owner):
            raise AutotuneError(
                f"run {self.run_id} was taken over by another process while this one measured it "
                "(no heartbeat for too long); this process stopped, every trial it finished is saved"
            )
        return results

    def _ledger(self, problem: Problem) -> Ledger:
        assert self.device_id is not None and self.run_id is not None
        problem_id = self.store.problem_id(self.family.name, problem.key())
        ledger = Ledger(self.store, self.family, problem, self.device_id, problem_id, self.run_id)
        if self._studies is not None:
            self._studies.attach(ledger, problem)
        return ledger

    def _label(self, problem: Problem) -> str:
        return self.family.describe_kind(problem.kind())

    def _compile_ahead(self, variant: KernelVariant) -> Future[Compiled] | None:
        return self.compile_pool.submit(variant) if self.compile_pool is not None else None

    # -- one problem --------------------------------------------------------------

    def _tune(self, evaluator: Evaluator, problem: Problem, deadline: float | None) -> ProblemResult:
        family, label = self.family, self._label(problem)
        ledger = self._ledger(problem)
        result = ProblemResult(problem, label)
        seed = self.seed + _seed_offset(problem)

        def valid(config: Config) -> bool:
            return not family.violations(config, problem, self.device)

        def violations(config: Config) -> int:
            return len(family.violations(config, problem, self.device))

        live = family.space.live_values(problem.key(), self.device)  # what gp models
        if not self.shared:
            search: Any = Search(
                family.space,
                self.sampler,
                seed,
                valid=valid,
                options=self.search_options,
                violations=violations,
                live_values=live,
            )
        else:
            assert self._studies is not None
            seed += 7919 * (self.run_id or 0)  # each worker its own
            sampler = shared_sampler(self.sampler, seed, family.space, valid, self.search_options, live)
            study = self._studies.shared(ledger, problem, sampler)
            search = SharedSearch(
                self.store,
                study,
                family.space,
                valid,
                self.budget.trials,
                seed,
                violations=violations,
                run_id=self.run_id,
            )
        for key, trial in ledger.first.items():
            if trial.status != Status.INVALID:
                search.add_history(json.loads(key), trial.time_ms if trial.status == Status.OK else None)
        # Start points this device measured for the problem (in any run) are not queued:
        # the sampler knows them from the history, and a known point it is asked for
        # again is repaired to an unmeasured neighbour nobody chose.
        measured_here = set(ledger.first) | ledger.keys_in_run()
        queued: dict[str, Origin] = {}  # config key -> why it goes first
        for config in family.presets_for(problem, self.device):
            queued.setdefault(config_key(config), Origin.PRESET)
        for config in self._winners_elsewhere(problem):
            queued.setdefault(config_key(config), Origin.WARM)
        for config in self._fastest_on_other_devices(problem, measured_here):
            queued.setdefault(config_key(config), Origin.OTHER_DEVICE)
        for key in queued:
            if key not in measured_here:
                search.enqueue(json.loads(key))

        total = self.budget.trials
        result.trials, result.failures = ledger.counted()
        self.listener("problem", {"label": label, "problem": problem, "total": total, "done": result.trials})
        lookahead = self.compile_pool.size if self.compile_pool is not None else 1
        pending: deque[_Pending] = deque()
        asking = True

        def ask_ahead(measuring: _Pending | None) -> None:
            """Keep `lookahead` valid points asked beyond the one being measured: their
            compiles run while one is timed."""
            nonlocal asking
            while (
                asking
                and not self.stop.requested
                and len(pending) < lookahead
                and (total is None or result.trials + (measuring is not None) + len(pending) < total)
            ):
                asked = None
                if not (deadline is not None and time.monotonic() >= deadline) and not search.exhausted:
                    asked = search.ask()  # only valid points; None once every one is measured
                if asked is None:
                    asking = False
                    return
                optuna_trial, config = asked
                key = config_key(config)
                item = _Pending(optuna_trial, config, key, queued.pop(key, Origin.SAMPLER))
                ahead = [*pending, measuring] if measuring is not None else pending
                pending.append(item)  # before rendering: given back if anything below fails
                if key not in ledger.first and all(p.key != key for p in ahead):
                    item.variant = family.render(config, problem)
                    item.future = self._compile_ahead(item.variant)

        untold: list[_Pending] = []  # the point being measured, until it is told
        try:
            while not self.stop.requested and (total is None or result.trials < total):
                if not pending:
                    ask_ahead(None)
                if not pending:
                    break
                item = pending.popleft()
                untold.append(item)
                if item.key in ledger.first:
                    ask_ahead(item)
                    record = ledger.record_cached(ledger.first[item.key], result.trials)
                else:
                    variant = item.variant or family.render(item.config, problem)
                    if self.compile_pool is None:  # a CPU: the sampler's fit would slow the timed runs
                        m = evaluator.measure(variant, problem, item.future)
                    else:
                        # The next point is asked while the worker times this one (or, while
                        # its compile is still running, before waiting for it).
                        compiled = item.future
                        if compiled is not None and not compiled.done():
                            ask_ahead(item)
                        measurement = evaluator.start(variant, problem, compiled)
                        try:
                            ask_ahead(item)
                        finally:  # the worker answers before anything else is sent to it
                            m = measurement()
                    record = ledger.record(
                        m, item.config, item.key, item.origin, result.trials, variant.fingerprint
                    )
                search.tell(item.trial, record.time_ms if record.status == Status.OK else None, record)
                untold.clear()
                result.trials += 1
                if record.status != Status.OK:
                    result.failures[record.status] += 1
                self.listener(
                    "trial",
                    {
                        "label": label,
                        "trial": record,
                        "done": result.trials,
                        "total": total,
                        "failures": dict(result.failures),
                    },
                )
        finally:  # asked but not measured (a stop, an error): given back
            _give_back(search, [*untold, *pending])

        result.interrupted = self.stop.requested
        if self.shared:
            ledger = self._ledger(problem)  # what every worker measured
        if not self.stop.requested:
            self._retime(ledger, evaluator)
        summarise(ledger, result)
        self.listener("problem_done", {"label": label, "result": result})
        return result

    def _retime(self, ledger: Ledger, evaluator: Evaluator) -> None:
        retime(
            ledger,
            evaluator,
            self.retime_top,
            self.retime_rounds,
            lambda: self.stop.requested,
            most=self.retime_most,
        )

    def _cross_check(self, evaluator: Evaluator, problem: Problem) -> bool:
        """Try the other problems' winners that this one has not measured (re-timing the
        top few if one beat its best); True if any was measured. A problem tuned early
        never saw the winners of problems tuned after it (F = 17 goes before 33, whose
        winner is also fast at 17)."""
        ledger, label = self._ledger(problem), self._label(problem)

        def on_trial(record: Any, done: int, total: int) -> None:
            self.listener("cross_check", {"label": label, "trial": record, "done": done, "total": total})

        tried, improved = cross_check(
            ledger,
            evaluator,
            self._winners_elsewhere(problem),
            self._compile_ahead,
            lambda: self.stop.requested,
            on_trial,
        )
        if improved and not self.stop.requested:
            self._retime(ledger, evaluator)
        return tried > 0

    def _winners_elsewhere(self, problem: Problem) -> list[Config]:
        """Best configs of this device for other problems of the family: first those of
        related kinds (for convolution the same filter width with other pixels, border
        or batch) at any size, nearest first, then other kinds at the same size, nearest
        first. Far ones count too: F = 33's winner is also fast at F = 17 and leads the
        search into a region it would not reach from F = 9 or 11. A related kind's winner
        is where a search of a new kind starts best: on the H200 a 30-trial search of a
        batch of 512x512 frames at F = 9 ended 23% slower than the 4096x4096 kind's winner.
        It comes first as the lookup would lend it (`adapt_related`), then as it is: a uint8
        'same' search on the H200 that took the 'valid' winners as they were never tried them
        with edge work-groups (BENCHMARKS.md, "Edge outputs in work-groups of their own")."""
        kind = problem.kind()
        rows = []
        for best, _, row in self.store.best(device_id=self.device_id, family=self.family.name):
            other = self.family.problem(row.fields)
            config = self.family.read_config(best.config)
            if other.kind() == kind or config is None:
                continue
            related = self.family.related_kind_distance(kind, other.kind())
            if related is not None:
                # as the lookup lends it (a 'same' problem's edge handled its own way); as it
                # is after every related kind's lent one, where valid here
                distance = size_distance(other.size, problem.size)
                rows.append(((0, related, distance), self.family.adapt_related(config, problem, self.device)))
                if not self.family.violations(config, problem, self.device):
                    rows.append(((1, related, distance), config))
            elif other.size == problem.size:
                fitted = self.family.fit_warm_start(config, problem, self.device)
                rows.append(((2, self.family.warm_start_distance(kind, other.kind()), 0.0), fitted))
        rows.sort(key=lambda item: item[0])
        configs: list[Config] = []
        for _, config in rows:
            if config not in configs:
                configs.append(config)
        return configs[: self.warm_start]

    def _fastest_on_other_devices(self, problem: Problem, measured_here: set[str]) -> list[Config]:
        """The `other_devices` fastest configs each other device of this type measured
        for this problem's kind (the nearest size first), valid here and not measured
        here yet, by rank across devices (`by_rank`: every device's fastest, then every
        device's second, ...; the same model under another driver first, then the same
        vendor); twice `other_devices` in all. Another device's results are the best map
        of the landscape a new device has: two GPUs' optima often share most knobs,
        where a random start shares few."""
        if self.other_devices <= 0 or self.device_id is None:
            return []
        kind = problem.kind()
        distance: dict[int, float] = {}  # problem id -> size distance, for this kind's problems
        for problem_id, row in self.store.problems().items():
            if row.family != self.family.name or row.fields is None:
                continue
            try:
                other = self.family.problem(row.fields)
            except (AutotuneError, TypeError, ValueError):
                continue  # written by a release with other problem fields
            if other.kind() == kind:
                distance[problem_id] = size_distance(other.size, problem.size)
        # A config may fail this device's rules or be measured here already: take a few
        # more than needed from each problem.
        rows = self.store.fastest_elsewhere(list(distance), self.device_id, 4 * self.other_devices)
        found: dict[int, list[tuple[tuple[float, float], str]]] = {}  # device id -> (rank, config text)
        devices = {}
        for device_id, problem_id, time_ms, text, device in rows:
            if device.type == self.device.type:  # a CPU's fastest says little about a GPU
                devices[device_id] = device
                found.setdefault(device_id, []).append(((distance[problem_id], time_ms), text))

        def nearness(device_id: int) -> tuple[bool, bool, int]:
            device = devices[device_id]
            return device.name != self.device.name, device.vendor != self.device.vendor, device_id

        per_device = []
        for device_id in sorted(found, key=nearness):
            configs: list[Config] = []
            for _, text in sorted(found[device_id], key=lambda item: item[0]):
                config = self.family.read_config(text)
                if config is None or config in configs or config_key(config) in measured_here:
                    continue
                if self.family.violations(config, problem, self.device):
                    continue
                configs.append(config)
                if len(configs) == self.other_devices:
                    break
            per_device.append(configs)
        return by_rank(per_device, limit=2 * self.other_devices)

    def summary(self, problem: Problem) -> ProblemResult:
        """What the run found for a problem, from the store alone."""
        ledger = self._ledger(problem)
        result = ProblemResult(problem, self._label(problem))
        result.trials, result.failures = ledger.counted()
        return summarise(ledger, result)


def _give_back(search: Any, items: list[_Pending]) -> None:
    """Points asked and not measured: their compiles cancelled, their claims given back
    (a shared search's other workers may take them). Best effort, and never in place of
    the error that ended the loop: a point told just before a second Ctrl-C cannot be
    given back, and where the database is gone the other workers give the claims back
    once this run's lease is."""
    for item in items:
        if item.future is not None:
            item.future.cancel()
    for item in items:
        with contextlib.suppress(Exception):
            search.release(item.trial)


def _seed_offset(problem: Problem) -> int:
    """Each problem's sampler gets its own seed: the first integer key field (for
    convolution the filter width, as release 0.1.0 did)."""
    return next((v for v in problem.key().values() if type(v) is int), 0)
