"""The report as one HTML file: inline CSS, no script, figures as files beside it, so
it opens from disk with no server and no network."""

from __future__ import annotations

import json
from typing import Any

import jinja2

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 75em; padding: 0 1em; color: #222; }
h1, h2, h3 { font-weight: 600; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font-family: ui-monospace, monospace; font-size: .85em; }
td code { word-break: break-word; }
pre { background: #f7f7f7; padding: .5em; white-space: pre-wrap; max-height: 12em; overflow: auto;
      margin: 0; }
img { max-width: 100%; height: auto; border: 1px solid #eee; margin: .3em 0; }
.note { color: #555; font-style: italic; } .figures { display: flex; flex-wrap: wrap; gap: 1em; }
.figures figure { margin: 0; } .meta { color: #555; }
"""


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
        style=STYLE,
        meta=meta,
        devices=data["devices"],
        runs=data["runs"],
        exports=exports,
        has_exports=has_exports,
        number=_number,
        compact=_compact,
        when=_when,
    )
