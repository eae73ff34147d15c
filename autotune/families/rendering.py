"""What every family's renderer shares: its Jinja template, loaded once, and exact
OpenCL C spellings of float32 values (for taps compiled into a kernel)."""

from __future__ import annotations

import functools
import math

import jinja2

from autotune.resources import resource_path


@functools.cache
def load_template(file_name: str) -> jinja2.Template:
    """A template under templates/; undefined names are errors, so a knob the renderer
    forgot to pass fails loudly instead of rendering as nothing."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resource_path("templates", file_name).parent),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return environment.get_template(file_name)


def float_literal(value: float) -> str:
    """An exact OpenCL C literal for a float32 (hexadecimal; NaN and infinities by name)."""
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    mantissa, exponent = value.hex().split("p")
    return f"{mantissa.rstrip('0').rstrip('.')}p{exponent}f"
