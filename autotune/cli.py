"""The `autotune` command line: parse, call the library, print. Nothing else lives here."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from autotune import __version__
from autotune.errors import AutotuneError, UsageError

console = Console()
errors = Console(stderr=True)

CPU_IMAGE = (2048, 2048)
GPU_IMAGE = (4096, 4096)


def parse_filter_widths(text: str) -> list[int]:
    widths = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise UsageError(f"--filter-width takes a comma list of positive integers, got {text!r}")
        width = int(part)
        if width < 1 or width > 255:
            raise UsageError(f"filter width must be from 1 to 255, got {width}")
        widths.append(width)
    return list(dict.fromkeys(widths))


def parse_image_size(text: str) -> tuple[int, int]:
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise UsageError(f"--image-size takes WIDTHxHEIGHT, e.g. 2048x2048, got {text!r}")
    width, height = (int(p) for p in parts)
    if not (1 <= width <= 65536 and 1 <= height <= 65536):
        raise UsageError(f"image size must be from 1x1 to 65536x65536, got {text!r}")
    return width, height


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2))


def _problem_options(default_widths: str) -> Any:
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


def _image_size(size_text: str | None, device: Any, widths: list[int]) -> tuple[int, int]:
    """The output size asked for, or the device type's default; every width must fit."""
    size = parse_image_size(size_text) if size_text else (CPU_IMAGE if device.is_cpu else GPU_IMAGE)
    for width in widths:
        if width > min(size):
            raise UsageError(f"filter width {width} is larger than the image ({size[0]}x{size[1]})")
    return size


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autotune")
def cli() -> None:
    """JIT code generator and autotuner for OpenCL 2D image convolution."""


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def devices(as_json: bool) -> None:
    """List every OpenCL device with its stable index."""
    from autotune.devices import list_devices

    found = list_devices()
    if as_json:
        _print_json([d.to_dict() for d in found])
        return
    if not found:
        raise AutotuneError("no OpenCL device found (install pocl-binary-distribution)")
    table = Table(title="OpenCL devices")
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


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "--markdown",
    is_flag=True,
    help="Only the knob table, in markdown (the README's knob table is this output).",
)
def space(as_json: bool, markdown: bool) -> None:
    """Print the knobs, their values, the constraints and the presets."""
    from autotune.space import convolution_space

    if as_json and markdown:
        raise UsageError("give --json or --markdown, not both")
    if markdown:
        click.echo(convolution_space().markdown_table(), nl=False)
        return
    described = convolution_space().describe()
    if as_json:
        _print_json(described)
        return
    table = Table(
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
        console.print(f"  {c['rule']}  [dim]({c['reason']})[/dim]", highlight=False)
    presets = Table(title="presets (the seed kernels)")
    presets.add_column("preset")
    presets.add_column("kernel")
    presets.add_column("config")
    for name, p in described["presets"].items():
        presets.add_row(name, p["about"], json.dumps(p["config"]))
    console.print(presets)


def _config_from(preset: str | None, config_text: str | None) -> dict[str, Any]:
    from autotune.space import convolution_space

    space = convolution_space()
    if (preset is None) == (config_text is None):
        raise UsageError("give exactly one of --preset NAME or --config JSON")
    if preset is not None:
        if preset not in space.presets:
            raise UsageError(f"unknown preset {preset!r} (presets: {', '.join(space.presets)})")
        return dict(space.presets[preset].config)
    assert config_text is not None
    try:
        if config_text.startswith("@"):
            config_text = Path(config_text[1:]).read_text()
        config = json.loads(config_text)
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"--config is not valid JSON (or @file): {exc}") from None
    if not isinstance(config, dict):
        raise UsageError("--config must be a JSON object of knob: value")
    return space.complete(config)


FILTER_VALUES_HELP = (
    "Square filter (.npy) whose values a filter_space=literal kernel is compiled for "
    "(such a kernel ignores its filter argument)."
)


def _load_npy(label: str, path: str) -> Any:
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise UsageError(f"{label} {path} is not a readable .npy file: {exc}") from None


