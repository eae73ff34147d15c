"""The report's figures, drawn with matplotlib from the collected data (`collect`).

Each figure has an id that names its file (`roofline_dev1.png`) and a kind
(`seed-study`, `roofline`, `convergence`, `times`, `importance`): `--figure` takes
either. A figure whose data is missing is not drawn; the page says why in words.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.errors import UsageError

KINDS = ("seed-study", "roofline", "convergence", "times", "importance")
ORIGIN_STYLE = {  # how each origin of a trial is marked
    "preset": ("tab:orange", "s", "seed preset"),
    "warm": ("tab:green", "^", "warm start"),
    "other_device": ("tab:purple", "v", "fast on another device"),
    "sampler": ("tab:blue", "o", "sampler"),
    "cached": ("tab:grey", "D", "answered from the database"),
}
DPI = 100


@dataclass(frozen=True)
class Figure:
    id: str
    kind: str
    title: str
    draw: Callable[[Any], None]  # fills a matplotlib Figure
    owner: tuple[Any, ...]  # ("device", id) or ("run", run id, problem id): where the page shows it
    size: tuple[float, float] = (5.6, 3.6)  # inches, at DPI

    def file_name(self, image_format: str) -> str:
        return f"{self.id}.{image_format}"


def slug(text: str) -> str:
    """A file-name-safe form of a label (`F=5` -> `F-5`)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-") or "x"


def _seed_study(device: dict[str, Any], rows: list[dict[str, Any]], family: str) -> Callable[[Any], None]:
    def draw(figure: Any) -> None:
        axes = figure.subplots()
        names = list(dict.fromkeys(n for r in rows for n in r["seed_study"]["speedup"]))
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(rows))]
            ys = [r["seed_study"]["speedup"].get(name, 0.0) for r in rows]
            colour = "black" if name == "tuned" else None
            axes.bar(xs, ys, width, label="tuned kernel" if name == "tuned" else name, color=colour)
        axes.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        # Kind labels (`F=3x5 uint8->uint8 mirror`) break into lines so neighbours stay apart.
        labels = [textwrap.fill(r["label"].replace(" @", "\n@"), 14) for r in rows]
        axes.set_xticks(range(len(rows)), labels, fontsize="small")
        axes.set_ylabel("speed-up over the naive kernel (baseline)")
        axes.set_title(f"seed study ({family}) on {device['name']}")
        axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)

    return draw


def _roofline(device: dict[str, Any]) -> Callable[[Any], None]:
    rows = [r for r in device["best"] if r["gflops"]]
    ceilings = device["ceilings"]

    def draw(figure: Any) -> None:
        axes = figure.subplots()
        intensity = [r["intensity"] for r in rows]
        low, high = min(intensity) / 4, max(intensity) * 4
        bandwidth, peak = ceilings["bandwidth_gbs"], ceilings["peak_gflops"]
        if bandwidth and peak:
            ridge = peak / bandwidth
            xs = sorted({low, high, min(max(ridge, low), high)})
            axes.plot(xs, [min(peak, bandwidth * x) for x in xs], color="black", label="roofline")
        if bandwidth:
            axes.plot(
                [low, high],
                [bandwidth * low, bandwidth * high],
                "k:",
                linewidth=0.8,
                label=f"copy bandwidth {bandwidth:.1f} GB/s",
            )
        if peak:
            axes.axhline(
                peak, color="black", linestyle="--", linewidth=0.8, label=f"FMA peak {peak:.1f} GFLOP/s"
            )
        markers = dict(zip(dict.fromkeys(r["family"] for r in rows), "o^sDv", strict=False))
        for family, marker in markers.items():
            mine = [r for r in rows if r["family"] == family]
            axes.scatter(
                [r["intensity"] for r in mine],
                [r["gflops"] for r in mine],
                color="tab:red",
                marker=marker,
                zorder=3,
                label=f"best kernel ({family})",
            )
        for i, r in enumerate(sorted(rows, key=lambda r: (r["intensity"], r["gflops"]))):
            axes.annotate(
                r["label"],
                (r["intensity"], r["gflops"]),
                textcoords="offset points",
                xytext=(4, 5 if i % 2 == 0 else -11),  # neighbours alternate above and below
                fontsize="x-small",
            )
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlim(low, high)
        achieved = [r["gflops"] for r in rows]
        axes.set_ylim(min(achieved) / 4, max([*achieved, peak or 0.0]) * 3)
        axes.set_xlabel("arithmetic intensity (FLOP per byte that must move)")
        axes.set_ylabel("GFLOP/s achieved")
        axes.set_title(f"roofline of {device['name']}")
        _plain_numbers(axes)
        axes.legend(fontsize="small", loc="lower right")

    return draw


def _plain_numbers(axes: Any) -> None:
    """Log axes labelled 20, 50, 0.5 rather than 2x10^1 (minor ticks: 2 and 5 only)."""
    import math

    from matplotlib.ticker import FuncFormatter

    def minor(value: float, _: int) -> str:
        leading = round(value / 10 ** math.floor(math.log10(value))) if value > 0 else 0
        return f"{value:g}" if leading in (2, 5) else ""

    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.set_minor_formatter(FuncFormatter(minor))


