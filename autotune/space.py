"""Declarative search spaces: knobs, legal values, constraints and presets.

A space is data (a TOML file under search_spaces/), so the knobs live in one place and
the search, the CLI and the code generator all read the same declaration.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from autotune.errors import UsageError
from autotune.resources import resource_path

Value = bool | int | str
Config = dict[str, Value]


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[Value, ...]
    default: Value
    help: str = ""

    def accepts(self, value: object) -> bool:
        # Type-strict: True must not pass for 1, nor "4" for 4; nothing unlisted can
        # reach a template.
        return any(type(value) is type(v) and value == v for v in self.values)


@dataclass(frozen=True)
class Constraint:
    rule: str
    reason: str
    needs_device: bool
    code: Any = field(repr=False, compare=False)


@dataclass(frozen=True)
class Preset:
    name: str
    about: str
    config: Config


class SearchSpace:
    def __init__(
        self,
        name: str,
        description: str,
        knobs: list[Knob],
        constraints: list[Constraint],
        presets: list[Preset],
    ) -> None:
        self.name = name
        self.description = description
        self.knobs = {k.name: k for k in knobs}
        self.constraints = constraints
        self.presets = {p.name: p for p in presets}
        self.fallback: Preset | None = None

    @classmethod
    def load(cls, path: str | Path) -> SearchSpace:
        with open(path, "rb") as f:
            data = tomllib.load(f)
        return cls.from_dict(data)

    @staticmethod
    @functools.cache
    def shipped(file_name: str) -> SearchSpace:
        """A space file that ships with the package (search_spaces/), loaded once."""
        return SearchSpace.load(resource_path("search_spaces", file_name))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchSpace:
        knobs = []
        for name, spec in data.get("knobs", {}).items():
            values = tuple(spec["values"])
            default = spec.get("default", values[0])
            knobs.append(Knob(name, values, default, spec.get("help", "")))
        constraints = []
        for spec in data.get("constraints", []):
            rule = spec["rule"]
            code = compile(ast.parse(rule, mode="eval"), f"<constraint {rule}>", "eval")
            names = {n.id for n in ast.walk(ast.parse(rule, mode="eval")) if isinstance(n, ast.Name)}
            constraints.append(Constraint(rule, spec.get("reason", rule), "device" in names, code))
        space = cls(data.get("name", "space"), data.get("description", ""), knobs, constraints, [])
        for name, spec in data.get("presets", {}).items():
            spec = dict(spec)
            about = spec.pop("about", "")
            space.presets[name] = Preset(name, about, space.complete(spec))
        if "fallback" in data:
            spec = dict(data["fallback"])
            space.fallback = Preset("fallback", spec.pop("about", ""), space.complete(spec))
        return space

    def complete(self, partial: Mapping[str, object]) -> Config:
        """Check every given knob and value, then fill the rest from the defaults."""
        unknown = sorted(set(partial) - set(self.knobs))
        if unknown:
            raise UsageError(f"unknown knob {unknown[0]!r} (knobs: {', '.join(self.knobs)})")
        config: Config = {}
        for name, knob in self.knobs.items():
            value = partial.get(name, knob.default)
            if not knob.accepts(value):
                allowed = ", ".join(json.dumps(v) for v in knob.values)
                raise UsageError(f"knob {name!r} cannot be {json.dumps(value)}; allowed: {allowed}")
            config[name] = value  # type: ignore[assignment]
        return config

    def violations(
        self, config: Config, problem: Mapping[str, object], device: object | None = None
    ) -> list[str]:
        """Reasons this point cannot run for a problem (its key fields, such as
        `filter_width`, are names the rules may use); empty when it is valid.

        Device rules are skipped when no device is given, so a config can be checked
        for internal consistency before a device is chosen.
        """
        names: dict[str, object] = {**problem, **config}
        if device is not None:
            names["device"] = device if not isinstance(device, Mapping) else SimpleNamespace(**device)
        reasons = []
        for c in self.constraints:
            if c.needs_device and device is None:
                continue
            if not eval(c.code, {"__builtins__": {}}, names):  # noqa: S307 - rules ship with the package
                reasons.append(c.reason)
        return reasons

    def points(self) -> int:
        n = 1
        for knob in self.knobs.values():
            n *= len(knob.values)
        return n

    @property
    def fingerprint(self) -> str:
        """Changes when knobs, values or rules change (not with help text): a search run
        over an older space is not resumed as if it covered the new one."""
        shape = {
            "knobs": {k.name: [repr(v) for v in k.values] for k in self.knobs.values()},
            "rules": [c.rule for c in self.constraints],
        }
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "knobs": {
                k.name: {"values": list(k.values), "default": k.default, "help": k.help}
                for k in self.knobs.values()
            },
            "constraints": [{"rule": c.rule, "reason": c.reason} for c in self.constraints],
            "presets": {p.name: {"about": p.about, "config": p.config} for p in self.presets.values()},
            "points": self.points(),
        }
