"""Errors the CLI turns into one line on stderr and an exit code."""


class AutotuneError(Exception):
    """A failure at run time (exit code 1)."""

    exit_code = 1


class UsageError(AutotuneError):
    """Bad usage or bad input (exit code 2); nothing was written."""

    exit_code = 2
