"""Commands that measure: search, study, replay."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import click

from autotune.cli.options import (
    db_option,
    family_options,
    json_option,
    open_store,
    parse_ranks,
    problem_options,
)
from autotune.cli.output import PlainTable, console, device_record, emit, errors, print_configs, progress
from autotune.errors import AutotuneError, UsageError
from autotune.files import write_file

# Seeds go to NumPy's and Optuna's generators, which take 0 .. 2**32 - 1; a bound on trials
# keeps a typing slip from overflowing the budget's arithmetic.
SEED = click.IntRange(0, 2**32 - 1)
MAX_TRIALS = 10**9


@click.command()
@problem_options("3,5,7")
@family_options
@click.option("--trials", type=int, default=60, show_default=True, help="Trials per filter width.")
@click.option("--time-budget", type=float, default=None, help="Seconds for the whole search.")
@click.option("--sampler", default=None, help="gp (the default), tpe-local, tpe, random, cmaes or grid.")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--fresh", is_flag=True, help="Start a new run even if the same search can be resumed.")
@click.option(
    "--other-devices/--no-other-devices",
    default=True,
    show_default=True,
    help="Start each problem from the fastest configs other devices of this type measured for it.",
)
@click.option(
    "--shared",
    is_flag=True,
    help="Share the search with every --shared process of the same device model on this database server "
    "(PostgreSQL): one Optuna study per problem, no point measured twice; --trials counts them all "
    "[sampler: gp, tpe or random].",
)
@click.option(
    "--compilers",
    type=int,
    default=None,
    help="Processes compiling ahead [default: cores-1 on GPUs, 0 on CPUs].",
)
@db_option
@json_option
def search(
    device_index: int,
    widths_text: str,
    size_text: str | None,
    family_name: str,
    ranks_text: str | None,
    pixels: dict[str, Any],
    trials: int,
    time_budget: float | None,
    sampler: str | None,
    seed: int,
    fresh: bool,
    other_devices: bool,
    shared: bool,
    compilers: int | None,
    db_url: str | None,
    as_json: bool,
) -> None:
    """Tune kernels for each filter width (and rank); every trial goes into the database."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from autotune.devices import device_info
    from autotune.evaluate import check_fits
    from autotune.families import get_family
    from autotune.families.conv2d.inputs import image_size, parse_filter_sizes
    from autotune.search import DEFAULT_SAMPLER, SAMPLERS, check_grid
    from autotune.tune import OTHER_DEVICES, Budget, Tuner
    from autotune.tune.shared import check_shared

    family = get_family(family_name)
    widths = parse_filter_sizes(widths_text)
    kinds = family.kinds(widths, parse_ranks(ranks_text), pixels)
    if shared:
        sampler = check_shared(sampler, fresh, db_url)
    sampler = sampler or DEFAULT_SAMPLER
    if sampler not in SAMPLERS:
        raise UsageError(f"unknown sampler {sampler!r} (samplers: {', '.join(SAMPLERS)})")
    if trials <= 0:
        raise UsageError(f"--trials must be positive, got {trials}")
    if trials > MAX_TRIALS:
        raise UsageError(f"--trials must be at most {MAX_TRIALS}, got {trials}")
    if sampler == "grid":
        check_grid(family.space)
    if compilers is not None and not 0 <= compilers <= 64:
        raise UsageError(f"--compilers must be from 0 to 64, got {compilers}")
    if time_budget is not None and not time_budget > 0:
        raise UsageError(f"--time-budget must be a positive number of seconds, got {time_budget}")
    device = device_info(device_index)
    if not device.double_precision and "float64" in (pixels.get("dtype"), pixels.get("out_dtype")):
        raise UsageError(f"float64 pixels need a device with double precision; {device.name} has none")
    size = image_size(size_text, device)
    problems = family.problems_of(kinds, size)
    check_fits(problems, device)
    store = open_store(db_url)

    bars = Progress(
        TextColumn("[bold]{task.fields[label]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[note]}"),
        console=errors,
        disable=as_json,
        transient=False,
    )
    tasks: dict[str, Any] = {}
    best_so_far: dict[str, float] = {}

    def listen(kind: str, data: dict[str, Any]) -> None:
        if kind == "run" and data["resumed"] and not as_json:
            errors.print(f"resuming run {data['run_id']}", highlight=False)
        elif kind == "run" and data["finished"] and not as_json:
            errors.print(
                f"run {data['run_id']} already did this search (use --fresh to search again)", highlight=False
            )
        elif kind == "problem":
            label = data["label"]
            tasks[label] = bars.add_task(
                "", total=data["total"], completed=data["done"], label=label, note=""
            )
        elif kind in ("trial", "cross_check"):
            trial, label = data["trial"], data["label"]
            if trial.status == "ok" and trial.time_ms is not None:
                best_so_far[label] = min(best_so_far.get(label, float("inf")), trial.time_ms)
            note = f"best {best_so_far[label]:.4f} ms" if label in best_so_far else "no result yet"
            if kind == "cross_check":
                note += f" | other widths' winners: {data['done']}/{data['total']}"
                bars.update(tasks[label], note=note)
                return
            failed = ", ".join(f"{n} {k}" for k, n in sorted(data["failures"].items()))
            bars.update(
                tasks[label], completed=data["done"], note=note + (f" | failed: {failed}" if failed else "")
            )

    tuner = Tuner(
        store,
        device_index,
        device,
        family,
        problems,
        sampler=sampler,
        seed=seed,
        budget=Budget(trials=trials, time_s=time_budget),
        fresh=fresh,
        listener=listen,
        compilers=compilers,
        shared=shared,
        other_devices=OTHER_DEVICES if other_devices else 0,
    )
    with bars:
        results = tuner.run()
    _print_summary(results, device, size, tuner.run_id, family.name, as_json)
    if tuner.stop.requested:
        errors.print(
            "stopped: every finished trial is saved; run the same command again to resume", highlight=False
        )
        raise click.exceptions.Exit(130)


