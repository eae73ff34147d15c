"""Commands that write kernels or run them: render, export, convolve."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from autotune.cli.options import (
    db_option,
    family_options,
    given_pixels,
    json_option,
    open_store,
    parse_ranks,
)
from autotune.cli.output import device_record, emit
from autotune.errors import AutotuneError, UsageError
from autotune.files import StagedFiles, write_files

FILTER_VALUES_HELP = (
    "Square filter (.npy) whose values a filter_space=literal kernel is compiled for "
    "(such a kernel ignores its filter argument)."
)
FORMATS = ("cl", "json", "header", "t4")


def _config_from(preset: str | None, config_text: str | None) -> dict[str, Any]:
    from autotune.families.conv2d import CONV2D

    space = CONV2D.space
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


@click.command()
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
@json_option
def render(
    filter_width: int,
    preset: str | None,
    config_text: str | None,
    device_index: int | None,
    out_dir: str,
    filter_path: str | None,
    as_json: bool,
) -> None:
    """Write one kernel's source and manifest, exactly as `export` does."""
    from autotune.devices import device_info
    from autotune.export import manifest, write_kernel
    from autotune.families.conv2d import CONV2D
    from autotune.families.conv2d.inputs import load_filter
    from autotune.families.conv2d.render import check_filter_width, generate

    check_filter_width(filter_width)
    config = _config_from(preset, config_text)
    device = device_info(device_index) if device_index is not None else None
    if device is not None:
        reasons = CONV2D.space.violations(config, {"filter_width": filter_width}, device)
        if reasons:
            raise UsageError(f"invalid configuration for {device.name}: {reasons[0]}")
    taps = load_filter(filter_path) if filter_path is not None else None
    if taps is not None and taps.shape[0] != filter_width:
        side = taps.shape[0]
        raise UsageError(f"--filter holds a {side}x{side} filter, not {filter_width}x{filter_width}")
    if not CONV2D.serves_any_data(config) and taps is None:
        raise UsageError(f"F={filter_width}: {CONV2D.values_needed}")
    variant = generate(config, filter_width, CONV2D.space, taps)
    try:
        source_path, manifest_path = write_kernel(CONV2D, variant, out_dir, device)
    except OSError as exc:
        raise AutotuneError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    if as_json:
        written = [str(source_path), str(manifest_path)]
        data = manifest(CONV2D, variant, source_path.name, device)
        emit(
            "render",
            {"device": device_record(device) if device else None, "written": written, "manifest": data},
        )
        return
    click.echo(f"wrote {source_path} and {manifest_path}")


