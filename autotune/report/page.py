"""The report as one HTML file: inline CSS, no script, figures as files beside it, so
it opens from disk with no server and no network."""

from __future__ import annotations

import json
from typing import Any

import jinja2


def _number(value: float | None, pattern: str) -> str:
    return pattern % value if value is not None else "-"


def _compact(config: Any) -> str:
    """A config on lines that wrap: knob=value, a space between."""
    if not isinstance(config, dict):
        return str(config)
    return " ".join(f"{k}={json.dumps(v)}" for k, v in config.items())


def _when(iso: str | None) -> str:
    """An ISO time to the second, as people read it."""
    return iso[:19].replace("T", " ") if iso else "-"


def html(data: dict[str, Any], meta: dict[str, Any], exports: list[str]) -> str:
    """The page for the collected data, its figures and notes already attached."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("autotune.report", "."),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    template = environment.get_template("page.html.j2")
    has_exports = any(row.get("exported") for d in data["devices"] for row in d["best"])
    return template.render(
        meta=meta,
        devices=data["devices"],
        runs=data["runs"],
        exports=exports,
        has_exports=has_exports,
        number=_number,
        compact=_compact,
        when=_when,
    )
