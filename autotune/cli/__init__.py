"""The `autotune` command line: parse, call the library, print. Nothing is decided here.

One module per command group: `inspect` (devices, space, best, history, show),
`tuning` (search, study, replay), `kernels` (render, export, convolve), `report`; `output` holds
the JSON envelope every `--json` prints.
"""

from __future__ import annotations

import os
import sys

import click

from autotune import __version__
from autotune.cli import inspect, kernels, report, tuning
from autotune.cli.output import errors, fail
from autotune.errors import AutotuneError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autotune")
def cli() -> None:
    """JIT code generator and autotuner for OpenCL 2D image convolution."""


for command in (
    inspect.devices,
    inspect.space,
    kernels.render,
    tuning.study,
    tuning.search,
    inspect.best,
    inspect.history,
    inspect.show,
    inspect.upgrade,
    kernels.export,
    kernels.convolve_command,
    tuning.replay,
    report.report,
):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; every failure is one line on stderr and an exit code."""
    try:
        result = cli.main(args=argv, prog_name="autotune", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        errors.print("autotune: interrupted", highlight=False)
        return 130
    except click.UsageError as exc:
        fail(exc.format_message().replace("\n", " "))
        return 2
    except click.ClickException as exc:
        fail(exc.format_message())
        return exc.exit_code
    except AutotuneError as exc:
        fail(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        errors.print("autotune: interrupted", highlight=False)
        return 130
    except OSError as exc:  # the system refused a file: what and why, not a bug
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}{exc.strerror or exc}")
        return 1
    except Exception as exc:  # a bug: still one line, unless debugging
        if os.environ.get("AUTOTUNE_DEBUG"):
            raise
        fail(f"internal error: {type(exc).__name__}: {exc} (set AUTOTUNE_DEBUG=1 for the traceback)")
        return 1


if __name__ == "__main__":
    sys.exit(main())