def _mark_trials(axes: Any, points: list[dict[str, Any]], x_key: str) -> None:
    ok = [p for p in points if p["time_ms"] is not None and p[x_key] is not None]
    steps = [p for p in points if p["best_ms"] is not None and p[x_key] is not None]
    axes.step(
        [p[x_key] for p in steps],
        [p["best_ms"] for p in steps],
        where="post",
        color="black",
        label="best so far",
    )
    for origin, (colour, marker, label) in ORIGIN_STYLE.items():
        mine = [p for p in ok if p["origin"] == origin]
        if mine:
            axes.scatter(
                [p[x_key] for p in mine],
                [p["time_ms"] for p in mine],
                color=colour,
                marker=marker,
                s=18,
                alpha=0.8,
                label=label,
            )
    failed = [p for p in points if p["time_ms"] is None and p[x_key] is not None]
    if failed and ok:
        top = max(p["time_ms"] for p in ok)
        axes.scatter(
            [p[x_key] for p in failed],
            [top] * len(failed),
            color="tab:red",
            marker="x",
            s=18,
            label="failed (drawn at the slowest)",
        )
    axes.set_yscale("log")
    axes.set_ylabel("median ms")


def _convergence(run: dict[str, Any], problem: dict[str, Any]) -> Callable[[Any], None]:
    def draw(figure: Any) -> None:
        by_trial, by_time = figure.subplots(1, 2, sharey=True)
        _mark_trials(by_trial, problem["trials"], "trial")
        by_trial.set_xlabel("trial")
        _mark_trials(by_time, problem["trials"], "seconds")
        by_time.set_xlabel("seconds since the run started")
        by_time.set_ylabel("")
        if problem["retimed_ms"] is not None:
            for axes in (by_trial, by_time):
                axes.axhline(
                    problem["retimed_ms"],
                    color="grey",
                    linestyle="--",
                    linewidth=0.8,
                    label="best after re-timing",
                )
        figure.legend(*by_trial.get_legend_handles_labels(), loc="outside right upper", fontsize="small")
        figure.suptitle(f"run {run['run_id']}, {problem['problem']}: best so far")

    return draw


def _times(run: dict[str, Any], problem: dict[str, Any]) -> Callable[[Any], None]:
    def draw(figure: Any) -> None:
        import numpy as np

        axes = figure.subplots()
        times = problem["times_ms"]
        bins = np.geomspace(min(times), max(times) * 1.0001, min(30, max(5, len(times) // 2)) + 1)
        axes.hist(times, bins=bins, color="tab:blue", edgecolor="white")
        axes.set_xscale("log")
        axes.set_xlabel("median ms of a verified kernel")
        axes.set_ylabel("kernels")
        axes.set_title(f"run {run['run_id']}, {problem['problem']}:\nmeasured times", fontsize="medium")

    return draw


def _importance(run: dict[str, Any], problem: dict[str, Any]) -> Callable[[Any], None]:
    knobs = problem["importance"]["knobs"]

    def draw(figure: Any) -> None:
        axes = figure.subplots()
        names = list(knobs)[::-1]
        axes.barh(names, [knobs[n] for n in names], color="tab:purple")
        axes.set_xlabel("importance (share, PED-ANOVA over log time)")
        axes.set_title(f"run {run['run_id']}, {problem['problem']}:\nwhich knobs mattered", fontsize="medium")

    return draw


def figures_of(data: dict[str, Any]) -> list[Figure]:
    """Every figure the data can fill, in page order."""
    found = []
    for device in data["devices"]:
        tag, owner = f"dev{device['id']}", ("device", device["id"])
        for family in dict.fromkeys(r["family"] for r in device["best"]):
            rows = [r for r in device["best"] if r["family"] == family and r["seed_study"]]
            if rows:
                size = (max(5.6, 2.6 + 0.9 * len(rows)), 3.6)
                draw = _seed_study(device, rows, family)
                found.append(
                    Figure(f"seed-study_{tag}_{family}", "seed-study", "seed study", draw, owner, size)
                )
        if any(r["gflops"] for r in device["best"]):
            found.append(Figure(f"roofline_{tag}", "roofline", "roofline", _roofline(device), owner))
    for run in data["runs"]:
        for problem in run["problems"]:
            tag = f"run{run['run_id']}_{slug(problem['problem'])}"
            owner = ("run", run["run_id"], problem["problem_id"])
            if any(p["best_ms"] is not None for p in problem["trials"]):
                draw = _convergence(run, problem)
                found.append(Figure(f"convergence_{tag}", "convergence", "best so far", draw, owner, (11, 4)))
            if problem["times_ms"]:
                found.append(Figure(f"times_{tag}", "times", "measured times", _times(run, problem), owner))
            if problem["importance"]["knobs"]:
                found.append(
                    Figure(
                        f"importance_{tag}", "importance", "knob importance", _importance(run, problem), owner
                    )
                )
    return found


def render(figure: Figure, image_format: str) -> bytes:
    """The figure as PNG or SVG bytes."""
    import io

    try:
        import matplotlib
    except ImportError:
        raise UsageError("the report's figures need matplotlib: pip install 'autotune[report]'") from None
    matplotlib.use("Agg")
    from matplotlib.figure import Figure as MatplotlibFigure

    canvas = MatplotlibFigure(figsize=figure.size, layout="constrained")
    figure.draw(canvas)
    buffer = io.BytesIO()
    canvas.savefig(
        buffer,
        format=image_format,
        dpi=DPI,
        metadata={"Software": None} if image_format == "png" else {"Date": None},
    )
    return buffer.getvalue()
