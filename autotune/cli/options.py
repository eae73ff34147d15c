"""Options several commands share, and opening what they name (store, device)."""

from __future__ import annotations

from typing import Any

import click

DB_HELP = (
    "Database URL (any SQLAlchemy URL) [default: $AUTOTUNE_DB, else a SQLite file in the user data dir]."
)
JSON_HELP = "Machine-readable output (one JSON object; see the README)."


def json_option(function: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help=JSON_HELP)(function)


def db_option(function: Any) -> Any:
    return click.option("--db", "db_url", default=None, help=DB_HELP)(function)


def problem_options(default_widths: str) -> Any:
    """--device, --filter-width and --image-size, the same for every command that measures."""

    def decorate(function: Any) -> Any:
        for option in reversed(
            (
                click.option("--device", "-d", "device_index", type=int, default=0, show_default=True),
                click.option(
                    "--filter-width",
                    "-f",
                    "widths_text",
                    default=default_widths,
                    show_default=True,
                    help="Comma list of filter widths.",
                ),
                click.option(
                    "--image-size",
                    "-s",
                    "size_text",
                    default=None,
                    help="Output WIDTHxHEIGHT [default: 2048x2048 on CPUs, 4096x4096 otherwise].",
                ),
            )
        ):
            function = option(function)
        return function

    return decorate


def open_store(url: str | None, *, read_only: bool = False) -> Any:
    """The store a command names; commands that only read open it read-only (a missing
    or foreign database is an error, and nothing is created, upgraded or changed)."""
    from autotune.store import Store

    return Store(url, read_only=read_only)
