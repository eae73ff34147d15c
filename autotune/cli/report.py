"""`autotune report`: the page of figures and tables (the work is in autotune.report)."""

from __future__ import annotations

import math
from pathlib import Path

import click

from autotune.cli.options import db_option, json_option, open_store
from autotune.cli.output import emit, progress
from autotune.errors import UsageError


@click.command()
@click.option("--out", "out_dir", required=True, type=click.Path(), help="Folder to write the page into.")
@click.option("--device", "-d", "device_index", type=int, default=None, help="Only this device.")
@click.option(
    "--run", "run_id", type=click.IntRange(1, 2**63 - 1), default=None, help="Only this search run."
)
@click.option(
    "--format",
    "page_format",
    type=click.Choice(["html", "json"]),
    default="html",
    show_default=True,
    help="html: index.html with figures beside it; json: report.json, also printed (as --json).",
)
@click.option(
    "--figure", "figure", default=None, help="Write this figure alone (a kind such as seed-study, or an id)."
)
@click.option(
    "--figure-format",
    "image_format",
    type=click.Choice(["png", "svg"]),
    default="png",
    show_default=True,
    help="Image format of the figures.",
)
@click.option("--bandwidth", type=float, default=None, help="Roofline: memory bandwidth in GB/s.")
@click.option("--peak-gflops", type=float, default=None, help="Roofline: arithmetic peak in GFLOP/s.")
@click.option(
    "--measure/--no-measure",
    default=True,
    show_default=True,
    help="Measure the roofline ceilings of devices present on this machine, unless given.",
)
@db_option
@json_option
def report(
    out_dir: str,
    device_index: int | None,
    run_id: int | None,
    page_format: str,
    figure: str | None,
    image_format: str,
    bandwidth: float | None,
    peak_gflops: float | None,
    measure: bool,
    db_url: str | None,
    as_json: bool,
) -> None:
    """Write a page of figures and tables from the database: seed study, roofline,
    every run's search, failures, best kernels."""
    from autotune.report import ReportRequest, write_report
    from autotune.report.ceilings import given
    from autotune.report.collect import Scope

    page_format = "json" if as_json else page_format
    for name, value in (("--bandwidth", bandwidth), ("--peak-gflops", peak_gflops)):
        if value is not None and not 0 < value < math.inf:
            raise UsageError(f"{name} must be a positive number, got {value}")
    if figure is not None and page_format == "json":
        raise UsageError("--figure writes an image: give it without --format json")
    store = open_store(db_url, read_only=True)
    device_id = _device_id(store, device_index)
    if run_id is not None:
        run = store.run(run_id)
        if run is None:
            raise UsageError(f"no run {run_id} in the database (see `autotune history`)")
        if device_id is not None and run.device_id != device_id:
            raise UsageError(f"run {run_id} was not on device {device_index}")
        device_id = run.device_id  # the page of one run shows its device alone
    scope = Scope(device_id=device_id, run_id=run_id)
    request = ReportRequest(
        out_dir=Path(out_dir),
        scope=scope,
        page_format=page_format,
        figure=figure,
        image_format=image_format,
        given=given(bandwidth, peak_gflops),
        measure=measure,
    )
    with progress(page_format == "json") as bar:
        task = bar.add_task("report", total=None)

        def tell(what: str, done: int, total: int) -> None:
            bar.update(task, description=what, completed=done, total=total)

        written = write_report(store, request, tell)
    if page_format == "json":
        emit("report", written["data"])
        return
    for path in written["files"]:
        if path.endswith("index.html") or figure is not None:
            click.echo(path)


def _device_id(store: object, device_index: int | None) -> int | None:
    """The database's id of this machine's device `device_index`."""
    if device_index is None:
        return None
    from autotune.devices import device_info

    info = device_info(device_index)
    row = store.device_row(info.fingerprint)  # type: ignore[attr-defined]
    if row is None:
        raise UsageError(f"device {device_index} ({info.name}) has no results in the database")
    return row.id
