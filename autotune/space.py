"""Declarative search spaces: knobs, legal values, constraints and presets.

A space is data (a TOML file under search_spaces/), so the knobs live in one place and
the search, the CLI and the code generator all read the same declaration.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import itertools
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from autotune.errors import UsageError
from autotune.resources import resource_path

# Device limits that rules may name but older records and hand-written devices leave
# out, at the value that keeps a rule as it was before the limit was recorded.
DEVICE_DEFAULTS: dict[str, object] = {
    "native_vector_width": 1,
    "double_precision": False,
    "widest_vector_bytes": 128,
}

Value = bool | int | str
Config = dict[str, Value]


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[Value, ...]
    default: Value
    help: str = ""
    # Added after kernels were stored: left out of a kernel's config comment at its
    # default, so those kernels render (and fingerprint) as they did.
    added_later: bool = False

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
    knob_names: frozenset[str] = frozenset()  # the knobs the rule names


@dataclass(frozen=True)
class Preset:
    name: str
    about: str
    config: Config
    # Where a search measures it first: an expression over problem fields and `device`,
    # like a rule's ("" everywhere). A layout that pays for some kinds only would
    # otherwise cost every other search a trial.
    when: str = ""
    when_code: Any = field(default=None, repr=False, compare=False)


def _compile_when(preset: str, when: object) -> Any:
    """A preset's `when` as code, or None for "everywhere"; a malformed one is refused
    when the space loads, naming the preset."""
    if not isinstance(when, str):
        raise UsageError(f"preset {preset!r}: `when` must be an expression in a string, not {when!r}")
    if not when.strip():
        return None
    try:
        return compile(ast.parse(when, mode="eval"), f"<preset {preset} when>", "eval")
    except SyntaxError as error:
        raise UsageError(f"preset {preset!r}: `when` is not an expression ({error.msg}): {when}") from None


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
        self.constraints = tuple(constraints)
        self._rule_checks: dict[bool, tuple[Any, tuple[str, ...]]] = {}  # `_rules_at_once`, by device given
        self.presets = {p.name: p for p in presets}
        self.fallback: Preset | None = None
        # Problem fields rules may name that a problem's key leaves out at their default.
        self.problem_defaults: dict[str, object] = {}

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
            knobs.append(Knob(name, values, default, spec.get("help", ""), spec.get("added_later", False)))
        constraints = []
        for spec in data.get("constraints", []):
            rule = spec["rule"]
            code = compile(ast.parse(rule, mode="eval"), f"<constraint {rule}>", "eval")
            names = {n.id for n in ast.walk(ast.parse(rule, mode="eval")) if isinstance(n, ast.Name)}
            knob_names = frozenset(names & {k.name for k in knobs})
            reason = spec.get("reason", rule)
            constraints.append(Constraint(rule, reason, "device" in names, code, knob_names))
        space = cls(data.get("name", "space"), data.get("description", ""), knobs, constraints, [])
        space.problem_defaults = dict(data.get("problem_defaults", {}))
        for name, spec in data.get("presets", {}).items():
            spec = dict(spec)
            about = spec.pop("about", "")
            when = spec.pop("when", "")
            space.presets[name] = Preset(name, about, space.complete(spec), when, _compile_when(name, when))
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

    def comment_config(self, config: Config) -> Config:
        """The config as a kernel's source states it: knobs added later are left out at
        their default."""
        return {
            name: value
            for name, value in config.items()
            if not (self.knobs[name].added_later and value == self.knobs[name].default)
        }

    def violations(
        self, config: Config, problem: Mapping[str, object], device: object | None = None
    ) -> list[str]:
        """Reasons this point cannot run for a problem (its key fields, such as
        `filter_width`, are names the rules may use); empty when it is valid.

        Device rules are skipped when no device is given, so a config can be checked
        for internal consistency before a device is chosen.
        """
        code, reasons = self._rules_at_once(device is not None)
        held = eval(code, {"__builtins__": {}}, self._names(config, problem, device))  # noqa: S307 - rules ship with the package
        return [reason for ok, reason in zip(held, reasons, strict=True) if not ok]

    def _rules_at_once(self, with_device: bool) -> tuple[Any, tuple[str, ...]]:
        """The rules that apply (device rules only with a device) as one expression, a tuple
        of each rule's value, and their reasons: one eval a check instead of one a rule, for
        a repair checks some 10,000 points where valid ones are rare."""
        if with_device not in self._rule_checks:
            rules = [c for c in self.constraints if with_device or not c.needs_device]
            source = "(" + "".join(f"({c.rule}\n), " for c in rules) + ")"
            reasons = tuple(c.reason for c in rules)
            self._rule_checks[with_device] = (compile(source, "<rules>", "eval"), reasons)
        return self._rule_checks[with_device]

    def live_values(
        self, problem: Mapping[str, object], device: object | None = None
    ) -> dict[str, tuple[Value, ...]]:
        """The values each knob can take for this problem on this device, as far as the
        rules that name that knob alone (beside problem fields and `device`) say: a value
        that breaks such a rule breaks it whatever the other knobs are (a knob added for
        other pixel types, a CPU's vectors on a GPU). A search need not model the others."""
        live = {}
        for name, knob in self.knobs.items():
            values = tuple(v for v in knob.values if not self._refused(name, v, problem, device))
            live[name] = values or knob.values  # none left: the problem fails its rules anyway
        return live

    def _refused(self, name: str, value: Value, problem: Mapping[str, object], device: object | None) -> bool:
        """Whether a rule that names knob `name` alone refuses `value` for this problem."""
        for c in self.constraints:
            if c.knob_names != {name} or (c.needs_device and device is None):
                continue
            try:
                ok = eval(c.code, {"__builtins__": {}}, self._names({name: value}, problem, device))  # noqa: S307
            except NameError:  # a problem field this problem does not have
                continue
            if not ok:
                return True
        return False

    def applies(self, preset: Preset, problem: Mapping[str, object], device: object) -> bool:
        """Whether a search of this problem on this device measures the preset first
        (its `when`; validity is checked apart, by `violations`)."""
        if preset.when_code is None or (device is None and "device" in preset.when_code.co_names):
            return True  # like a device rule: unknown until a device is chosen
        names = self._names(preset.config, problem, device)
        return bool(eval(preset.when_code, {"__builtins__": {}}, names))  # noqa: S307 - ships with the package

    def presets_applying(self, problem: Mapping[str, object], device: object) -> list[Preset]:
        """The presets whose `when` holds for this problem on this device, in file order."""
        return [p for p in self.presets.values() if self.applies(p, problem, device)]

    def _names(
        self, config: Config, problem: Mapping[str, object], device: object | None
    ) -> dict[str, object]:
        """What rules and presets' `when` may name: problem fields, knobs, `device`."""
        names: dict[str, object] = {**self.problem_defaults, **problem, **config}
        if device is not None:
            if isinstance(device, Mapping):
                device = SimpleNamespace(**{**DEVICE_DEFAULTS, **device})
            names["device"] = device
        return names

    def with_value(
        self,
        base: Mapping[str, object],
        name: str,
        value: object,
        problem: Mapping[str, object],
        device: object | None = None,
    ) -> Config | None:
        """The valid config closest to `base` (completed with defaults) that has knob
        `name` set to `value`; None when no valid config has that value.

        Closest means fewest other knobs changed: candidates are tried with 0, 1, 2, ...
        changed knobs, the knobs to change taken in declaration order, and a changed
        knob tries its default first, then its other values in declaration order. So the
        answer is deterministic, and any rule the value brings with it (a knob it needs,
        a knob it excludes) is satisfied without naming either here. A value a rule of its
        knob alone refuses (`live_values`) is None at once; any other value no config can
        take costs one pass over the whole space before None comes back.
        """
        if name not in self.knobs:
            raise UsageError(f"unknown knob {name!r} (knobs: {', '.join(self.knobs)})")
        start = self.complete({**base, name: value})
        if self._refused(name, value, problem, device):
            return None  # a rule of this knob alone refuses the value: no need to search
        others = [n for n in self.knobs if n != name]
        alternatives = {n: self._alternatives(n, start[n]) for n in others}
        for count in range(len(others) + 1):
            for changed in itertools.combinations(others, count):
                for values in itertools.product(*(alternatives[n] for n in changed)):
                    config = {**start, **dict(zip(changed, values, strict=True))}
                    if not self.violations(config, problem, device):
                        return config
        return None

    def _alternatives(self, name: str, current: Value) -> list[Value]:
        """The values knob `name` can change to from `current`: its default first, then
        the others in declaration order."""
        knob = self.knobs[name]
        ordered = [knob.default, *(v for v in knob.values if not _same(v, knob.default))]
        return [v for v in ordered if not _same(v, current)]

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
            "presets": {
                p.name: {"about": p.about, "config": p.config, **({"when": p.when} if p.when else {})}
                for p in self.presets.values()
            },
            "points": self.points(),
        }

    def markdown_table(self) -> str:
        """The knobs as a markdown table (knob, values, default, effect), one row per
        knob in declaration order: what `autotune space --markdown` prints and the
        README's knob table holds."""
        rows = ["| knob | values | default | effect |", "|---|---|---|---|"]
        for name, knob in self.describe()["knobs"].items():
            values = ", ".join(_markdown_value(v) for v in knob["values"])
            help_text = knob["help"].replace("|", "\\|")
            rows.append(f"| `{name}` | {values} | {_markdown_value(knob['default'])} | {help_text} |")
        return "\n".join(rows) + "\n"


def _same(a: object, b: object) -> bool:
    """Equal and of one type, as Knob.accepts compares: True is not 1."""
    return type(a) is type(b) and a == b


def _markdown_value(value: object) -> str:
    """A knob value as the space file spells it, without quotes: define, 4, true."""
    return value if isinstance(value, str) else json.dumps(value)