def _load_filter(path: str) -> Any:
    import numpy as np

    taps = _load_npy("--filter", path)
    if taps.ndim != 2 or taps.shape[0] != taps.shape[1] or taps.dtype.kind not in "fiu":
        raise UsageError(
            f"--filter {path} must hold a square array of numbers, got {taps.dtype} {taps.shape}"
        )
    return taps.astype(np.float32)


def _literal_needs_filter(width: int) -> UsageError:
    return UsageError(
        f"F={width}: filter_space=literal compiles the filter's values into the kernel; "
        "give them with --filter FILE.npy"
    )


@cli.command()
@click.option("--filter-width", "-f", required=True, type=int, help="Filter width F.")
@click.option("--preset", help="A seed preset (see `autotune space`).")
@click.option("--config", "config_text", help="Knobs as a JSON object, or @file.json.")
@click.option(
    "--device",
    "-d",
    "device_index",
    type=int,
    default=None,
    help="Check device limits and record this device in the manifest.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory for convolve_f<F>.cl and convolve_f<F>.json.",
)
@click.option(
    "--filter", "filter_path", type=click.Path(dir_okay=False), default=None, help=FILTER_VALUES_HELP
)
def render(
    filter_width: int,
    preset: str | None,
    config_text: str | None,
    device_index: int | None,
    out_dir: str,
    filter_path: str | None,
) -> None:
    """Write one kernel's source and manifest, exactly as `export` does."""
    from autotune.devices import device_info
    from autotune.export import write_kernel
    from autotune.families.conv2d.render import check_filter_width, generate, literal_filter
    from autotune.space import convolution_space

    check_filter_width(filter_width)
    config = _config_from(preset, config_text)
    device = device_info(device_index) if device_index is not None else None
    if device is not None:
        reasons = convolution_space().violations(config, {"filter_width": filter_width}, device)
        if reasons:
            raise UsageError(f"invalid configuration for {device.name}: {reasons[0]}")
    taps = _load_filter(filter_path) if filter_path is not None else None
    if taps is not None and taps.shape[0] != filter_width:
        side = taps.shape[0]
        raise UsageError(f"--filter holds a {side}x{side} filter, not {filter_width}x{filter_width}")
    if literal_filter(config) and taps is None:
        raise _literal_needs_filter(filter_width)
    variant = generate(config, filter_width, taps=taps)
    try:
        source_path, manifest_path = write_kernel(variant, out_dir, device)
    except OSError as exc:
        raise AutotuneError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    click.echo(f"wrote {source_path} and {manifest_path}")


@cli.command()
@_problem_options("3,5,7,9,11,17,33")
@click.option("--preset", "presets", multiple=True, help="Only these presets (repeatable).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the input data.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def study(
    device_index: int,
    widths_text: str,
    size_text: str | None,
    presets: tuple[str, ...],
    seed: int,
    as_json: bool,
) -> None:
    """Time every seed kernel per filter width: what each optimisation gives here."""
    from rich.progress import Progress

    from autotune.devices import device_info
    from autotune.space import convolution_space
    from autotune.study import run_study, speedups

    widths = parse_filter_widths(widths_text)
    device = device_info(device_index)
    size = _image_size(size_text, device, widths)
    known = convolution_space().presets
    for name in presets:
        if name not in known:
            raise UsageError(f"unknown preset {name!r} (presets: {', '.join(known)})")
    names = list(presets) or list(known)
    with Progress(console=errors, transient=True, disable=as_json) as progress:
        task = progress.add_task(f"{device.name}", total=len(widths) * len(names))
        rows = run_study(
            device_index, widths, size, names, seed=seed, on_row=lambda row: progress.advance(task)
        )
    gains = speedups(rows)
    if as_json:
        _print_json(
            {
                "device": device.to_dict(),
                "image_size": list(size),
                "rows": [
                    {
                        "filter_width": r.filter_width,
                        "preset": r.preset,
                        **r.measurement.to_dict(),
                        "gflops": r.gflops,
                        "speedup": gains.get((r.filter_width, r.preset)),
                    }
                    for r in rows
                ],
            }
        )
        return
    table = Table(
        title=f"seed study on {device.name}, {size[0]}x{size[1]} output: median ms (speed-up over baseline)"
    )
    table.add_column("preset")
    for width in widths:
        table.add_column(f"F={width}", justify="right")
    for name in names:
        cells = []
        for width in widths:
            row = next(r for r in rows if r.filter_width == width and r.preset == name)
            m = row.measurement
            cells.append(f"{m.time_ms:.3f} ({gains.get((width, name), 0):.2f}x)" if m.ok else m.status.value)
        table.add_row(name, *cells)
    console.print(table)
    failures = [r for r in rows if not r.measurement.ok]
    for r in failures:
        errors.print(
            f"F={r.filter_width} {r.preset}: {r.measurement.status.value}: {r.measurement.error}",
            highlight=False,
            markup=False,
        )


