"""`autotune report`: a page of figures and tables from the database.

`write_report` collects the data (`collect`), adds each device's roofline ceilings
(`ceilings`), draws the figures (`figures`) and writes the page (`page`) with its
figures beside it, or the data alone as JSON, all files at once (`files.write_files`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune import __version__
from autotune.errors import AutotuneError, UsageError
from autotune.files import write_files
from autotune.report.ceilings import Ceilings, ceilings_for, local_indices
from autotune.report.collect import Scope, collect
from autotune.report.figures import KINDS, Figure, figures_of, render
from autotune.report.page import html
from autotune.store import Store

PAGE = "index.html"
DATA = "report.json"
EXPORTED_SUFFIXES = (".cl", ".json", ".h")

Progress = Callable[[str, int, int], None]  # (what, done, total)


@dataclass(frozen=True)
class ReportRequest:
    out_dir: Path
    scope: Scope = Scope()
    page_format: str = "html"  # html or json
    figure: str | None = None  # write this figure (id or kind) alone
    image_format: str = "png"  # png or svg
    given: Ceilings | None = None  # roofline ceilings from the command line
    measure: bool = True  # measure ceilings of devices on this machine


def _check_out_dir(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {path} is a file, not a folder")


def _out_dir(path: Path) -> Path:
    """The output folder, created; a folder that cannot be written is bad input."""
    _check_out_dir(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the folder {path}: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write the folder {path}")
    return path


def _link_exports(data: dict[str, Any], out_dir: Path) -> list[str]:
    """Mark each best kernel exported into `out_dir` (`autotune export --out` there, for
    this device and image size) with its files; every exported file in the folder."""
    for device in data["devices"]:
        for row in device["best"]:
            row["exported"] = []
            stem = row["export_stem"]
            manifest = out_dir / f"{stem}.json"
            if stem is None or not manifest.is_file():
                continue
            try:
                written = json.loads(manifest.read_text())
            except (OSError, ValueError):
                continue
            if (
                isinstance(written, dict)
                and written.get("device") == device["fingerprint"]
                and written.get("image_size") == row["image_size"]
            ):
                source = written.get("source")
                row["exported"] = [n for n in (source, manifest.name) if n and (out_dir / n).is_file()]
    return sorted(
        p.name
        for p in out_dir.iterdir()
        if p.is_file() and p.suffix in EXPORTED_SUFFIXES and p.name != DATA and not p.name.startswith(".")
    )


def _add_notes(data: dict[str, Any]) -> None:
    """Say in words what a device's figures leave out, and where its ceilings came from."""
    for device in data["devices"]:
        notes = device["notes"] = []
        rows = device["best"]
        if not rows:
            continue
        missing = [r["problem"] for r in rows if not r["seed_study"]]
        if len(missing) == len(rows):
            notes.append(
                "Seed study: no measurement of the naive kernel (the baseline preset) on this device, "
                "so no speed-ups to show (`autotune search` measures the seed presets first)."
            )
        elif missing:
            notes.append(f"Seed study: the naive kernel was never measured for {', '.join(missing)}.")
        source = device["ceilings"]["source"]
        notes.append(f"Roofline ceilings: {source}.")
        peak = device["ceilings"]["peak_gflops"]
        if peak and any((r["gflops"] or 0) > peak for r in rows):
            notes.append(
                "A kernel lies above the FMA ceiling: the measured peak is below the device's true one."
            )


def _choose(figures: list[Figure], name: str | None) -> list[Figure]:
    if name is None:
        return figures
    chosen = [f for f in figures if name in (f.id, f.kind)]
    if not chosen:
        ids = [f.id for f in figures]
        shown = ", ".join(ids[:6]) + (f" and {len(ids) - 6} more" if len(ids) > 6 else "")
        why = "no data in the database for it" if name in KINDS else "unknown figure"
        raise UsageError(f"{why}: {name!r} (kinds: {', '.join(KINDS)}; ids: {shown or 'none'})")
    return chosen


def write_report(store: Store, request: ReportRequest, progress: Progress | None = None) -> dict[str, Any]:
    """Write the page (or the data as JSON, or one figure) into `request.out_dir`;
    what was written: {"files": [...], "data": {...}}."""
    tell = progress or (lambda what, done, total: None)
    _check_out_dir(request.out_dir)
    tell("reading the database", 0, 1)
    data = collect(store, request.scope)
    here = local_indices() if data["devices"] else {}
    for index, device in enumerate(data["devices"]):
        device["index"] = here.get(json.dumps(device["fingerprint"], sort_keys=True))  # None: not here
        device["figures"] = []
        has_points = any(r["gflops"] for r in device["best"])
        wanted = request.figure in (None, "roofline", f"roofline_dev{device['id']}")
        tell(f"roofline ceilings of {device['name']}", index, len(data["devices"]))
        ceilings = (
            ceilings_for(device["index"], request.given, request.measure)
            if has_points and wanted
            else request.given or Ceilings(None, None, "not needed for this output")
        )
        device["ceilings"] = ceilings.to_dict()
    for run in data["runs"]:
        for problem in run["problems"]:
            problem["figures"] = []
    _add_notes(data)
    figures = _choose(figures_of(data), request.figure) if request.page_format == "html" else []
    out_dir = _out_dir(request.out_dir)
    exports = _link_exports(data, out_dir)
    meta = {
        "database": _shown_url(store.url),
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "version": __version__,
    }
    files: list[tuple[Path, str | bytes]] = []
    if request.page_format == "json":
        data["exported_files"] = exports
        files.append((out_dir / DATA, json.dumps({"meta": meta, **data}, indent=2) + "\n"))
    else:
        for done, figure in enumerate(figures):
            tell(f"drawing {figure.id}", done, len(figures))
            name = figure.file_name(request.image_format)
            files.append((out_dir / name, render(figure, request.image_format)))
            _attach_entry(data, figure, name)
        if request.figure is None:
            files.append((out_dir / PAGE, html(data, meta, exports)))
    tell("writing", 0, 1)
    try:
        write_files(files)
    except OSError as exc:
        raise AutotuneError(f"cannot write into {out_dir}: {exc.strerror or exc}") from None
    return {"files": [str(path) for path, _ in files], "data": {"meta": meta, **data}}


def _attach_entry(data: dict[str, Any], figure: Figure, file_name: str) -> None:
    entry = {"id": figure.id, "kind": figure.kind, "title": figure.title, "file": file_name}
    for device in data["devices"]:
        if figure.owner == ("device", device["id"]):
            device["figures"].append(entry)
    for run in data["runs"]:
        for problem in run["problems"]:
            if figure.owner == ("run", run["run_id"], problem["problem_id"]):
                problem["figures"].append(entry)


def _shown_url(url: str) -> str:
    import sqlalchemy as sa

    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL was refused when the store opened; shown as given
        return url
