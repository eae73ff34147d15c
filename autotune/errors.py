"""Errors the CLI turns into one line on stderr and an exit code."""


class AutotuneError(Exception):
    """A failure at run time (exit code 1)."""

    exit_code = 1


class UsageError(AutotuneError, ValueError):
    """Bad usage or bad input (exit code 2); nothing was written.

    A ValueError too: the Python API (`autotune.convolve`, `plan`) raises it for bad
    arguments (a filter too wide, an unknown device, a bad database URL), and callers
    catch bad arguments as ValueError."""

    exit_code = 2
