"""Commands that read: devices, space, best, history, show (the database opened
read-only); and upgrade, which brings a database to this release's schema."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.markup import escape

from autotune.cli.options import (
    db_option,
    family_option,
    family_options,
    given_pixels,
    json_option,
    open_store,
    parse_ranks,
)
from autotune.cli.output import PlainTable, console, device_record, emit, print_configs
from autotune.errors import AutotuneError, UsageError


@click.command()
@json_option
def devices(as_json: bool) -> None:
    """List every OpenCL device with its stable index."""
    from autotune.devices import list_devices, no_device_error, unusable_devices

    found = list_devices()
    left_out = unusable_devices()
    if as_json:
        records = [{**device_record(d), "limits": d.to_dict()} for d in found]
        emit("devices", {"devices": records, "unusable": left_out})
        return
    if not found:
        raise no_device_error()
    table = PlainTable(title="OpenCL devices")
    for column in ("#", "platform", "device", "type", "CUs", "max WG", "local KiB", "const KiB"):
        table.add_column(column)
    for d in found:
        table.add_row(
            str(d.index),
            d.platform,
            d.name,
            d.type,
            str(d.compute_units),
            str(d.max_work_group_size),
            str(d.local_mem_size // 1024),
            str(d.max_constant_buffer_size // 1024),
        )
    console.print(table)
    for line in left_out:
        console.print(f"left out (cannot compile): {line}")


@click.command()
@family_option
@json_option
@click.option(
    "--markdown",
    is_flag=True,
    help="Only the knob table, in markdown (the README's knob tables are this output).",
)
def space(family_name: str, as_json: bool, markdown: bool) -> None:
    """Print the knobs, their values, the constraints and the presets."""
    from autotune.families import get_family

    family = get_family(family_name)
    if as_json and markdown:
        raise UsageError("give --json or --markdown, not both")
    if markdown:
        click.echo(family.space.markdown_table(), nl=False)
        return
    described = family.space.describe()
    if as_json:
        emit("space", {"family": family.name, **described})
        return
    table = PlainTable(
        title=f"search space {described['name']!r} ({described['points']} points before constraints)"
    )
    for column in ("knob", "values", "default", "meaning"):
        table.add_column(column)
    for name, knob in described["knobs"].items():
        table.add_row(
            name, ", ".join(json.dumps(v) for v in knob["values"]), json.dumps(knob["default"]), knob["help"]
        )
    console.print(table)
    console.print("[bold]constraints[/bold]")
    for c in described["constraints"]:
        console.print(f"  {escape(c['rule'])}  [dim]({escape(c['reason'])})[/dim]", highlight=False)
    presets = PlainTable(title="presets (measured first by every search where they apply)")
    presets.add_column("preset")
    presets.add_column("kernel")
    presets.add_column("applies")
    presets.add_column("config")
    for name, p in described["presets"].items():
        presets.add_row(name, p["about"], p.get("when", "everywhere"), json.dumps(p["config"]))
    console.print(presets)


def _kernel_record(family: Any, device: dict[str, Any], choice: Any) -> dict[str, Any]:
    """One best kernel, the same fields whether it came from the table or the ladder."""
    from autotune.export import gflops

    problem = choice.problem
    return {
        "device": device,
        "family": family.name,
        **problem.kind(),
        "problem": family.describe_kind(problem.kind()),
        "image_size": list(problem.size),
        "fallback": choice.level,
        "time_ms": choice.time_ms,
        "gflops": gflops(problem, choice.time_ms),
        "config": choice.config,
        "trial_id": choice.trial_id,
        "tuned_image_size": list(choice.tuned_size) if choice.tuned_size else None,
        "tuned_device": choice.tuned_device,
    }


@click.command()
@click.option("--device", "-d", "device_index", type=int, default=None, help="Only this device.")
@click.option(
    "--filter-width",
    "--filter-size",
    "-f",
    "filter_text",
    default=None,
    help="Only this width F (or ROWSxF size).",
)
@click.option(
    "--image-size",
    "-s",
    "size_text",
    default=None,
    help="With -d and -f: the output WIDTHxHEIGHT to answer for.",
)
@family_options
@db_option
@json_option
def best(
    device_index: int | None,
    filter_text: str | None,
    size_text: str | None,
    family_name: str,
    ranks_text: str | None,
    pixels: dict[str, Any],
    db_url: str | None,
    as_json: bool,
) -> None:
    """The best verified kernel per (device, filter width, image size).

    With both --device and --filter-width, answers like `autotune.convolve()` would,
    and says which fallback level answered (exact, nearest_image_size, same_vendor,
    default).
    """
    from autotune.devices import device_info
    from autotune.families import get_family
    from autotune.families.conv2d.inputs import parse_filter_sizes, parse_image_size
    from autotune.lookup import Choice, has_fields, readable_rows, resolve_kind

    family = get_family(family_name)
    filter_size = None
    if filter_text is not None:
        sizes = parse_filter_sizes(filter_text)
        if len(sizes) != 1:
            raise UsageError(f"--filter-width takes one width or size here, got {filter_text!r}")
        filter_size = sizes[0]
    # A kind of one filter size matches its own width and height only (a square filter's height is 0).
    filter_key = None
    if filter_size is not None:
        rows, width = filter_size if isinstance(filter_size, tuple) else (0, filter_size)
        filter_key = (width, rows)
    ranks = parse_ranks(ranks_text)
    store = open_store(db_url, read_only=True)
    records = []
    if device_index is not None and filter_size is not None:
        info = device_info(device_index)
        size = parse_image_size(size_text) if size_text else None
        for kind in family.kinds([filter_size], ranks, pixels):
            choice = resolve_kind(store.best(), family, kind, info, size)
            records.append(_kernel_record(family, device_record(info), choice))
    else:
        # The options name problems as they do for `search`: refused alike, then a filter.
        family.problems_of(family.kinds([filter_size or 3], ranks, pixels), (256, 256))
        wanted_size = tuple(parse_image_size(size_text)) if size_text else None
        wanted = given_pixels(pixels)
        mine_id = None
        if device_index is not None:
            row = store.device_row(device_info(device_index).fingerprint)
            mine_id = row.id if row is not None else -1
        for row, device, problem_row in readable_rows(
            store.best(device_id=mine_id, family=family.name), family
        ):
            problem = family.problem(problem_row.fields)
            key = problem.key()
            if (
                filter_key is not None
                and (key.get("filter_width"), key.get("filter_height", 0)) != filter_key
            ):
                continue
            if ranks and key.get("rank") not in ranks:
                continue
            if not has_fields(family, problem.kind(), wanted):
                continue
            if wanted_size is not None and tuple(problem.size) != wanted_size:
                continue
            config = family.read_config(row.config) or _stored_config(row.config)
            choice = Choice(
                config, problem, "exact", row.time_ms, problem.size, device.name, trial_id=row.trial_id
            )
            records.append(_kernel_record(family, device_record(device), choice))
    if as_json:
        emit("best", {"kernels": records})
        return
    if not records:
        narrowed = pixels or size_text or ranks or filter_size is not None or device_index is not None
        console.print(
            "no tuned kernel for these options"
            if narrowed
            else "no tuned kernels yet (run `autotune search`)"
        )
        return
    if device_index is not None and filter_size is not None:
        for r in records:
            timing = f"{r['time_ms']:.4f} ms when tuned" if r["time_ms"] else "not tuned"
            size = r["image_size"]
            click.echo(
                f"{r['problem']} on {r['device']['name']}, {size[0]}x{size[1]}: {r['fallback']} ({timing})"
            )
            print_configs([(r["problem"], r["config"])])
        return
    table = PlainTable(title="best kernels")
    for column in ("device", "problem", "image", "ms", "GFLOP/s"):
        table.add_column(column)
    for r in records:
        table.add_row(
            r["device"]["name"],
            r["problem"],
            "x".join(map(str, r["image_size"])),
            f"{r['time_ms']:.4f}" if r["time_ms"] else "-",
            f"{r['gflops']:.1f}" if r["gflops"] else "-",
        )
    console.print(table)
    print_configs((r["problem"], r["config"]) for r in records)


def _stored_config(text: str) -> Any:
    """A stored config as JSON, or its text where a damaged row holds no JSON."""
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return text


def _readable_kind(row: Any) -> tuple[str, dict[str, Any]]:
    """A problem row's label and kind fields; "?" for a missing or damaged row."""
    from autotune.families import get_family

    try:
        family = get_family(row.family)
        problem = family.problem(row.fields)
    except (AttributeError, TypeError, AutotuneError):
        return "?", {}
    return family.describe_kind(problem.kind()), problem.kind()


