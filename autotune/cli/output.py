"""How every command prints: rich tables for people, one JSON envelope for scripts.

Every `--json` output is one object:

    {"schema_version": 1, "command": "<name>", "data": {...}}

`data` is always an object; lists inside it are always lists (a query with one answer
is a list of one). A device is always the same object (`device_record`), and times are
always `time_ms`.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

SCHEMA_VERSION = 1

console = Console()
errors = Console(stderr=True)


class PlainTable(Table):
    """A rich table whose title and cells are shown as given, never read as markup: they
    hold names and messages from drivers, files and the database (a device named
    `[/x]` must print as such, not break the table)."""

    def __init__(self, *args: Any, title: str | Text | None = None, **kwargs: Any) -> None:
        super().__init__(*args, title=Text(title) if isinstance(title, str) else title, **kwargs)

    def add_row(self, *cells: Any, **kwargs: Any) -> None:
        super().add_row(*(Text(c) if isinstance(c, str) else c for c in cells), **kwargs)


def emit(command: str, data: dict[str, Any]) -> None:
    click.echo(json.dumps({"schema_version": SCHEMA_VERSION, "command": command, "data": data}, indent=2))


def device_record(device: Any, index: int | None = None) -> dict[str, Any]:
    """A device as every command shows it: a DeviceInfo (this machine's, with its index)
    or a database row (maybe another machine's: index null)."""
    return {
        "index": getattr(device, "index", index),
        "name": device.name,
        "vendor": device.vendor,
        "driver": getattr(device, "driver_version", None) or getattr(device, "driver", None),
        "platform": device.platform,
        "type": device.type,
    }


def print_configs(configs: Any) -> None:
    """Configs under a table, one line each: too wide for a table column."""
    for label, config in configs:
        if config:
            click.echo(f"{label}: {json.dumps(config, separators=(',', ':'))}")


def progress(disabled: bool) -> Any:
    """A bar that leaves nothing behind: off where stderr is not a terminal (a transient
    bar stopped there still leaves a blank line before the next message)."""
    from rich.progress import Progress

    return Progress(console=errors, transient=True, disable=disabled or not errors.is_terminal)


def fail(message: str) -> None:
    first = " ".join(message.split())
    click.echo(f"autotune: error: {first}", err=True)
