"""Before a winner is named: the top few re-timed side by side over several rounds
(noise picks false winners otherwise), and other problems' winners tried on problems
tuned before those winners were found."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from typing import Any

from autotune.evaluate import Evaluator
from autotune.outcomes import Origin, Status
from autotune.space import Config
from autotune.store import Trial, config_key
from autotune.tune.ledger import Ledger


def retime(ledger: Ledger, evaluator: Evaluator, top: int, rounds: int, stopped: Callable[[], bool]) -> None:
    """Re-time the `top` fastest points interleaved for `rounds` rounds; the one fastest
    round by round (`round_winner`) becomes the best kernel of (device, problem)."""
    ok = sorted(ledger.ok_first(), key=lambda t: t.time_ms or float("inf"))
    candidates: list[Trial] = []
    for trial in ok:
        if trial.config_key not in {c.config_key for c in candidates}:
            candidates.append(trial)
        if len(candidates) >= top:
            break
    if not candidates:
        return
    rounds = rounds if len(candidates) > 1 else 1
    times: dict[str, list[float]] = {c.config_key: [] for c in candidates}
    last: dict[str, Trial] = {}
    for _ in range(rounds):
        for candidate in candidates:
            if stopped():
                return
            config = json.loads(candidate.config)
            m = evaluator.evaluate(config, ledger.problem)
            last[candidate.config_key] = ledger.record(
                m, config, candidate.config_key, Origin.RETIME, -1, candidate.kernel_sha
            )
            if m.ok and m.time_ms is not None:
                times[candidate.config_key].append(m.time_ms)
    complete = {k: v for k, v in times.items() if len(v) == rounds}
    if complete:
        winner = round_winner(complete)
        ledger.store.set_best(
            ledger.device_id, ledger.problem_id, last[winner], statistics.median(complete[winner])
        )


def round_winner(times: dict[str, list[float]]) -> str:
    """The candidate with the lowest median, over rounds, of its time over the round's
    fastest (ties: the lower median time). Each round compares kernels timed moments apart, so
    a GPU whose clocks settle during the rounds (an H200 F = 9 re-time ran 0.063 ms in its
    first round and 0.059 in its last) does not hand the win to whichever kernel ran fast in
    the middle round."""
    rounds = min(len(v) for v in times.values())
    fastest = [min(v[r] for v in times.values()) for r in range(rounds)]
    score = {k: statistics.median(v[r] / fastest[r] for r in range(rounds)) for k, v in times.items()}
    return min(times, key=lambda k: (score[k], statistics.median(times[k])))


def cross_check(
    ledger: Ledger,
    evaluator: Evaluator,
    winners: list[Config],
    compile_ahead: Callable[[Any], Any],
    stopped: Callable[[], bool],
    on_trial: Callable[[Trial, int, int], None],
) -> tuple[int, bool]:
    """Measure the other problems' winners this problem has not measured; returns how
    many were tried and whether one beat the best so far."""
    family, problem, device = ledger.family, ledger.problem, evaluator.device
    measured = {key for key, _ in ledger.measurements()}
    best_before = ledger.best_ms()
    candidates = [
        config
        for config in winners
        if config_key(config) not in measured and not family.violations(config, problem, device)
    ]
    variants = [family.render(config, problem) for config in candidates]
    futures = [compile_ahead(v) for v in variants]
    number = ledger.numbered()
    improved = False
    try:
        for done, (config, variant, future) in enumerate(zip(candidates, variants, futures, strict=True)):
            if stopped():
                break
            m = evaluator.measure(variant, problem, future)
            record = ledger.record(
                m, config, config_key(config), Origin.WARM, number + done, variant.fingerprint
            )
            improved |= record.status == Status.OK and (record.time_ms or best_before) < best_before
            on_trial(record, done + 1, len(candidates))
    finally:
        for future in futures:
            if future is not None:
                future.cancel()
    return len(candidates), improved