@click.command()
@db_option
@json_option
def history(db_url: str | None, as_json: bool) -> None:
    """Past search runs."""
    from autotune.families import get_family
    from autotune.outcomes import Origin, counts_as_trial

    store = open_store(db_url, read_only=True)
    records = []
    for run, device in store.runs():
        every = store.trials(run_id=run.id)
        # what `search` counts: points measured (or answered from the database), not
        # the re-timings of the top few nor points rejected before compiling
        trials = [t for t in every if counts_as_trial(t.origin, t.status)]
        try:
            family = get_family(run.family)
            problems = [family.problem(key) for key in run.problem_keys]
            labels = [family.describe_kind(p.kind()) for p in problems]
        except (ValueError, TypeError, AttributeError, AutotuneError):  # a damaged row
            problems, labels = [], ["?"]
        records.append(
            {
                "run_id": run.id,
                "device": device_record(device),
                "family": run.family,
                "problems": labels,
                "image_size": list(problems[0].size) if problems else None,
                "sampler": run.sampler,
                "seed": run.seed,
                "trials_budget": run.trials_budget,
                "time_budget_s": run.time_budget_s,
                "status": run.status,
                "started_at": run.started_at and run.started_at.isoformat(),
                "finished_at": run.finished_at and run.finished_at.isoformat(),
                "trials": len(trials),
                "ok": sum(t.status == "ok" for t in trials),
                "retimings": sum(t.origin == Origin.RETIME for t in every),
                "tool_version": run.tool_version,
            }
        )
    if as_json:
        emit("history", {"runs": records})
        return
    table = PlainTable(title="search runs")
    for column in (
        "run",
        "device",
        "problems",
        "image",
        "sampler",
        "status",
        "trials",
        "ok",
        "started (UTC)",
    ):
        table.add_column(column)
    for r in records:
        table.add_row(
            str(r["run_id"]),
            r["device"]["name"],
            " ".join(r["problems"]),
            "x".join(map(str, r["image_size"] or [])),
            r["sampler"],
            r["status"],
            str(r["trials"]),
            str(r["ok"]),
            (r["started_at"] or "?")[:19],
        )
    console.print(table)


