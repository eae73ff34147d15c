"""Two adjacent outputs of an F-tap pass from three sums of F // 2 taps (a two-parallel
fast FIR algorithm) instead of two sums of F taps each: once a work-item computes several
output pairs from one run of inputs, about three quarters of the multiply-adds. The plan is
data, so that the template only renders it.

With taps h, L = F // 2, inputs v and outputs y[i] = sum_t h[t] v[i + t]:

    even[m] = sum_{j < L} h[2j] v[2m + 2j]
    odd[n]  = sum_{j < L} h[2j + 1] v[2n + 2j + 1]
    both[n] = sum_{j < L} (h[2j] + h[2j + 1]) (v[2n + 2j + 1] + v[2n + 2j + 2])
    y[2n]     = even[n] + odd[n]                 (+ h[F - 1] v[2n + F - 1] for odd F)
    y[2n + 1] = both[n] - even[n + 1] - odd[n]   (+ h[F - 1] v[2n + F] for odd F)

For N outputs (N even, P = N / 2 pairs) that is (3P + 1) L multiply-adds, P + L - 1 input
pairs added and five operations a pair to combine, against 2P F: counting every operation
alike, fewer from P >= 4 (8 outputs) at F >= 17, from P >= 8 at F >= 13; with 4 outputs
never. Rounding: `both` sums twice the magnitudes the direct sums do and the combination
subtracts, so its worst-case bound is about twice the direct one's; every variant is still
checked against the reference within the problem's tolerance.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    """target += tap * operand: the tap is h[taps[0]] or, for a pair, h[taps[0]] + h[taps[1]];
    the operand is the input of that index (an int) or an input pair's name."""

    target: str
    taps: tuple[int, ...]
    operand: int | str


@dataclass(frozen=True)
class Step:
    """What input `value` feeds once it is loaded: with `pair` (name, a, b) first the sum of
    inputs a and b (b == value), then the terms."""

    value: int
    pair: tuple[str, int, int] | None
    terms: tuple[Term, ...]


@dataclass(frozen=True)
class Output:
    """Output `index` = sum(plus) - sum(minus) (+ h[tap] * input[value] with `last_tap`)."""

    index: int
    plus: tuple[str, ...]
    minus: tuple[str, ...]
    last_tap: tuple[int, int] | None


@dataclass(frozen=True)
class FastFirPlan:
    """The partial sums to declare, what each input feeds in the order inputs are read,
    and how each output is made from the sums."""

    sums: tuple[str, ...]
    steps: tuple[Step, ...]
    outputs: tuple[Output, ...]


@functools.lru_cache(maxsize=64)
def fast_fir_plan(filter_width: int, outputs: int) -> FastFirPlan:
    """The plan for `outputs` (even) adjacent outputs of a `filter_width`-tap pass, reading
    inputs 0 .. outputs + filter_width - 2 in order."""
    if outputs < 2 or outputs % 2:
        raise ValueError(f"fast FIR pairs outputs: need an even count, got {outputs}")
    half, pairs = filter_width // 2, outputs // 2
    sums = [f"even_{n}" for n in range(pairs + 1)]
    sums += [f"odd_{n}" for n in range(pairs)] + [f"both_{n}" for n in range(pairs)]
    steps = []
    for value in range(outputs + filter_width - 1):
        terms: list[Term] = []
        pair = None
        if value % 2 == 0:
            position = value // 2
            terms += [
                Term(f"even_{n}", (2 * (position - n),), value)
                for n in range(pairs + 1)
                if 0 <= position - n < half
            ]
            index = position - 1  # the pair of inputs value - 1 and value
            both = [
                Term(f"both_{n}", (2 * (index - n), 2 * (index - n) + 1), f"pair_{index}")
                for n in range(pairs)
                if 0 <= index - n < half
            ]
            if both:
                pair = (f"pair_{index}", value - 1, value)
                terms += both
        else:
            position = (value - 1) // 2
            terms += [
                Term(f"odd_{n}", (2 * (position - n) + 1,), value)
                for n in range(pairs)
                if 0 <= position - n < half
            ]
        steps.append(Step(value, pair, tuple(terms)))
    odd_width = filter_width % 2 == 1
    results = []
    last = filter_width - 1
    for n in range(pairs):
        extra = ((last, 2 * n + last), (last, 2 * n + 1 + last)) if odd_width else (None, None)
        results.append(Output(2 * n, (f"even_{n}", f"odd_{n}"), (), extra[0]))
        results.append(Output(2 * n + 1, (f"both_{n}",), (f"even_{n + 1}", f"odd_{n}"), extra[1]))
    return FastFirPlan(tuple(sums), tuple(steps), tuple(results))


def evaluate(plan: FastFirPlan, taps: list[float], values: list[float]) -> list[float]:
    """The plan's outputs computed in Python: what the rendered code computes, for tests."""
    sums = dict.fromkeys(plan.sums, 0.0)
    pairs: dict[str, float] = {}
    for step in plan.steps:
        if step.pair:
            name, a, b = step.pair
            pairs[name] = values[a] + values[b]
        for term in step.terms:
            tap = sum(taps[t] for t in term.taps)
            operand = values[term.operand] if isinstance(term.operand, int) else pairs[term.operand]
            sums[term.target] += tap * operand
    results = []
    for output in plan.outputs:
        total = sum(sums[name] for name in output.plus) - sum(sums[name] for name in output.minus)
        if output.last_tap:
            total += taps[output.last_tap[0]] * values[output.last_tap[1]]
        results.append(total)
    return results
