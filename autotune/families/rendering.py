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
    """An exact OpenCL C constant for a float32: hexadecimal, or for NaN and the
    infinities a constant division that every C compiler folds. Not the `NAN` macro:
    PoCL defines it as `as_float(INT_MAX)`, which is no constant, so a program-scope
    table initialised with it does not build."""
    if math.isnan(value):
        return "(-(0.0f / 0.0f))" if math.copysign(1.0, value) < 0 else "(0.0f / 0.0f)"
    if math.isinf(value):
        return "(1.0f / 0.0f)" if value > 0 else "(-1.0f / 0.0f)"
    mantissa, exponent = value.hex().split("p")
    return f"{mantissa.rstrip('0').rstrip('.')}p{exponent}f"