def _ratio(other: float | None, best: float | None) -> str:
    return f"{other / best:.2f}x" if other and best else "-"


def _print_summary(
    results: list[Any],
    device: Any,
    size: tuple[int, int],
    run_id: int | None,
    family_name: str,
    as_json: bool,
) -> None:
    if as_json:
        emit(
            "search",
            {
                "run_id": run_id,
                "family": family_name,
                "device": device_record(device),
                "image_size": list(size),
                "results": [
                    {
                        **r.problem.kind(),
                        "problem": r.label,
                        "time_ms": r.best_ms,
                        "gflops": r.gflops,
                        "gbs": r.gbs,
                        "baseline_time_ms": r.baseline_ms,
                        "best_seed_preset": r.best_seed_preset,
                        "best_seed_time_ms": r.best_seed_ms,
                        "trials": r.trials,
                        "failures": dict(r.failures),
                        "config": r.best_config,
                        "interrupted": r.interrupted,
                    }
                    for r in results
                ],
            },
        )
        return
    table = PlainTable(title=f"run {run_id}: best kernels on {device.name}, {size[0]}x{size[1]} output")
    for column in ("problem", "best ms", "GFLOP/s", "GB/s", "vs baseline", "vs best seed", "trials"):
        table.add_column(column, justify="right")
    for r in results:
        seed = f"{_ratio(r.best_seed_ms, r.best_ms)} ({r.best_seed_preset})" if r.best_seed_preset else "-"
        table.add_row(
            r.label,
            f"{r.best_ms:.4f}" if r.best_ms else "-",
            f"{r.gflops:.1f}" if r.gflops else "-",
            f"{r.gbs:.1f}" if r.gbs else "-",
            _ratio(r.baseline_ms, r.best_ms),
            seed,
            str(r.trials),
        )
    console.print(table)
    print_configs((r.label, r.best_config) for r in results)