@click.command()
@click.argument("run_id", type=click.IntRange(1, 2**63 - 1))
@db_option
@json_option
def show(run_id: int, db_url: str | None, as_json: bool) -> None:
    """Every trial of one run, failures with the reason."""

    store = open_store(db_url, read_only=True)
    if store.run(run_id) is None:
        raise UsageError(f"no run {run_id} in the database (see `autotune history`)")
    problems = store.problems()
    records = []
    for t in store.trials(run_id=run_id):
        kind = _readable_kind(problems.get(t.problem_id))
        records.append(
            {
                "trial_id": t.id,
                "problem": kind[0],
                **kind[1],
                "origin": t.origin,
                "status": t.status,
                "time_ms": t.time_ms,
                "min_ms": t.min_ms,
                "max_ms": t.max_ms,
                "runs": t.runs,
                "compile_ms": t.compile_ms,
                "config": _stored_config(t.config),
                "error": t.error,
            }
        )
    if as_json:
        emit("show", {"run_id": run_id, "trials": records})
        return
    table = PlainTable(title=f"run {run_id}: {len(records)} trials")
    for column in ("trial", "problem", "origin", "status", "ms", "config", "why"):
        table.add_column(column)
    for r in records:
        why = (r["error"] or "").splitlines()[0][:80] if r["error"] else ""
        table.add_row(
            str(r["trial_id"]),
            r["problem"],
            r["origin"],
            r["status"],
            f"{r['time_ms']:.4f}" if r["time_ms"] else "-",
            json.dumps(r["config"], separators=(",", ":")) if isinstance(r["config"], dict) else r["config"],
            why,
        )
    console.print(table)


@click.command()
@db_option
@json_option
def upgrade(db_url: str | None, as_json: bool) -> None:
    """Bring a database written by an older release to this release's schema.

    `search` does this too. Commands that only read answer from an older SQLite
    database without changing it, and refuse an older database of another kind."""
    from autotune.store import Store

    store = Store(db_url, must_exist=True)
    before, after = store.schema_found, store.schema
    store.close()
    if as_json:
        emit("upgrade", {"from_schema": before, "schema": after})
    elif before == after:
        click.echo(f"the database is already at schema {after}")
    else:
        click.echo(f"upgraded the database from schema {before} to {after}")