@click.command()
@click.option(
    "--device", "-d", "device_index", type=int, default=None, help="A device of this machine [default: 0]."
)
@click.option(
    "--device-name",
    "device_pattern",
    default=None,
    help="Devices in the database whose name matches (a part of the name, or a pattern such as '*H200*'), "
    "present on this machine or not; each gets a folder in --out.",
)
@click.option(
    "--all-devices", is_flag=True, help="Every device with tuned kernels in the database, each in a folder."
)
@click.option(
    "--filter-width",
    "--filter-size",
    "-f",
    "widths_text",
    default=None,
    help="Comma list of widths F or ROWSxF sizes [default: every kind tuned on the device(s)].",
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
    default=None,
    help="Comma list of cl, json, header, t4 [default: cl,json and the C header of the kernels it holds].",
)
@click.option(
    "--c-prefix",
    "c_prefix",
    default="autotune",
    show_default=True,
    help="Prefix of every name in the C header, and of its file name (<prefix>_kernels.h).",
)
@click.option(
    "--include-guard", default=None, help="The C header's include guard [default: one unique to the export]."
)
@db_option
@click.option(
    "--filter",
    "filter_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Square filter (.npy, or a name: gaussian:17, box:5, sobel-x, log:9) to compile into kernels of its "
    "width whose best has the filter as literals "
    "[default: such widths export their fastest kernel that reads the filter argument].",
)
@click.option(
    "--anchor",
    "anchor_text",
    default=None,
    help="With --border: X,Y, the filter's column and row over each output (cv2's anchor; -1: the "
    "centre) of the kinds -f and --filter name, or without -f, the kinds to export [default: the centre].",
)
@family_options
@json_option
def export(
    device_index: int | None,
    device_pattern: str | None,
    all_devices: bool,
    widths_text: str | None,
    size_text: str | None,
    out_dir: str,
    formats_text: str,
    c_prefix: str,
    include_guard: str | None,
    db_url: str | None,
    filter_path: str | None,
    anchor_text: str | None,
    family_name: str,
    ranks_text: str | None,
    pixels: dict[str, Any],
    as_json: bool,
) -> None:
    """Write tuned kernels for other programs: .cl + manifest, a C header, T4 results.

    A best kernel with the filter compiled in (filter_space=literal) is only right for
    that filter: it is exported with the values given by --filter, or else replaced by
    the fastest measured kernel of that width that reads its filter argument."""
    from autotune import export_set
    from autotune.devices import device_info
    from autotune.families import get_family
    from autotune.families.c_header import check_c_name
    from autotune.families.conv2d.inputs import load_filter, parse_filter_sizes, parse_image_size
    from autotune.families.conv2d.render import MAX_FILTER_WIDTH

    if sum((device_index is not None, device_pattern is not None, all_devices)) > 1:
        raise UsageError("give one of --device, --device-name and --all-devices")
    asked_header = formats_text is not None and "header" in formats_text
    formats_text = formats_text if formats_text is not None else "cl,json,header"
    formats = [f.strip() for f in formats_text.split(",") if f.strip()]
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise UsageError(f"--format takes a comma list of cl, json, header, t4; got {formats_text!r}")
    check_c_name(c_prefix, "--c-prefix")
    if include_guard is not None:
        check_c_name(include_guard, "--include-guard")
    family = get_family(family_name)
    if not asked_header and family.header_layout is None:
        formats = [f for f in formats if f != "header"]
    if "header" in formats and family.header_layout is None:
        raise UsageError(f"--format header is not written for the {family.name} family; use cl,json")
    widths = parse_filter_sizes(widths_text) if widths_text else None
    ranks = parse_ranks(ranks_text)
    if ranks and widths is None:
        raise UsageError("--rank needs --filter-width")
    size = parse_image_size(size_text) if size_text else None
    anchor = _anchor(anchor_text)
    if anchor is not None:
        if pixels.get("border", "none") == "none":
            raise UsageError("--anchor is for 'same' output: give --border too")
        pixels = {**pixels, "anchor": anchor}
    taps = load_filter(filter_path) if filter_path is not None else None
    store = open_store(db_url, read_only=True)
    several = device_pattern is not None or all_devices
    if several:
        devices = export_set.stored_devices(store, family, device_pattern)
    else:
        devices = [device_info(device_index or 0)]
    if widths is None:  # the options filter the tuned kinds; refused first as -f refuses them
        family.kinds([MAX_FILTER_WIDTH], None, pixels)
    kinds = family.kinds(widths or [], ranks, pixels) if widths is not None else None
    values = {}
    if taps is not None:
        kind, given = family.values_of_filter(taps, pixels)
        values[family.describe_kind(kind)] = given
    fields = {**given_pixels(pixels), **({"anchor": anchor} if anchor is not None else {})}
    request = export_set.ExportRequest(
        kinds, size, values, formats, asked_header, c_prefix, include_guard, fields=fields
    )
    out = Path(out_dir)
    files, parts = export_set.plan(store, family, devices, request, out, several)
    for part in parts:
        for item in part.chosen:
            if item.note and not as_json:
                click.echo(f"{part.device.name}: {item.note}" if several else item.note)
    try:
        # every file or none: a failure leaves whatever an earlier export wrote as it was
        for folder in sorted({path.parent for path, _ in files}):
            folder.mkdir(parents=True, exist_ok=True)
        written = write_files(files)
    except OSError as exc:
        raise AutotuneError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    if as_json:
        kernels = [
            {
                "device": part.device.name,
                "problem": family.describe_kind(e.problem.kind()),
                **e.problem.kind(),
                "image_size": list(e.problem.size),
                "time_ms": e.time_ms,
                "config": e.variant.config,
                "note": e.note,
            }
            for part in parts
            for e in part.chosen
        ]
        records = [device_record(part.device) for part in parts]
        data = {
            "device": records[0],
            "devices": records,
            "written": [str(p) for p in written],
            "kernels": kernels,
        }
        emit("export", data)
        return
    for path in written:
        click.echo(f"wrote {path}")


