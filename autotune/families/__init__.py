"""Kernel families by name. Generic code finds a family here and knows it only through
`autotune.families.base.KernelFamily`."""

from __future__ import annotations

from typing import Any

from autotune.errors import UsageError
from autotune.families.base import KernelFamily, KernelVariant, Problem

__all__ = [
    "KernelFamily",
    "KernelVariant",
    "Problem",
    "family_names",
    "get_family",
    "problem_as_dict",
    "problem_from_dict",
]


def _registry() -> dict[str, KernelFamily]:
    from autotune.families.conv2d import CONV2D
    from autotune.families.separable import SEPARABLE

    return {family.name: family for family in (CONV2D, SEPARABLE)}


def family_names() -> list[str]:
    return list(_registry())


def get_family(name: str) -> KernelFamily:
    families = _registry()
    if name not in families:
        raise UsageError(f"unknown kernel family {name!r} (families: {', '.join(families)})")
    return families[name]


def problem_as_dict(problem: Problem) -> dict[str, Any]:
    """A problem with its family and seed, as JSON-able data (the worker's messages)."""
    return {"family": problem.family, **problem.to_dict()}


def problem_from_dict(data: dict[str, Any]) -> Problem:
    data = dict(data)
    family = get_family(data.pop("family"))
    seed = data.pop("seed", 0)
    return family.problem(data, seed=seed)