@click.command()
@problem_options("3,5,7,9,11,17,33")
@click.option("--preset", "presets", multiple=True, help="Only these presets (repeatable).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the input data.")
@json_option
def study(
    device_index: int,
    widths_text: str,
    size_text: str | None,
    presets: tuple[str, ...],
    seed: int,
    as_json: bool,
) -> None:
    """Time every seed kernel per filter width: what each optimisation gives here."""
    from autotune.devices import device_info
    from autotune.evaluate import check_fits
    from autotune.families.conv2d import CONV2D
    from autotune.families.conv2d.inputs import image_size, parse_filter_sizes
    from autotune.study import run_study, speedups

    widths = parse_filter_sizes(widths_text)
    device = device_info(device_index)
    size = image_size(size_text, device)
    known = CONV2D.space.presets
    for name in presets:
        if name not in known:
            raise UsageError(f"unknown preset {name!r} (presets: {', '.join(known)})")
    names = list(presets) or None  # None: the presets a search here would measure first
    problems = CONV2D.problems_of(CONV2D.kinds(widths), size, seed=seed)
    check_fits(problems, device)
    runs = sum(
        len(names) if names else len(CONV2D.space.presets_applying(problem.key(), device))
        for problem in problems
    )
    with progress(as_json) as bar:
        task = bar.add_task(f"{device.name}", total=runs)
        rows = run_study(device_index, CONV2D, problems, names, on_row=lambda row: bar.advance(task))
    gains = speedups(rows)
    if as_json:
        emit(
            "study",
            {
                "device": device_record(device),
                "image_size": list(size),
                "rows": [
                    {
                        **r.problem.kind(),
                        "problem": r.label,
                        "preset": r.preset,
                        **r.measurement.to_dict(),
                        "gflops": r.gflops,
                        "speedup": gains.get((r.problem, r.preset)),
                    }
                    for r in rows
                ],
            },
        )
        return
    table = PlainTable(
        title=f"seed study on {device.name}, {size[0]}x{size[1]} output: median ms (speed-up over baseline)"
    )
    table.add_column("preset")
    for problem in problems:
        table.add_column(CONV2D.describe_kind(problem.kind()), justify="right")
    measured = {(r.problem, r.preset): r.measurement for r in rows}
    for name in names or dict.fromkeys(r.preset for r in rows):  # as measured: a preset per row
        cells = []
        for problem in problems:
            m = measured.get((problem, name))
            if m is None:  # a preset that does not apply to this problem
                cells.append("-")
                continue
            cells.append(
                f"{m.time_ms:.3f} ({gains.get((problem, name), 0):.2f}x)" if m.ok else m.status.value
            )
        table.add_row(name, *cells)
    console.print(table)
    for r in rows:
        if not r.measurement.ok:
            errors.print(
                f"{r.label} {r.preset}: {r.measurement.status.value}: {r.measurement.error}",
                highlight=False,
                markup=False,
            )