@click.command(name="convolve")
@click.argument("paths", metavar="IN... OUT", nargs=-1, required=True, type=click.Path())
@click.option(
    "--filter",
    "filter_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Filter (F x F or rows x F): a NumPy .npy file, or a name (gaussian:F[:SIGMA], box:F, log:F, "
    "dog:F, sobel-x, sobel-y, scharr-x/y, prewitt-x/y).",
)
@click.option("--device", "-d", "device_index", type=int, default=0, show_default=True)
@click.option("--mode", type=click.Choice(["valid", "same"]), default="valid", show_default=True)
@click.option("--flip", is_flag=True, help="True convolution (flip the filter).")
@click.option(
    "--border",
    default=None,
    help="With --mode same: constant (zeros; the default), replicate, reflect, mirror (cv2's "
    "default), wrap, or their OpenCV/SciPy names.",
)
@click.option(
    "--out-dtype",
    "out_dtype",
    type=click.Choice(["float32", "same"]),
    default="float32",
    show_default=True,
    help="Output float32, or the input's type (rounded to nearest even, saturated).",
)
@click.option(
    "--anchor",
    "anchor_text",
    default=None,
    help="With --mode same: X,Y, the filter's column and row over each output (cv2's anchor; -1: default).",
)
@click.option(
    "--batch", is_flag=True, help=".npy inputs of (N, H, W[, C]): N frames, filtered in one launch."
)
@db_option
@json_option
def convolve_command(
    paths: tuple[str, ...],
    filter_path: str,
    device_index: int,
    mode: str,
    flip: bool,
    border: str | None,
    out_dtype: str,
    anchor_text: str | None,
    batch: bool,
    db_url: str | None,
    as_json: bool,
) -> None:
    """Filter images (.npy, or PNG / TIFF: grey, grey with alpha, RGB, RGBA; every
    channel alike) with the best known kernel: IN OUT
    for one, or IN... DIR (written as DIR/<name>, with a progress bar) for many."""
    import numpy as np

    from autotune.cli.output import progress
    from autotune.convolver import Convolver
    from autotune.devices import device_info
    from autotune.families.conv2d.inputs import load_filter, load_npy
    from autotune.images import image_writer, is_image_file, read_image
    from autotune.runtime import MAX_INDEXED, convolve

    if len(paths) < 2:
        raise UsageError("give the input .npy file(s) and then OUT (a .npy file, or a folder for several)")
    if not all(p.strip() for p in paths):
        raise UsageError(
            "an empty path: give the input file(s) and then OUT (a file, or a folder for several)"
        )
    inputs, target = paths[:-1], Path(paths[-1])
    many = len(inputs) > 1 or target.is_dir()
    if many:
        names = [Path(p).name for p in inputs]
        if len(set(names)) < len(names):
            raise UsageError("input files share a name; their outputs in OUT would overwrite each other")
        if target.exists() and not target.is_dir():
            raise UsageError(f"{target} is a file: with several inputs OUT is a folder")
    outputs = [str(target / Path(p).name) if many else str(target) for p in inputs]
    for output in map(Path, outputs):  # before any work: the write would refuse them anyway
        if output.exists() and not output.resolve().is_file():
            raise UsageError(f"{output} exists and is not a file: OUT names a file to write (or a folder)")
    if out_dtype == "float32" and any(Path(o).suffix.lower() == ".png" for o in outputs):
        raise UsageError("a PNG file holds 8- or 16-bit pixels: add --out-dtype same, or write .tif or .npy")
    if batch and any(is_image_file(o) for o in outputs):
        raise UsageError("--batch makes (N, H, W[, C]) arrays of frames: write them to .npy")
    if mode == "valid" and border is not None:
        raise UsageError("--border applies to --mode same (valid output reads no pixel past the edge)")
    border = border or "constant"
    filt = load_filter(filter_path)
    anchor = _anchor(anchor_text)
    # A folder this call makes for OUT goes again if the call fails.
    with _folder_made_for(target if many else None):
        convolvers: dict[tuple[int, ...], Convolver] = {}  # one per image shape: set up once
        written, shapes = [], []
        # Outputs are staged as they are made and put in place together once every input is
        # filtered: a bad input (or a full disk) leaves no output of this call behind.
        with progress(as_json or not many) as bar, StagedFiles() as staged:
            task = bar.add_task("convolve", total=len(inputs))
            for input_path, output_path in zip(inputs, outputs, strict=True):
                image = (
                    read_image("IN", input_path) if is_image_file(input_path) else load_npy("IN", input_path)
                )
                options = {"device": device_index, "mode": mode, "db": db_url, "flip": flip}
                # A Convolver takes one float32 channel in and out, zeros past the edge; others: convolve().
                pixels = {"border": border, "out_dtype": out_dtype, "anchor": anchor, "batch": batch}
                zeros = mode == "valid" or border == "constant"
                plain = image.ndim == 2 and image.dtype == np.float32 and out_dtype == "float32" and zeros
                plain = plain and anchor is None and not batch
                try:
                    if not many or not plain or image.size >= MAX_INDEXED // 2:  # bands if need be
                        result = convolve(image, filt, **options, **pixels)
                    else:
                        if image.shape not in convolvers:
                            convolvers[image.shape] = Convolver(image.shape, filt, **options)
                        result = convolvers[image.shape](image)
                except (TypeError, ValueError) as exc:
                    raise UsageError(f"{input_path}: {exc}" if many else str(exc)) from None
                try:
                    # renamed over OUT once all are complete: a failure leaves earlier OUTs intact
                    if is_image_file(output_path):
                        staged.add(output_path, image_writer(output_path, result))
                    else:
                        staged.add(output_path, lambda f, r=result: np.save(f, r))
                except OSError as exc:
                    raise AutotuneError(f"cannot write {output_path}: {exc.strerror or exc}") from None
                written.append(output_path)
                shapes.append(list(result.shape))
                bar.advance(task)
    if as_json:
        data = {"device": device_record(device_info(device_index)), "written": written}
        emit("convolve", {**data, "shape": shapes[0] if not many else shapes, "mode": mode, "flip": flip})
        return
    for output_path, shape in zip(written, shapes, strict=True):
        frames, (height, width) = (shape[0], shape[1:3]) if batch else (1, shape[:2])
        size = f"{width}x{height}" + (f" x {frames} frames" if batch else "")
        channels = shape[3 if batch else 2] if len(shape) == 3 + int(batch) else 1
        click.echo(f"wrote {output_path} ({size}" + (f", {channels} channels)" if channels > 1 else ")"))


@contextlib.contextmanager
def _folder_made_for(folder: Path | None) -> Iterator[None]:
    """Make `folder` (and its missing parents) for the block; if the block fails, remove
    those this made, so a failed call leaves no folder that a later call would take for OUT."""
    if folder is None:
        yield
        return
    missing = [p for p in [folder, *folder.parents] if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        for made in missing:  # innermost first; one that holds anything stays
            with contextlib.suppress(OSError):
                made.rmdir()
        raise


def _anchor(text: str | None) -> tuple[int, int] | None:
    """`--anchor X,Y` as cv2's (x, y)."""
    if text is None:
        return None
    parts = text.split(",")
    try:
        x, y = (int(p) for p in parts)
    except ValueError:
        raise UsageError(f"--anchor takes X,Y (two integers, -1 for the default), got {text!r}") from None
    return (x, y)
