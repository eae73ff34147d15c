"""The fast FIR plan (autotune/families/separable/fast_fir.py) computes what a direct
correlation does, with the multiply-adds its docstring counts."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.families.separable.fast_fir import evaluate, fast_fir_plan


@pytest.mark.parametrize("filter_width", [1, 2, 3, 4, 11, 12, 17, 33])
@pytest.mark.parametrize("outputs", [2, 4, 8, 16])
def test_the_plan_is_a_correlation(filter_width, outputs):
    rng = np.random.default_rng(filter_width * 100 + outputs)
    taps = rng.normal(size=filter_width).tolist()
    values = rng.normal(size=outputs + filter_width - 1).tolist()
    expected = np.correlate(values, taps, mode="valid")
    got = evaluate(fast_fir_plan(filter_width, outputs), taps, values)
    np.testing.assert_allclose(got, expected, atol=1e-12)


@pytest.mark.parametrize("filter_width,outputs", [(33, 16), (33, 8), (17, 16), (12, 4)])
def test_it_costs_what_the_docstring_says(filter_width, outputs):
    plan = fast_fir_plan(filter_width, outputs)
    half, pairs = filter_width // 2, outputs // 2
    assert sum(len(step.terms) for step in plan.steps) == (3 * pairs + 1) * half
    assert sum(step.pair is not None for step in plan.steps) == pairs + half - 1
    assert [output.index for output in plan.outputs] == list(range(outputs))
    # inputs are read in order, each once, and no term uses a pair sum before it exists
    assert [step.value for step in plan.steps] == list(range(outputs + filter_width - 1))
    made: set[str] = set()
    for step in plan.steps:
        made |= {step.pair[0]} if step.pair else set()
        assert all(isinstance(t.operand, int) or t.operand in made for t in step.terms)


def test_odd_output_counts_are_refused():
    with pytest.raises(ValueError, match="even"):
        fast_fir_plan(11, 3)