DB_HELP = (
    "Database URL (any SQLAlchemy URL) [default: $AUTOTUNE_DB, else a SQLite file in the user data dir]."
)


def _open_store(url: str | None) -> Any:
    from autotune.store import Store

    return Store(url)


def _device_row(store: Any, device_index: int | None) -> int | None:
    """The database id of a device given by its CLI index; None when it was never tuned."""
    if device_index is None:
        return None
    from autotune.devices import device_info

    info = device_info(device_index)
    for row in store.devices():
        if (row.platform, row.name, row.vendor, row.driver) == tuple(
            info.fingerprint[k] for k in ("platform", "name", "vendor", "driver")
        ):
            return row.id
    return -1


@cli.command()
@_problem_options("3,5,7")
@click.option("--trials", type=int, default=60, show_default=True, help="Trials per filter width.")
@click.option("--time-budget", type=float, default=None, help="Seconds for the whole search.")
@click.option(
    "--sampler",
    default=None,
    help="gp (the default), tpe-local, tpe, random, cmaes or grid.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--fresh", is_flag=True, help="Start a new run even if the same search can be resumed.")
@click.option(
    "--compilers",
    type=int,
    default=None,
    help="Processes compiling ahead [default: cores-1 on GPUs, 0 on CPUs].",
)
@click.option("--db", "db_url", default=None, help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def search(
    device_index: int,
    widths_text: str,
    size_text: str | None,
    trials: int,
    time_budget: float | None,
    sampler: str | None,
    seed: int,
    fresh: bool,
    compilers: int | None,
    db_url: str | None,
    as_json: bool,
) -> None:
    """Tune kernels for each filter width; every trial goes into the database."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from autotune.devices import device_info
    from autotune.search import DEFAULT_SAMPLER, SAMPLERS
    from autotune.tuner import Budget, Tuner

    widths = parse_filter_widths(widths_text)
    sampler = sampler or DEFAULT_SAMPLER
    if sampler not in SAMPLERS:
        raise UsageError(f"unknown sampler {sampler!r} (samplers: {', '.join(SAMPLERS)})")
    if trials <= 0:
        raise UsageError(f"--trials must be positive, got {trials}")
    if compilers is not None and not 0 <= compilers <= 64:
        raise UsageError(f"--compilers must be from 0 to 64, got {compilers}")
    if time_budget is not None and not time_budget > 0:
        raise UsageError(f"--time-budget must be a positive number of seconds, got {time_budget}")
    device = device_info(device_index)
    size = _image_size(size_text, device, widths)
    store = _open_store(db_url)

    progress = Progress(
        TextColumn("[bold]F={task.fields[width]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[note]}"),
        console=errors,
        disable=as_json,
        transient=False,
    )
    tasks: dict[int, Any] = {}
    best_so_far: dict[int, float] = {}

    def listen(kind: str, data: dict[str, Any]) -> None:
        if kind == "run" and data["resumed"] and not as_json:
            errors.print(f"resuming run {data['run_id']}", highlight=False)
        elif kind == "run" and data["finished"] and not as_json:
            errors.print(
                f"run {data['run_id']} already did this search (use --fresh to search again)", highlight=False
            )
        elif kind == "width":
            tasks[data["filter_width"]] = progress.add_task(
                "", total=data["total"], completed=data["done"], width=data["filter_width"], note=""
            )
        elif kind in ("trial", "cross_check"):
            trial = data["trial"]
            width = data["filter_width"]
            if trial.status == "ok" and trial.time_ms is not None:
                best_so_far[width] = min(best_so_far.get(width, float("inf")), trial.time_ms)
            note = f"best {best_so_far[width]:.4f} ms" if width in best_so_far else "no result yet"
            if kind == "cross_check":
                note += f" | other widths' winners: {data['done']}/{data['total']}"
                progress.update(tasks[width], note=note)
                return
            failed = ", ".join(f"{n} {k}" for k, n in sorted(data["failures"].items()))
            progress.update(
                tasks[width], completed=data["done"], note=note + (f" | failed: {failed}" if failed else "")
            )

    tuner = Tuner(
        store,
        device_index,
        device,
        widths,
        size,
        sampler=sampler,
        seed=seed,
        budget=Budget(trials=trials, time_s=time_budget),
        fresh=fresh,
        listener=listen,
        compilers=compilers,
    )
    with progress:
        results = tuner.run()
    _print_summary(results, device, size, tuner.run_id, as_json)
    if tuner.stop.requested:
        errors.print(
            "stopped: every finished trial is saved; run the same command again to resume", highlight=False
        )
        raise click.exceptions.Exit(130)


def _ratio(other: float | None, best: float | None) -> str:
    return f"{other / best:.2f}x" if other and best else "-"


def _print_summary(
    results: list[Any], device: Any, size: tuple[int, int], run_id: int | None, as_json: bool
) -> None:
    if as_json:
        _print_json(
            {
                "run_id": run_id,
                "device": device.to_dict(),
                "image_size": list(size),
                "results": [
                    {
                        "filter_width": r.filter_width,
                        "best_ms": r.best_ms,
                        "gflops": r.gflops,
                        "gbs": r.gbs,
                        "baseline_ms": r.baseline_ms,
                        "best_seed_preset": r.best_seed_preset,
                        "best_seed_ms": r.best_seed_ms,
                        "trials": r.trials,
                        "failures": dict(r.failures),
                        "config": r.best_config,
                        "interrupted": r.interrupted,
                    }
                    for r in results
                ],
            }
        )
        return
    table = Table(title=f"run {run_id}: best kernels on {device.name}, {size[0]}x{size[1]} output")
    for column in ("F", "best ms", "GFLOP/s", "GB/s", "vs baseline", "vs best seed", "trials"):
        table.add_column(column, justify="right")
    for r in results:
        seed = f"{_ratio(r.best_seed_ms, r.best_ms)} ({r.best_seed_preset})" if r.best_seed_preset else "-"
        table.add_row(
            str(r.filter_width),
            f"{r.best_ms:.4f}" if r.best_ms else "-",
            f"{r.gflops:.1f}" if r.gflops else "-",
            f"{r.gbs:.1f}" if r.gbs else "-",
            _ratio(r.baseline_ms, r.best_ms),
            seed,
            str(r.trials),
        )
    console.print(table)
    _print_configs((r.filter_width, r.best_config) for r in results)


def _print_configs(configs: Any) -> None:
    """Configs under a table, one line each: too wide for a table column."""
    for width, config in configs:
        if config:
            click.echo(f"F={width}: {json.dumps(config, separators=(',', ':'))}")


@cli.command()
@click.option("--device", "-d", "device_index", type=int, default=None, help="Only this device.")
@click.option("--filter-width", "-f", "filter_width", type=int, default=None, help="Only this width.")
@click.option(
    "--image-size",
    "-s",
    "size_text",
    default=None,
    help="With -d and -f: the output WIDTHxHEIGHT to answer for.",
)
@click.option("--db", "db_url", default=None, help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def best(
    device_index: int | None,
    filter_width: int | None,
    size_text: str | None,
    db_url: str | None,
    as_json: bool,
) -> None:
    """The best verified kernel per (device, filter width, image size).

    With both --device and --filter-width, answers like `autotune.convolve()` would,
    and says which fallback level answered (exact, nearest_image_size, same_vendor,
    default).
    """
    from autotune.space import convolution_space

    store = _open_store(db_url)
    if device_index is not None and filter_width is not None:
        _best_with_fallback(store, device_index, filter_width, size_text, as_json)
        return
    device_id = _device_row(store, device_index)
    rows = [] if device_id == -1 else store.best(device_id=device_id, filter_width=filter_width)
    records = []
    for row, device, problem in rows:
        flops = 2 * problem.filter_width**2 * problem.out_width * problem.out_height
        records.append(
            {
                "device": {
                    "name": device.name,
                    "vendor": device.vendor,
                    "driver": device.driver,
                    "platform": device.platform,
                },
                "filter_width": problem.filter_width,
                "image_size": [problem.out_width, problem.out_height],
                "time_ms": row.time_ms,
                "gflops": flops / (row.time_ms * 1e-3) / 1e9,
                "config": convolution_space().read_stored(row.config),
                "trial_id": row.trial_id,
                "fallback": "exact",
            }
        )
    if as_json:
        _print_json(records)
        return
    if not records:
        console.print("no tuned kernels yet (run `autotune search`)")
        return
    table = Table(title="best kernels")
    for column in ("device", "F", "image", "ms", "GFLOP/s"):
        table.add_column(column)
    for r in records:
        table.add_row(
            r["device"]["name"],
            str(r["filter_width"]),
            "x".join(map(str, r["image_size"])),
            f"{r['time_ms']:.4f}",
            f"{r['gflops']:.1f}",
        )
    console.print(table)
    _print_configs((r["filter_width"], r["config"]) for r in records)


def _best_with_fallback(
    store: Any, device_index: int, filter_width: int, size_text: str | None, as_json: bool
) -> None:
    from autotune.families.conv2d.render import check_filter_width
    from autotune.lookup import choose

    check_filter_width(filter_width)
    info, mine = _best_rows_for(store, device_index)
    if size_text:
        size = parse_image_size(size_text)
    else:
        tuned = [(p.out_width, p.out_height) for _, _, p in mine if p.filter_width == filter_width]
        size = max(tuned, key=lambda s: s[0] * s[1]) if tuned else (CPU_IMAGE if info.is_cpu else GPU_IMAGE)
    choice = choose(store.best(), info, filter_width, size)
    record = {
        "device": info.fingerprint,
        "filter_width": filter_width,
        "image_size": list(size),
        "fallback": choice.level,
        "config": choice.config,
        "time_ms": choice.time_ms,
        "tuned_image_size": list(choice.tuned_image_size) if choice.tuned_image_size else None,
        "tuned_device": choice.tuned_device,
    }
    if as_json:
        _print_json(record)
        return
    timing = f"{choice.time_ms:.4f} ms when tuned" if choice.time_ms else "not tuned"
    click.echo(f"F={filter_width} on {info.name}, {size[0]}x{size[1]}: {choice.level} ({timing})")
    _print_configs([(filter_width, choice.config)])


@cli.command()
@click.option("--db", "db_url", default=None, help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def history(db_url: str | None, as_json: bool) -> None:
    """Past search runs."""
    store = _open_store(db_url)
    records = []
    for run, device in store.runs():
        trials = store.trials(run_id=run.id)
        records.append(
            {
                "run_id": run.id,
                "device": device.name,
                "filter_widths": run.filter_widths,
                "image_size": [run.out_width, run.out_height],
                "sampler": run.sampler,
                "seed": run.seed,
                "trials_budget": run.trials_budget,
                "time_budget_s": run.time_budget_s,
                "status": run.status,
                "started_at": run.started_at.isoformat(),
                "finished_at": run.finished_at and run.finished_at.isoformat(),
                "trials": len(trials),
                "ok": sum(t.status == "ok" for t in trials),
                "tool_version": run.tool_version,
            }
        )
    if as_json:
        _print_json(records)
        return
    table = Table(title="search runs")
    for column in ("run", "device", "F", "image", "sampler", "status", "trials", "ok", "started (UTC)"):
        table.add_column(column)
    for r in records:
        table.add_row(
            str(r["run_id"]),
            r["device"],
            r["filter_widths"],
            "x".join(map(str, r["image_size"])),
            r["sampler"],
            r["status"],
            str(r["trials"]),
            str(r["ok"]),
            r["started_at"][:19],
        )
    console.print(table)


@cli.command()
@click.argument("run_id", type=int)
@click.option("--db", "db_url", default=None, help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def show(run_id: int, db_url: str | None, as_json: bool) -> None:
    """Every trial of one run, failures with the reason."""
    store = _open_store(db_url)
    if store.run(run_id) is None:
        raise UsageError(f"no run {run_id} in the database (see `autotune history`)")
    problems = store.problems()
    records = [
        {
            "trial_id": t.id,
            "filter_width": problems[t.problem_id].filter_width,
            "origin": t.origin,
            "status": t.status,
            "time_ms": t.time_ms,
            "min_ms": t.min_ms,
            "max_ms": t.max_ms,
            "runs": t.runs,
            "compile_ms": t.compile_ms,
            "config": json.loads(t.config),
            "error": t.error,
        }
        for t in store.trials(run_id=run_id)
    ]
    if as_json:
        _print_json(records)
        return
    table = Table(title=f"run {run_id}: {len(records)} trials")
    for column in ("trial", "F", "origin", "status", "ms", "config", "why"):
        table.add_column(column)
    for r in records:
        why = (r["error"] or "").splitlines()[0][:80] if r["error"] else ""
        table.add_row(
            str(r["trial_id"]),
            str(r["filter_width"]),
            r["origin"],
            r["status"],
            f"{r['time_ms']:.4f}" if r["time_ms"] else "-",
            json.dumps(r["config"], separators=(",", ":")),
            why,
        )
    console.print(table)


def _best_rows_for(store: Any, device_index: int) -> tuple[Any, list[Any]]:
    """This device's info and the database's best rows for it, nearest first per width."""
    from autotune.devices import device_info

    info = device_info(device_index)
    device_id = _device_row(store, device_index)
    return info, ([] if device_id == -1 else store.best(device_id=device_id))


@cli.command()
@click.option("--device", "-d", "device_index", type=int, default=0, show_default=True)
@click.option(
    "--filter-width",
    "-f",
    "widths_text",
    default=None,
    help="Comma list [default: every width tuned on this device].",
)
@click.option(
    "--image-size",
    "-s",
    "size_text",
    default=None,
    help="Prefer kernels tuned nearest this WIDTHxHEIGHT [default: the largest tuned].",
)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option(
    "--format",
    "formats_text",
    default="cl,json,header",
    show_default=True,
    help="Comma list of cl, json, header, t4.",
)
@click.option("--db", "db_url", default=None, help=DB_HELP)
@click.option(
    "--filter",
    "filter_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Square filter (.npy) to compile into kernels of its width whose best has the filter as literals "
    "[default: such widths export their fastest kernel that reads the filter argument].",
)
def export(
    device_index: int,
    widths_text: str | None,
    size_text: str | None,
    out_dir: str,
    formats_text: str,
    db_url: str | None,
    filter_path: str | None,
) -> None:
    """Write tuned kernels for other programs: .cl + manifest, a C header, T4 results.

    A best kernel with the filter compiled in (filter_space=literal) is only right for
    that filter: it is exported with the values given by --filter, or else replaced by
    the fastest measured kernel of that width that reads its filter argument."""
    from autotune.export import c_header, manifest, t4_results, write_kernel, write_text
    from autotune.families.conv2d.render import generate, literal_filter
    from autotune.lookup import fastest_reading_filter

    formats = [f.strip() for f in formats_text.split(",") if f.strip()]
    unknown = sorted(set(formats) - {"cl", "json", "header", "t4"})
    if unknown or not formats:
        raise UsageError(f"--format takes a comma list of cl, json, header, t4; got {formats_text!r}")
    wanted = parse_filter_widths(widths_text) if widths_text else None
    size = parse_image_size(size_text) if size_text else None
    taps = _load_filter(filter_path) if filter_path is not None else None
    store = _open_store(db_url)
    info, rows = _best_rows_for(store, device_index)
    by_width: dict[int, list[Any]] = {}
    for row in rows:
        by_width.setdefault(row[2].filter_width, []).append(row)
    widths = wanted if wanted is not None else sorted(by_width)
    missing = [w for w in widths if w not in by_width]
    if taps is not None and taps.shape[0] not in widths:
        missing = [taps.shape[0]]  # --filter names a width that is not exported
    if not widths or missing:
        which = f"F={missing[0]}" if missing else "any filter width"
        raise UsageError(
            f"no tuned kernel for {which} on device {device_index} ({info.name}); run `autotune search` first"
        )
    chosen = []
    for width in widths:
        candidates = by_width[width]
        if size is not None:
            import math

            best, _, problem = min(
                candidates,
                key=lambda r: abs(math.log((r[2].out_width * r[2].out_height) / (size[0] * size[1]))),
            )
        else:
            best, _, problem = max(candidates, key=lambda r: r[2].out_width * r[2].out_height)
        config = json.loads(best.config)
        if literal_filter(config):
            if taps is not None and taps.shape[0] == width:
                chosen.append((generate(config, width, taps=taps), best, problem))
                continue
            fastest = fastest_reading_filter(store.trials(device_id=best.device_id, problem_id=problem.id))
            if fastest is None:
                raise _literal_needs_filter(width)
            click.echo(
                f"F={width}: the best kernel ({best.time_ms:.4g} ms) has the filter compiled in; "
                f"exporting the fastest that reads its filter argument ({fastest.time_ms:.4g} ms; "
                "--filter FILE.npy exports the other)"
            )
            best, config = fastest, json.loads(fastest.config)
        chosen.append((generate(config, width), best, problem))
    out = Path(out_dir)
    written = []
    try:
        for variant, best, problem in chosen:
            image = (problem.out_width, problem.out_height)
            if "cl" in formats or "json" in formats:
                source_path, manifest_path = write_kernel(variant, out, info, image, best.time_ms)
                if "cl" not in formats:
                    source_path.unlink()
                if "json" not in formats:
                    manifest_path.unlink()
                written += [p for p, f in ((source_path, "cl"), (manifest_path, "json")) if f in formats]
        if "header" in formats:
            header = c_header(
                [(v, manifest(v, "", info, (p.out_width, p.out_height), b.time_ms)) for v, b, p in chosen]
            )
            written.append(write_text(out / "autotune_kernels.h", header))
        if "t4" in formats:
            problem_ids = {p.id for _, _, p in chosen}
            trials = [
                t
                for t in store.trials(device_id=_device_row(store, device_index))
                if t.problem_id in problem_ids
            ]
            data = t4_results(trials, store.problems())
            written.append(write_text(out / "autotune_t4.json", json.dumps(data, indent=1) + "\n"))
    except OSError as exc:
        raise AutotuneError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    for path in written:
        click.echo(f"wrote {path}")


@cli.command(name="convolve")
@click.argument("input_path", metavar="IN", type=click.Path(dir_okay=False))
@click.argument("output_path", metavar="OUT", type=click.Path(dir_okay=False))
@click.option(
    "--filter",
    "filter_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Square filter as a NumPy .npy file.",
)
@click.option("--device", "-d", "device_index", type=int, default=0, show_default=True)
@click.option("--mode", type=click.Choice(["valid", "same"]), default="valid", show_default=True)
@click.option("--flip", is_flag=True, help="True convolution (flip the filter).")
@click.option("--db", "db_url", default=None, help=DB_HELP)
def convolve_command(
    input_path: str,
    output_path: str,
    filter_path: str,
    device_index: int,
    mode: str,
    flip: bool,
    db_url: str | None,
) -> None:
    """Filter a NumPy .npy image with the best known kernel; writes OUT as .npy."""
    import numpy as np

    from autotune.runtime import convolve

    arrays = [_load_npy("IN", input_path), _load_npy("--filter", filter_path)]
    try:
        result = convolve(arrays[0], arrays[1], device=device_index, mode=mode, db=db_url, flip=flip)
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    try:
        with open(output_path, "wb") as f:
            np.save(f, result)
    except OSError as exc:
        raise AutotuneError(f"cannot write {output_path}: {exc.strerror or exc}") from None
    click.echo(f"wrote {output_path} ({result.shape[1]}x{result.shape[0]})")


@cli.command()
@click.argument("landscape", type=click.Path(dir_okay=False))
@click.option(
    "--sampler",
    "samplers_text",
    default=None,
    help="Sampler, or a comma list to compare [default: the search default].",
)
@click.option("--budget", type=int, default=200, show_default=True, help="Evaluations per repeat.")
@click.option("--repeats", type=int, default=20, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write convergence curves to this PNG (needs matplotlib).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def replay(
    landscape: str,
    samplers_text: str | None,
    budget: int,
    repeats: int,
    seed: int,
    plot_path: str | None,
    as_json: bool,
) -> None:
    """Replay searches on a measured landscape (Kernel Tuner cache or T4 results)."""
    from autotune import replay as replaying
    from autotune.search import DEFAULT_SAMPLER, SAMPLERS

    samplers = [s.strip() for s in (samplers_text or DEFAULT_SAMPLER).split(",") if s.strip()]
    for name in samplers:
        if name not in SAMPLERS:
            raise UsageError(f"unknown sampler {name!r} (samplers: {', '.join(SAMPLERS)})")
    if budget <= 0 or repeats <= 0:
        raise UsageError("--budget and --repeats must be positive")
    if not Path(landscape).is_file():
        raise UsageError(f"no such landscape file: {landscape}")
    loaded = replaying.load(landscape)
    budgets = tuple(sorted({b for b in replaying.BUDGETS if b < budget} | {budget}))
    summaries, curves = [], {}
    with _progress(as_json) as progress:
        for name in samplers:
            task = progress.add_task(name, total=repeats)
            traces = []
            for r in range(repeats):
                traces.append(replaying.replay_once(loaded, name, budget, seed + r))
                progress.advance(task)
            summaries.append({"sampler": name, **replaying.summarise(loaded, traces, budgets)})
            curves[name] = traces
    if plot_path:
        _plot(plot_path, loaded, curves, budget)
    if as_json:
        _print_json({"landscape": loaded.name, "repeats": repeats, "budget": budget, "results": summaries})
        return
    table = Table(title=f"{loaded.name}: best found / optimum ({loaded.optimum:.4g}), {repeats} repeats")
    for column in ("sampler", "budget", "median", "q1-q3", "P(<=5%)", "P(<=10%)"):
        table.add_column(column, justify="right")
    for summary in summaries:
        for row in summary["budgets"]:
            table.add_row(
                summary["sampler"],
                str(row["budget"]),
                f"{row['median']:.3f}",
                f"{row['q1']:.3f}-{row['q3']:.3f}",
                f"{row['p_within_5']:.2f}",
                f"{row['p_within_10']:.2f}",
            )
    console.print(table)
    for summary in summaries:
        for label in ("evaluations_to_5", "evaluations_to_10"):
            reach = summary[label]
            median = reach["median"] if reach["median"] is not None else "-"
            click.echo(
                f"{summary['sampler']}: {label.replace('_', ' ')}%: median {median} "
                f"(reached in {reach['reached']} of {reach['of']})"
            )


def _progress(disabled: bool) -> Any:
    from rich.progress import Progress

    return Progress(console=errors, transient=True, disable=disabled)


def _plot(path: str, landscape: Any, curves: dict[str, Any], budget: int) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib (pip install matplotlib)") from None
    import statistics

    figure, axes = plt.subplots(figsize=(7, 4.5))
    x = list(range(1, budget + 1))
    for name, traces in curves.items():
        median = [statistics.median(t.best_at(i) / landscape.optimum for t in traces) for i in x]
        axes.plot(x, median, label=name)
    axes.axhline(1.05, color="grey", linestyle="--", linewidth=0.8, label="within 5%")
    axes.set_xlabel("evaluations")
    axes.set_ylabel("median best found / optimum")
    axes.set_yscale("log")
    axes.set_title(landscape.name)
    axes.legend()
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=110)
    except OSError as exc:
        raise AutotuneError(f"cannot write {path}: {exc.strerror or exc}") from None


def _fail(message: str) -> None:
    first = " ".join(message.split())
    click.echo(f"autotune: error: {first}", err=True)


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
        message = exc.format_message().replace("\n", " ")
        _fail(message)
        return 2
    except click.ClickException as exc:
        _fail(exc.format_message())
        return exc.exit_code
    except AutotuneError as exc:
        _fail(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        errors.print("autotune: interrupted", highlight=False)
        return 130
    except Exception as exc:  # a bug: still one line, unless debugging
        if os.environ.get("AUTOTUNE_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (set AUTOTUNE_DEBUG=1 for the traceback)")
        return 1


if __name__ == "__main__":
    sys.exit(main())