@click.command()
@click.argument("landscape", type=click.Path(dir_okay=False))
@click.option(
    "--sampler",
    "samplers_text",
    default=None,
    help="Sampler, or a comma list to compare [default: the search default].",
)
@click.option("--budget", type=int, default=200, show_default=True, help="Evaluations per repeat.")
@click.option("--repeats", type=int, default=20, show_default=True)
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write convergence curves to this file, in the format its suffix names (PNG without one; "
    "needs matplotlib).",
)
@click.option(
    "--start-from",
    "start_from",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="A landscape of the same kernel on another device (repeatable): each repeat starts "
    "from the fastest points of a search replayed there, as a search on a new device "
    "starts from other devices' results in the database.",
)
@click.option(
    "--start-budget", type=int, default=100, show_default=True, help="Evaluations of each search there."
)
@click.option(
    "--start-points",
    type=int,
    default=5,
    show_default=True,
    help="Fastest points taken from each search there.",
)
@json_option
def replay(
    landscape: str,
    samplers_text: str | None,
    budget: int,
    repeats: int,
    seed: int,
    plot_path: str | None,
    start_from: tuple[str, ...],
    start_budget: int,
    start_points: int,
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
    if start_budget <= 0 or start_points <= 0:
        raise UsageError("--start-budget and --start-points must be positive")
    for path in (landscape, *start_from):
        if not Path(path).is_file():
            raise UsageError(f"no such landscape file: {path}")
    plot_format = _plot_format(plot_path) if plot_path else "png"
    loaded = replaying.load(landscape)
    others = []
    for path in start_from:
        if Path(path).resolve() == Path(landscape).resolve():
            raise UsageError(f"{path} is the landscape replayed: start points come from other landscapes")
        other = replaying.load(path)
        if not replaying.same_kernel(loaded, other):
            raise UsageError(f"{other.name} measures other knobs than {loaded.name}: no start points from it")
        others.append(other)
    budgets = tuple(sorted({b for b in replaying.BUDGETS if b < budget} | {budget}))
    summaries, curves = [], {}
    with progress(as_json) as bar:
        for name in samplers:
            count = min(repeats, replaying.START_ROUNDS) if others else 0
            task = bar.add_task(name, total=repeats + count)
            rounds = []
            for i in range(count):
                rounds.append(replaying.round_elsewhere(others, name, start_budget, seed, i))
                bar.advance(task)
            traces = []
            for r, first in enumerate(replaying.starts_per_repeat(rounds, repeats, start_points)):
                traces.append(replaying.replay_once(loaded, name, budget, seed + r, first=first))
                bar.advance(task)
            summaries.append({"sampler": name, **replaying.summarise(loaded, traces, budgets)})
            curves[name] = traces
    if plot_path:
        _plot(plot_path, plot_format, loaded, curves, budget)
    if as_json:
        data = {"landscape": loaded.name, "repeats": repeats, "budget": budget}
        if others:
            data |= {"start_from": [o.name for o in others], "start_points": start_points}
        emit("replay", {**data, "results": summaries})
        return
    title = f"{loaded.name}: best found / optimum ({loaded.optimum:.4g}), {repeats} repeats"
    if others:
        names = ", ".join(o.name for o in others)
        title += f", started from the {start_points} fastest of searches on {names}"
    table = PlainTable(title=title)
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


def _pyplot() -> Any:
    """matplotlib's pyplot, drawing off screen."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib (pip install matplotlib)") from None
    return plt


def _plot_format(path: str) -> str:
    """The format `path`'s suffix names (PNG without one), checked before any replay runs:
    a suffix matplotlib cannot write would otherwise fail only once every search is done."""
    _pyplot()
    import matplotlib
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = Path(path).suffix[1:].lower() or "png"
    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    if suffix not in formats:
        raise UsageError(
            f"--plot {path}: matplotlib cannot write .{suffix} files (formats: {', '.join(formats)})"
        )
    texsystem = matplotlib.rcParams["pgf.texsystem"]
    if suffix == "pgf" and shutil.which(texsystem) is None:
        raise UsageError(
            f"--plot {path}: matplotlib writes PGF files with {texsystem}, which is not installed"
        )
    return suffix


def _plot(path: str, plot_format: str, landscape: Any, curves: dict[str, Any], budget: int) -> None:
    import statistics

    plt = _pyplot()
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
        write_file(path, lambda f: figure.savefig(f, dpi=110, format=plot_format))
    except OSError as exc:
        raise AutotuneError(f"cannot write {path}: {exc.strerror or exc}") from None
    except RuntimeError as exc:  # a format that needs a program not installed (PGF: a TeX engine)
        raise AutotuneError(f"cannot write {path}: {exc}") from None
