"""Which knobs mattered: an Optuna importance evaluator over one problem's
verified trials, loaded into an in-memory study (the search's own trials are in our
tables, not in an Optuna storage)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from autotune.families import KernelFamily

MIN_TRIALS = 4  # fewer verified points say nothing about which knob matters
# PED-ANOVA needs no scikit-learn (fANOVA, Optuna's default evaluator, does); it weighs how
# far each knob's values among the fastest trials differ from its values among all.
METHOD = "PED-ANOVA (optuna.importance) over log time"


def importances(
    family: KernelFamily, measured: Sequence[tuple[dict[str, Any] | None, float | None]], seed: int = 0
) -> dict[str, Any]:
    """{"knobs": {knob: share of the variance of log time}} (largest first), or
    {"knobs": {}, "note": why none} when the trials cannot say."""
    import optuna
    from optuna.distributions import CategoricalDistribution

    points = [(c, t) for c, t in measured if c is not None and t is not None and t > 0]
    if len(points) < MIN_TRIALS:
        return {"knobs": {}, "note": f"{len(points)} verified trials: too few to weigh the knobs"}
    knobs = family.space.knobs
    varied = [name for name in knobs if len({repr(c.get(name)) for c, _ in points}) > 1]
    if not varied:
        return {"knobs": {}, "note": "every verified trial has the same knob values"}
    distributions = {name: CategoricalDistribution(list(knobs[name].values)) for name in varied}
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "study created" line per problem
    try:
        study = optuna.create_study(direction="minimize", storage=None)
    finally:
        optuna.logging.set_verbosity(verbosity)
    for config, time_ms in points:
        study.add_trial(
            optuna.trial.create_trial(
                params={name: config[name] for name in varied},
                distributions=distributions,
                value=math.log(time_ms),
            )
        )
    evaluator = optuna.importance.PedAnovaImportanceEvaluator()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            found = optuna.importance.get_param_importances(study, evaluator=evaluator)
        except Exception as exc:  # advisory: an evaluator failing must not fail the page
            return {"knobs": {}, "note": f"importances could not be computed: {exc}"}
    if not any(value > 0 for value in found.values()):
        return {"knobs": {}, "note": "no knob stands out among these trials"}
    return {
        "knobs": {name: float(value) for name, value in found.items()},
        "method": METHOD,
    }
