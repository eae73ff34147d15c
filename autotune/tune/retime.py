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

#: Besides the top few, every first measurement within this fraction of the fastest is re-timed,
#: up to `RETIME_MOST` kernels. A GPU's speed moves between levels 4-6% apart for seconds at a
#: time, every kernel at once (an H100 timing ten kernels five rounds over, nothing else
#: running: `bench/measure_repeatability.py`), so a kernel first timed at the slow level reads
#: up to 6% high: an H200 search at F = 9 measured the kernel it should have named 2.5% above
#: the fastest, one at F = 11 1.9% above (side by side it ran 0.0784 ms against 0.0809).
RETIME_WITHIN = 0.06
RETIME_MOST = 12


def retime_candidates(
    ok: list[Trial], top: int, within: float = RETIME_WITHIN, most: int = RETIME_MOST
) -> list[Trial]:
    """The distinct kernels to re-time, fastest first: the `top` fastest, then those whose
    first measurement is within `within` of the fastest, `max(top, most)` in all."""
    ranked = sorted((t for t in ok if t.time_ms is not None), key=lambda t: t.time_ms or 0.0)
    candidates: list[Trial] = []
    seen: set[str] = set()
    for trial in ranked:
        if trial.config_key in seen:
            continue
        if len(candidates) >= max(top, most):
            break
        if len(candidates) >= top and (trial.time_ms or 0.0) > (ranked[0].time_ms or 0.0) * (1.0 + within):
            break
        candidates.append(trial)
        seen.add(trial.config_key)
    return candidates


def retime(
    ledger: Ledger,
    evaluator: Evaluator,
    top: int,
    rounds: int,
    stopped: Callable[[], bool],
    within: float = RETIME_WITHIN,
    most: int = RETIME_MOST,
) -> None:
    """Re-time the candidates (`retime_candidates`) for `rounds` rounds, each round one
    measurement of them all in turns of a few runs each (`Evaluator.measure_together`): a
    GPU's speed moves between levels 4-6% apart for seconds at a time, which one kernel timed
    after another reads as a difference between them. The one fastest round by round
    (`round_winner`) becomes the best kernel of (device, problem). The order turns each
    round, so no kernel always goes first. A stop is seen between rounds (a round is one
    request to the worker)."""
    candidates = retime_candidates(ledger.ok_first(), top, within, most)
    if not candidates:
        return
    rounds = rounds if len(candidates) > 1 else 1
    times: dict[str, list[float]] = {c.config_key: [] for c in candidates}
    last: dict[str, Trial] = {}
    for r in range(rounds):  # each round starts one candidate later: none always goes first
        if stopped():
            return
        turn = candidates[r % len(candidates) :] + candidates[: r % len(candidates)]
        configs = [json.loads(candidate.config) for candidate in turn]
        for candidate, config, m in zip(
            turn, configs, evaluator.measure_together(configs, ledger.problem), strict=True
        ):
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
