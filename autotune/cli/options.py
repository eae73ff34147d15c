"""Options several commands share, and opening what they name (store, device)."""

from __future__ import annotations

import functools
from typing import Any

import click

from autotune.families.image import PIXEL_DEFAULTS

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
                    "--filter-size",
                    "-f",
                    "widths_text",
                    default=default_widths,
                    show_default=True,
                    help="Comma list of filter widths F, or ROWSxF sizes (e.g. 3,5,3x5).",
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


def family_option(function: Any) -> Any:
    """--family: which kernel family a command works on."""
    from autotune.families import family_names

    return click.option(
        "--family",
        "family_name",
        type=click.Choice(family_names()),
        default="conv2d",
        show_default=True,
        help="Kernel family: conv2d (direct) or separable (r row/column terms).",
    )(function)


def family_options(function: Any) -> Any:
    """--family and --rank: which kernel family, and the ranks a separable search tunes;
    --dtype, --out-dtype and --border: the pixels and border of its problems."""
    function = pixel_options(function)
    function = click.option(
        "--rank",
        "ranks_text",
        default=None,
        help="Comma list of filter ranks (separable family) [default: 1].",
    )(function)
    return family_option(function)


def pixel_options(function: Any) -> Any:
    """--dtype, --out-dtype, --border, --channels and --frames: the pixels and border of the
    problems, handed to the command as one `pixels` argument (`parse_pixels`)."""
    from autotune.families.image import BORDER_ALIASES, BORDERS, PIXEL_TYPES

    @functools.wraps(function)
    def with_pixels(
        *args: Any, dtype: str, out_dtype: str, border: str, channels: int, frames: int, **kwargs: Any
    ) -> Any:
        return function(*args, pixels=parse_pixels(dtype, out_dtype, border, channels, frames), **kwargs)

    for option in reversed(
        (
            click.option(
                "--dtype",
                "dtype",
                type=click.Choice(list(PIXEL_TYPES)),
                default="float32",
                show_default=True,
                help="Pixel type of the input image (conv2d).",
            ),
            click.option(
                "--out-dtype",
                "out_dtype",
                type=click.Choice(["float32", "same"]),
                default="float32",
                show_default=True,
                help="Pixel type of the output: float32, or the input's (rounded, saturated).",
            ),
            click.option(
                "--border",
                "border",
                type=click.Choice([*BORDERS, *BORDER_ALIASES], case_sensitive=False),
                default="none",
                show_default=True,
                help="none: 'valid' output; else 'same' output, read past the edge as named.",
            ),
            click.option(
                "--channels",
                "channels",
                type=click.IntRange(1, 4),
                default=1,
                show_default=True,
                help="Interleaved channels per pixel, each filtered alike (conv2d).",
            ),
            click.option(
                "--frames",
                "frames",
                type=click.IntRange(1, 65536),
                default=1,
                show_default=True,
                help="Images of the size filtered in one launch: a batch (conv2d).",
            ),
        )
    ):
        with_pixels = option(with_pixels)
    return with_pixels


def parse_pixels(
    dtype: str, out_dtype: str, border: str, channels: int = 1, frames: int = 1
) -> dict[str, Any]:
    """The problem fields --dtype, --out-dtype, --border, --channels and --frames name,
    where not the defaults."""
    from autotune.families.image import border_name

    pixels = {
        "dtype": dtype,
        "out_dtype": dtype if out_dtype == "same" else out_dtype,
        "border": "none" if border.lower() == "none" else border_name(border),
        "channels": channels,
        "frames": frames,
    }
    return {k: v for k, v in pixels.items() if v != PIXEL_DEFAULTS[k]}


def given_pixels(pixels: dict[str, Any]) -> dict[str, Any]:
    """The pixel fields named on the command line, defaults included: `--dtype float32`
    asks for float32 problems where `pixels` (defaults dropped) cannot tell it from no
    --dtype at all."""
    from click.core import ParameterSource

    context = click.get_current_context()
    return {
        field: pixels.get(field, default)
        for field, default in PIXEL_DEFAULTS.items()
        if context.get_parameter_source(field) not in (None, ParameterSource.DEFAULT)
    }


def parse_ranks(text: str | None) -> list[int] | None:
    from autotune.errors import UsageError

    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() for p in parts):
        raise UsageError(f"--rank takes a comma list of positive integers, got {text!r}")
    return list(dict.fromkeys(int(p) for p in parts))


def open_store(url: str | None, *, read_only: bool = False) -> Any:
    """The store a command names; commands that only read open it read-only (a missing
    or foreign database is an error, and nothing is created, upgraded or changed)."""
    from autotune.store import Store

    return Store(url, read_only=read_only)
