#!/usr/bin/env python3
"""Random problems and random valid configs of either kernel family, each stored as the
best kernel of a fresh SQLite database (through the store's own API) and taken out with
`autotune export` in a subprocess, as a user takes a tuned kernel into another project.
The exported kernel is then checked the way such a project uses it:

(a) launched with plain pyopencl from its manifest alone (arguments by the names the
    manifest lists, launch geometry by its rule, edge rows, batches, scratch buffers) on
    random data at the tuned size and another, against the family's float64 reference
    after the same rounding, with a canary after the output;
(b) every `--host-every`th draw (a problem the example host can read), the C host
    example built against the exported header with gcc and run on the same data;
(c) the manifest's fields against the problem (pixel types, channels, border, anchor,
    filter shape, batch, filter compiled in or not) and its `arguments` against the
    kernel's signature in the .cl, the file names and `--json` record against the kind.

At times the database also holds the kind at a second size (export takes the largest, or
the one -s names or is nearest), another kind (export without -f writes both), the kind
on another device (one header, a folder each), the kernels only under another device's
name (the C host then runs the header's default entry), or a row of a later release
(a problem field this one does not know: left out); export is asked by device, device
name or all devices, with or without -f and the pixel options, --filter, --format,
--c-prefix.

    python checks/fuzz_export.py --seeds 0-299 [--device 0] [--family conv2d|separable]
                                 [--host-every 10] [--jobs 1]

Prints one line per defect with what reproduces it, then counts. Exits 1 on any defect.
Each draw runs in a child process of its own (a kernel that crashes is a defect of its
draw, not the end of the run). Not part of the test suite: a few hundred draws take tens
of minutes on PoCL.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "checks")]

from fuzz_kernels import SIZES, draw_config, draw_problem, seeds  # noqa: E402

from autotune.devices import DeviceInfo, device_info, open_device  # noqa: E402
from autotune.errors import AutotuneError  # noqa: E402
from autotune.families import KernelFamily, get_family  # noqa: E402
from autotune.families.base import size_distance  # noqa: E402
from autotune.families.conv2d.problem import correlate_valid  # noqa: E402
from autotune.families.conv2d.problem import tolerance as conv2d_tolerance  # noqa: E402
from autotune.families.image import PIXEL_TYPES, pad_for_border, rounding_error, saturated  # noqa: E402
from autotune.families.separable.problem import MAX_RANK, full_filter  # noqa: E402
from autotune.families.separable.problem import tolerance as separable_tolerance  # noqa: E402
from autotune.families.separable.terms import separable_terms  # noqa: E402
from autotune.store import Store, config_key  # noqa: E402
from tests.opencl_runner import kernel_signatures  # noqa: E402
from tests.stored import store_best as store_tuned  # noqa: E402

FAMILIES = ("conv2d", "separable")
HOST_SOURCE = ROOT / "examples" / "c_host" / "convolve_host.c"
HOST_COMPILE = ("gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11")
BORDER_VALUES = (0.0, 0.0, 1.5, -0.75, 7.5)
NUMPY_OF_OPENCL = {opencl: np.dtype(name) for name, opencl in PIXEL_TYPES.items()}
CANARY = 64  # values after the output a kernel must not write
CHILD_TIMEOUT_S = 900


# --- drawing and exporting -------------------------------------------------------------


def host_runs(family: KernelFamily, problem: Any) -> bool:
    """Whether the example C host can read this problem's images and find its kind: 8- or
    16-bit PGM/PPM (one or three channels), or raw values of any pixel type (`-t`), 1-4
    channels, frames one after another (`-n`); the separable header holds float32 'valid'
    kernels only."""
    key = problem.key()
    dtype, out_dtype = key.get("dtype", "float32"), key.get("out_dtype", "float32")
    if out_dtype not in (dtype, "float32"):
        return False
    if family.name == "separable":
        return (dtype, out_dtype, key.get("border", "none")) == ("float32", "float32", "none")
    return True


def header_holds(family: KernelFamily, problem: Any) -> bool:
    """Whether the C header holds this problem's kernel (README): every kind of the direct
    family; float32 'valid' kernels of the separable family."""
    if family.name == "conv2d":
        return True
    key = problem.key()
    return (key.get("dtype", "float32"), key.get("out_dtype", "float32"), key.get("border", "none")) == (
        "float32",
        "float32",
        "none",
    )


def store_best(url: str, family: KernelFamily, device: DeviceInfo, stored: list[Any]) -> None:
    """A database in which each `Tuned` kind's best kernel on `device` is its first config,
    the others measured slower (what a search leaves), written through the store's API."""
    for tuned in stored:
        store_tuned(url, family, tuned.problem, tuned.configs, device)


def store_later_release_row(url: str, family: KernelFamily, device: DeviceInfo, tuned: Any) -> None:
    """A best row of a problem with a field this release does not know, as a later release
    sharing the database writes it: export must leave it out and write the rest."""
    store = Store(url)
    try:
        device_id = store.device_id(device)
        key = {**tuned.problem.key(), "from_a_later_release": 2}
        problem_id = store.problem_id(family.name, key)
        run = store.start_run(
            device_id=device_id,
            key=f"fuzz-export later {json.dumps(key)}",
            family=family.name,
            problems=json.dumps([key]),
            sampler="random",
            seed=0,
            trials_budget=1,
            time_budget_s=None,
            tool_version="99.0.0",
        )
        config = tuned.configs[0]
        trial = store.add_trial(
            run_id=run.id,
            device_id=device_id,
            problem_id=problem_id,
            number=0,
            origin="sampler",
            config=json.dumps(config),
            config_key=config_key(config),
            status="ok",
            time_ms=0.5,
            runs=1,
            kernel_sha="0" * 64,
        )
        store.set_best(device_id, problem_id, trial, 0.5)
    finally:
        store.close()


def expected_fields(family: KernelFamily, problem: Any, compiled_in: bool) -> dict[str, Any]:
    """What the README says a manifest of this problem's kernel holds."""
    if family.name == "conv2d":
        fields: dict[str, Any] = {
            "family": "conv2d",
            "filter_width": problem.filter_width,
            "filter_height": problem.filter_rows,
            "dtype": problem.dtype,
            "out_dtype": problem.out_dtype,
            "border": problem.border,
            "channels": problem.channels,
            "batch": problem.frames > 1,
            "filter_compiled_in": compiled_in,
        }
        if problem.same:
            fields.update(anchor=problem.anchor_column, anchor_y=problem.anchor_row)
        return fields
    fields = {
        "family": "separable",
        "filter_width": problem.filter_width,
        "rank": problem.rank,
        "dtype": problem.dtype,
        "out_dtype": problem.out_dtype,
        "border": problem.border,
        "taps_compiled_in": compiled_in,
    }
    if problem.same:
        fields["anchor"] = problem.anchor_tap
    return fields


def pixel_options(family: KernelFamily, problem: Any) -> list[str]:
    """The export options that name this problem's kind: -f, --rank, pixels, border, channels,
    frames, anchor."""
    key = problem.key()
    size = str(key["filter_width"])
    if key.get("filter_height", 0):
        size = f"{key['filter_height']}x{size}"
    options = ["-f", size]
    if family.name == "separable":
        options += ["--rank", str(key["rank"])]
    dtype, out_dtype = key.get("dtype", "float32"), key.get("out_dtype", "float32")
    options += ["--dtype", dtype, "--out-dtype", "same" if out_dtype == dtype else out_dtype]
    options += ["--border", key.get("border", "none")]
    if family.name == "conv2d":
        options += ["--channels", str(key.get("channels", 1)), "--frames", str(key.get("frames", 1))]
    if key.get("anchor", -1) != -1 or key.get("anchor_y", -1) != -1:
        if family.name == "conv2d":
            options += ["--anchor", f"{problem.anchor_column},{problem.anchor_row}"]
        else:
            options += ["--anchor", f"{problem.anchor_tap},{problem.anchor_tap}"]
    return options


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """`python -m autotune ARGS` as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, env=env, timeout=600
    )


# --- running an exported kernel from its manifest alone ---------------------------------


def _parameter(declaration: str) -> tuple[str, str | None]:
    """(name, element type of a pointer or None) of one declared kernel parameter."""
    words = declaration.replace("*", " * ").split()
    if "*" not in words:
        return words[-1], None
    return words[-1], words[words.index("*") - 1]


def border_group_rows(manifest: dict[str, Any], row_values: int, rows: int, global_x: int) -> int:
    """The rows a `border_groups` kernel's launch adds, as the manifest's `border_groups`
    entry spells them out."""
    filter_rows, filter_width = manifest["filter_height"], manifest["filter_width"]
    anchor_x, anchor_y, channels = manifest["anchor"], manifest["anchor_y"], manifest["channels"]
    step, work_y = manifest["tile_values"], manifest["work_per_item"][1]
    box_x = min(-(-anchor_x * channels // step) * step, row_values)
    box_y = min(-(-anchor_y // work_y) * work_y, rows)
    box_w = max(max(row_values - (filter_width - 1 - anchor_x) * channels, 0) // step * step - box_x, 0)
    box_h = max(max(rows - (filter_rows - 1 - anchor_y), 0) // work_y * work_y - box_y, 0)
    edge_outputs = row_values * rows - box_w * box_h
    local_y = manifest["local_size"][1]
    per_row = global_x * local_y * manifest["edge_outputs_per_item"]
    return -(-edge_outputs // per_row) * local_y


def _global_size(extent: list[int], work: list[int], local: list[int]) -> list[int]:
    """The manifest's launch rule: roundup(ceil(extent[d] / work_per_item[d]), local_size[d])."""
    sizes = []
    for out, per_item, group in zip(extent, work, local, strict=True):
        items = -(-out // per_item)
        sizes.append(-(-items // group) * group)
    return sizes


class ManifestHost:
    """A host program that knows an exported kernel only by its .cl and manifest."""

    def __init__(self, device_index: int) -> None:
        import pyopencl as cl

        self.cl = cl
        _, device = open_device(device_index)
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context)
        self.global_sizes: list[list[int]] = []  # of every launch, in order

    def run(
        self,
        manifest: dict[str, Any],
        source: str,
        image: np.ndarray,
        taps: dict[str, np.ndarray],
        out_shape: tuple[int, ...],
        sizes: dict[str, int],
        border_value: float,
    ) -> tuple[np.ndarray, str | None]:
        """Launch the kernel(s) on `image` (any pixel type, C-ordered) and taps by name; the
        output of `out_shape` in the manifest's out_dtype, and a defect found on the way."""
        cl, mf = self.cl, self.cl.mem_flags
        program = cl.Program(self.context, source).build(options=list(manifest["build_options"]))
        out_dtype = np.dtype(manifest["out_dtype"])
        count = int(np.prod(out_shape))
        fill = np.frombuffer(np.full((count + CANARY) * out_dtype.itemsize, 0xA5, np.uint8), out_dtype)
        buffers = {
            "input": cl.Buffer(self.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=image),
            "output": cl.Buffer(self.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=fill.copy()),
        }
        for name, values in taps.items():
            buffers[name] = cl.Buffer(self.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=values)
        scratch_rows = sizes["in_height"] + (
            manifest["filter_width"] - 1 if manifest["border"] != "none" else 0
        )
        if "scratch" in manifest:
            pitch = -(-sizes["out_width"] // 4) * 4
            floats = manifest["rank"] * scratch_rows * pitch
            buffers["rows"] = cl.Buffer(self.context, mf.READ_WRITE, size=4 * max(floats, 1))
        scalars = {**sizes, "border_value": border_value, "scratch_rows": scratch_rows}
        launches = manifest.get("launches") or [
            {**manifest, "extent": ["out_width", "out_height"]}  # one launch: the manifest itself
        ]
        element_types = {"input": image.dtype, "output": out_dtype}
        for launch in launches:
            kernel = cl.Kernel(program, launch["kernel_name"])
            arguments = []
            for declaration in launch["arguments"]:
                name, element = _parameter(declaration)
                known = name.removeprefix("unused_")
                if element is not None:
                    if known not in buffers:
                        return fill, f"argument {declaration!r}: no such buffer in the ABI"
                    wanted = element_types.get(known, np.dtype(np.float32))
                    if NUMPY_OF_OPENCL.get(element) != wanted:
                        return fill, f"argument {declaration!r} is not of {wanted} pixels"
                    arguments.append(buffers[known])
                elif name not in scalars:
                    return fill, f"argument {declaration!r}: no such value in the ABI"
                elif declaration.split()[-2] == "float":
                    arguments.append(np.float32(scalars[name]))
                else:
                    arguments.append(np.int32(scalars[name]))
            extent = [scalars[e] for e in launch["extent"]]  # widths in values: pixels x channels
            local = list(launch["local_size"])[:2]
            global_size = _global_size(extent, list(launch["work_per_item"])[:2], local)
            if manifest.get("border_groups"):
                global_size[1] += border_group_rows(manifest, extent[0], extent[1], global_size[0])
            if manifest.get("batch"):
                global_size.append(sizes["frames"])
                local.append(1)
            kernel(self.queue, tuple(global_size), tuple(local), *arguments)
            self.global_sizes.append(global_size)
        result = np.empty_like(fill)
        cl.enqueue_copy(self.queue, result, buffers["output"])
        self.queue.finish()
        if result[count:].tobytes() != fill[count:].tobytes():
            return result[:count].reshape(out_shape), "wrote past the end of the output buffer"
        return result[:count].reshape(out_shape), None


# --- data, reference, comparison ---------------------------------------------------------


def conv2d_reference(
    image: np.ndarray, filt: np.ndarray, problem: Any, border_value: float
) -> tuple[np.ndarray, float]:
    """The float64 answer for (frames, H, W, C) pixels and its tolerance, as the family's
    reference and tolerance compute them, with the constant border's value given."""
    frames, height, width, channels = image.shape
    rows, taps = filt.shape
    same = problem.same
    out_h, out_w = (height, width) if same else (height - rows + 1, width - taps + 1)
    out = np.empty((frames, out_h, out_w, channels))
    for frame in range(frames):
        for channel in range(channels):
            plane = image[frame, :, :, channel].astype(np.float64)
            if same:
                ay, ax = problem.anchor_row, problem.anchor_column
                plane = pad_for_border(
                    plane, (ay, ax), (rows - 1 - ay, taps - 1 - ax), problem.border, border_value
                )
            out[frame, :, :, channel] = correlate_valid(plane, filt)
    out = saturated(out, problem.out_dtype)
    read = np.append(image.astype(np.float64).ravel(), border_value if problem.border == "constant" else 0)
    bound = conv2d_tolerance(read, filt) + rounding_error(problem.out_dtype, lambda: out)
    return out, bound


def separable_reference(
    image: np.ndarray,
    terms: tuple[np.ndarray, np.ndarray],
    filt: np.ndarray,
    problem: Any,
    border_value: float,
) -> tuple[np.ndarray, float]:
    """The float64 answer of `filt` on an (H, W) image and its tolerance: the family's
    bound for the terms a kernel sums (`terms`), plus how far they are from `filt`."""
    plane = image.astype(np.float64)
    if problem.same:
        before = problem.anchor_tap
        after = problem.filter_width - 1 - before
        plane = pad_for_border(plane, (before, before), (after, after), problem.border, border_value)
    out = saturated(correlate_valid(plane, filt), problem.out_dtype)
    read = np.append(image.astype(np.float64).ravel(), border_value if problem.border == "constant" else 0)
    apart = float(np.abs(full_filter(*terms) - filt).sum()) * float(np.abs(read).max())
    bound = separable_tolerance(read, *terms) + apart + rounding_error(problem.out_dtype, lambda: out)
    return out, bound


def compare(got: np.ndarray, expected: np.ndarray, bound: float) -> str | None:
    """None where every output is within `bound` of the reference; else the first bad one."""
    got = got.astype(np.float64).reshape(expected.shape)
    difference = np.abs(got - expected)
    bad = ~(difference <= bound)
    if not bad.any():
        return None
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return (
        f"{int(bad.sum())} of {bad.size} outputs wrong, first at {index}: got {got[index]:.6g}, "
        f"expected {expected[index]:.6g} (tolerance {bound:.3g})"
    )


def draw_data(
    family: KernelFamily, problem: Any, size: tuple[int, int], frames: int, seed: int
) -> tuple[Any, np.ndarray, dict[str, np.ndarray]]:
    """A problem of the same kind at `size` (and `frames`), its seeded image and taps, as
    the family draws them (integer outputs get filters that keep most outputs in range)."""
    fields = {**problem.kind(), "out_width": size[0], "out_height": size[1]}
    if family.name == "conv2d":
        fields["frames"] = frames
    run = family.problem(fields, seed=seed)
    inputs = run.inputs()
    return run, np.ascontiguousarray(inputs.pop("input")), inputs


# --- one draw ---------------------------------------------------------------------------


@dataclass
class Tuned:
    """One kind as the database holds it for the draw: its problem (kind and tuned size)
    and the configs measured, the best first (a literal best's argument-reading twin next)."""

    problem: Any
    configs: list[dict[str, Any]]

    @property
    def literal(self) -> bool:
        return len(self.configs) > 1


@dataclass
class Exported:
    """What one exported kernel should be: its kind, the config and size chosen, and
    whether its filter is compiled in."""

    tuned: Tuned
    config: dict[str, Any]
    compiled_in: bool
    noted: bool  # export says it replaced the best (a literal best without --filter)


class Draw:
    """Everything one seed does; `defects` collects what it found."""

    def __init__(self, seed: int, device_index: int, family_name: str | None, host_every: int) -> None:
        self.seed = seed
        self.device_index = device_index
        self.rng = random.Random(seed)
        self.family = get_family(family_name or self.rng.choice(FAMILIES))
        self.device = device_info(device_index)
        self.with_host = host_every > 0 and seed % host_every == 0
        self.defects: list[str] = []
        self.problem: Any = None
        self.config: dict[str, Any] | None = None
        self.tuned_on = self.device  # the device the database says the kernels were tuned on
        self.host_bytes = False
        self.baked = False  # the exported kernel has the filter given with --filter compiled in
        # (out width in pixels, out height, frames) -> the global size launched from the manifest
        self.launched: list[tuple[tuple[int, int, int], list[int]]] = []

    def defect(self, text: str) -> None:
        self.defects.append(text)

    def _tuned(self, problem: Any) -> Tuned | None:
        """A random valid config for `problem` (with its twin where it is literal), or None."""
        config = draw_config(self.family, problem, self.device, self.rng)
        if config is None:
            return None
        config = self.family.space.complete(config)
        configs = [config]
        if not self.family.serves_any_data(config):  # a search also measures kernels reading the argument
            configs.append(self.family.any_data_twin(config, problem, self.device))
        return Tuned(problem, configs)

    def run(self, work: Path) -> str:
        """The draw's outcome: ok, defect, or why nothing was checked."""
        rng, family = self.rng, self.family
        for _ in range(200):
            self.problem = draw_problem(family, rng)
            if not self.with_host or host_runs(family, self.problem):
                break
        if self.problem.key().get("dtype") == "float64" and not self.device.double_precision:
            return "no double precision"
        main = self._tuned(self.problem)
        if main is None:
            return "no valid config drawn"
        self.config = main.configs[0]
        kind = self.problem.kind()
        stored = [main]
        # Sometimes the kind tuned at a second size too (export takes the largest, or -s's),
        # and another kind beside it (export without -f writes both, the header holds both).
        second = None
        if rng.random() < 0.3:
            size = (rng.choice(SIZES), rng.choice(SIZES))
            if np.prod(size) != np.prod(self.problem.size):
                sizes = {"out_width": size[0], "out_height": size[1]}
                second = self._tuned(family.problem({**kind, **sizes}))
                stored += [second] if second is not None else []
        if rng.random() < 0.35:
            for _ in range(50):
                other = draw_problem(family, rng)
                if other.kind() != kind and other.key().get("dtype") != "float64":
                    decoy = self._tuned(other)
                    stored += [decoy] if decoy is not None else []
                    break
        # Tuned on this device, or on one the database alone knows (the C host then runs the
        # header's default entry of the kind: its generic kernel).
        elsewhere = rng.random() < (0.5 if self.with_host else 0.15)
        away = dataclasses.replace(self.device, name="Fuzz Device Elsewhere", index=None)
        if elsewhere:
            self.tuned_on = away
        url = f"sqlite:///{work / 'tuned.db'}"
        store_best(url, family, self.tuned_on, stored)
        # Or on both: one header's table holds both devices, each kernel in its own folder.
        beside = self._tuned(self.problem) if not elsewhere and rng.random() < 0.2 else None
        if beside is not None:
            store_best(url, family, away, [beside])
        if rng.random() < 0.1:
            store_later_release_row(url, family, self.tuned_on, main)

        options = ["--db", url, "--json"]
        chosen = main
        if second is not None:
            which = rng.choice(["largest", "first", "second", "nearest"])
            asked = (rng.choice(SIZES), rng.choice(SIZES))
            distances = sorted(size_distance(asked, t.problem.size) for t in (main, second))
            if which == "nearest" and distances[0] != distances[1]:
                chosen = min((main, second), key=lambda t: size_distance(asked, t.problem.size))
                options += ["-s", "{}x{}".format(*asked)]
            elif which in ("first", "second"):
                chosen = main if which == "first" else second
                options += ["-s", "{}x{}".format(*chosen.problem.size)]
            else:
                chosen = max((main, second), key=lambda t: int(np.prod(t.problem.size)))
        # Data for two runs: the size exported, and another (another frame count for batches).
        frames = self.problem.key().get("frames", 1)
        other_size = (rng.choice(SIZES), rng.choice(SIZES))
        other_frames = rng.choice([2, 3, 4]) if frames > 1 else 1
        runs = [
            draw_data(family, self.problem, chosen.problem.size, frames, rng.randrange(1000)),
            draw_data(family, self.problem, other_size, other_frames, rng.randrange(1000)),
        ]
        border_value = rng.choice(BORDER_VALUES) if self.problem.key().get("border") == "constant" else 0.0

        # The filter a literal kernel is compiled for: the first run's, given with --filter.
        given = None
        if rng.random() < (0.6 if chosen.literal else 0.1):  # a best that reads its argument ignores it
            given = self._literal_filter(runs[0][2])
        how = rng.choice(
            ["device", "device", "device-name", "all-devices"]
            if not elsewhere
            else ["device-name", "all-devices"]
        )
        how = "all-devices" if beside is not None else how
        options += {
            "device": ["-d", str(self.device_index)],
            "device-name": ["--device-name", self.tuned_on.name],
        }.get(how, ["--all-devices"])
        nameable = family.name != "separable" or self.problem.rank <= self.problem.filter_width
        by_kind = nameable and (given is not None or rng.random() < 0.5)
        if by_kind:
            options += ["--family", family.name, *pixel_options(family, self.problem)]
        elif family.name != "conv2d" or rng.random() < 0.5:
            options += ["--family", family.name]
        if given is not None:
            np.save(work / "filter.npy", given)
            options += ["--filter", str(work / "filter.npy")]
        # What export should write: the kind asked, or every kind tuned.
        expected = [
            Exported(
                chosen,
                chosen.configs[0] if (given is not None or not chosen.literal) else chosen.configs[1],
                given is not None and chosen.literal,
                chosen.literal and given is None,
            )
        ]
        for tuned in stored[1:]:
            if not by_kind and tuned is not second:
                expected.append(
                    Exported(
                        tuned, tuned.configs[1] if tuned.literal else tuned.configs[0], False, tuned.literal
                    )
                )
        self.baked = expected[0].compiled_in
        formats = self._formats([e.tuned.problem for e in expected])
        if formats is not None:
            options += ["--format", formats]
        prefix = "autotune" if self.with_host or rng.random() < 0.8 else "fz"
        if prefix != "autotune":
            options += ["--c-prefix", prefix]
        out = work / "kernels"
        result = run_cli("export", *options, "--out", str(out))
        if result.returncode != 0 or "Traceback" in result.stderr:
            lines = result.stderr.strip().splitlines() or [""]
            self.defect(f"export exit {result.returncode}: {lines[-1][:300]} (options {' '.join(options)})")
            return "defect"
        folder = out / _slug(self.tuned_on.name) if how != "device" else out
        found = self._check_export(result.stdout, folder, expected, formats, 1 if beside is not None else 0)
        if found is None:
            return "defect"
        manifest, source = found
        if beside is not None:
            config = beside.configs[0] if (given is not None or not beside.literal) else beside.configs[1]
            baked = given is not None and beside.literal
            item = Exported(Tuned(self.problem, beside.configs), config, baked, beside.literal and not baked)
            self._check_manifest_file(out / _slug(away.name), item, away)
        header = out / f"{prefix}_kernels.h"
        holds = any(header_holds(family, e.tuned.problem) for e in expected)  # it holds what it can
        if header.exists() != holds and (formats is None or "header" in formats):
            self.defect(f"the header was {'' if header.exists() else 'not '}written (format {formats})")
        if header.exists() and prefix != "autotune":
            self._check_prefixed_header(out, prefix, work)

        host = ManifestHost(self.device_index)
        for number, (run, image, taps) in enumerate(runs):
            self._check_launch(host, manifest, source, run, image, taps, given, border_value, number)
        if header.exists() and family.name == "conv2d" and self.launched:
            self._check_header_launch(out, prefix, work)
        if self.with_host and header.exists():
            self.host_bytes = rng.random() < 0.5  # float32 kinds: an 8-bit image the host converts
            self._check_c_host(out, runs, given, border_value, work, elsewhere)
        elif self.with_host:
            self.defect("the export wrote no C header for a kind the example host runs")
        return "defect" if self.defects else "ok"

    def _formats(self, problems: list[Any]) -> str | None:
        """--format for this export: None (the default: cl, json and the header where it
        holds the kernels), or a list naming the header only where it holds them all."""
        holds = all(header_holds(self.family, problem) for problem in problems)
        choices: list[str | None] = [None, "cl,json,header", "cl,json,header,t4"] if holds else [None]
        if not self.with_host:
            choices += ["cl,json", "cl,json,t4"]
        return self.rng.choice(choices)

    def _literal_filter(self, taps: dict[str, np.ndarray]) -> np.ndarray | None:
        """The filter --filter gives a literal kernel (None where its rank is not the kind's:
        a separable filter of more terms than its width allows)."""
        if self.family.name == "conv2d":
            return np.asarray(taps["filter"], np.float32)
        filt = full_filter(taps["row_taps"], taps["column_taps"]).astype(np.float32)
        terms = separable_terms(filt, MAX_RANK)
        return filt if terms is not None and terms[0].shape[0] == self.problem.rank else None

    def _check_export(
        self, stdout: str, folder: Path, expected: list[Exported], formats: str | None, elsewhere: int
    ) -> tuple[dict[str, Any], str] | None:
        """(c): what export wrote and said against the kinds stored; the drawn kind's
        manifest and source (None where export did not write them)."""
        family = self.family
        try:
            data = json.loads(stdout)["data"]
        except (ValueError, KeyError) as exc:
            self.defect(f"export --json printed no envelope: {exc}")
            return None
        manifests = sorted(p for p in folder.glob("*.json") if p.name != "autotune_t4.json")
        if len(manifests) != len(expected):
            names = [p.name for p in manifests]
            self.defect(f"export wrote manifests {names} in {folder.name}, not {len(expected)}")
        kernels = data.get("kernels", [])
        if len(kernels) != len(expected) + elsewhere:  # `elsewhere`: kernels of the other device
            self.defect(f"export --json lists {len(kernels)} kernels, not {len(expected) + elsewhere}")
        kernels = [k for k in kernels if k.get("device") == self.tuned_on.name]
        first: tuple[dict[str, Any], str] | None = None
        for item in expected:
            problem = item.tuned.problem
            stem = expected_stem(family, problem)
            path = folder / f"{stem}.json"
            if not path.is_file():
                self.defect(f"no manifest {path.name} (written: {[p.name for p in manifests]})")
                continue
            manifest = json.loads(path.read_text())
            source_path = folder / manifest.get("source", "")
            if source_path.name != f"{stem}.cl" or not source_path.is_file():
                self.defect(f"the manifest's source {manifest.get('source')!r} is not {stem}.cl, written")
                continue
            source = source_path.read_text()
            self._check_manifest(manifest, source, item)
            record = next(
                (k for k in kernels if k.get("problem") == family.describe_kind(problem.kind())), None
            )
            if record is None:
                self.defect(f"export --json lists no kernel of {family.describe_kind(problem.kind())}")
            else:
                self._check_record(record, item)
            if item is expected[0]:  # the kind the draw runs
                first = (manifest, source)
        if formats is not None and "t4" in formats:
            self._check_t4(folder / "autotune_t4.json", expected)
        return first

    def _check_manifest_file(self, folder: Path, item: Exported, device: DeviceInfo) -> None:
        """A manifest and source of another device's folder, against what it should hold."""
        path = folder / f"{expected_stem(self.family, item.tuned.problem)}.json"
        if not path.is_file():
            self.defect(f"no manifest {folder.name}/{path.name}")
            return
        manifest = json.loads(path.read_text())
        source = (folder / manifest.get("source", "")).read_text()
        saved, self.tuned_on = self.tuned_on, device
        try:
            self._check_manifest(manifest, source, item)
        finally:
            self.tuned_on = saved

    def _check_prefixed_header(self, out: Path, prefix: str, work: Path) -> None:
        """A header of another --c-prefix compiles on its own and holds its kernels."""
        probe = work / "probe.c"
        probe.write_text(
            f'#include "{prefix}_kernels.h"\n'
            f"int main(void) {{ return {prefix}_kernel_count > 0 && {prefix}_kernels[0].source ? 0 : 1; }}\n"
        )
        binary = work / "probe"
        build = subprocess.run(
            [*HOST_COMPILE, f"-I{out}", "-o", str(binary), str(probe)], capture_output=True, text=True
        )
        if build.returncode != 0:
            lines = [line for line in build.stderr.splitlines() if "error" in line] or [build.stderr]
            self.defect(f"the {prefix}_kernels.h header does not compile: {lines[0][:300]}")
        elif subprocess.run([str(binary)]).returncode != 0:
            self.defect(f"the {prefix}_kernels.h header holds no kernel")

    def _check_header_launch(self, out: Path, prefix: str, work: Path) -> None:
        """The header's `<prefix>_launch_size` for the drawn kind's tuned entry gives the global
        size the manifest's rule gave (edge rows, channels and frames included)."""
        p = prefix
        probe = work / "launch_size.c"
        probe.write_text(
            "#include <stdio.h>\n#include <stdlib.h>\n"
            f'#include "{p}_kernels.h"\n'
            "int main(int argc, char **argv) {\n"
            "    (void)argc;\n"
            "    size_t w = strtoul(argv[1], 0, 10), h = strtoul(argv[2], 0, 10);\n"
            "    size_t n = strtoul(argv[3], 0, 10);\n"
            f"    for (int i = 0; i < {p}_kernel_count; ++i) {{\n"
            f"        const {p}_kernel *k = &{p}_kernels[i];\n"
            "        size_t g[3];\n"
            f"        {p}_launch_size(k, w, h, n, g);\n"
            f'        printf("%s|%d|%d|%s|%s|%s|%d|%d|%d|%d|%zu %zu %zu\\n", k->device < 0 ? "" : '
            f"{p}_devices[k->device].name,\n"
            "           k->filter_width, k->filter_height, k->dtype, k->out_dtype, k->border, k->anchor,\n"
            "           k->anchor_y, k->channels, k->batch, g[0], g[1], g[2]);\n"
            "    }\n    return 0;\n}\n"
        )
        binary = work / "launch_size"
        build = subprocess.run(
            [*HOST_COMPILE, f"-I{out}", "-o", str(binary), str(probe)], capture_output=True, text=True
        )
        if build.returncode != 0:
            lines = [line for line in build.stderr.splitlines() if "error" in line] or [build.stderr]
            self.defect(f"{p}_launch_size does not compile: {lines[0][:300]}")
            return
        problem = self.problem
        anchors = (problem.anchor_column, problem.anchor_row) if problem.same else (-1, -1)
        kind = [problem.filter_width, problem.filter_rows, problem.dtype, problem.out_dtype, problem.border]
        kind = [self.tuned_on.name, *map(str, [*kind, *anchors, problem.channels, int(problem.frames > 1)])]
        for (width, height, frames), launched in self.launched:
            listed = subprocess.run(
                [str(binary), str(width), str(height), str(frames)], capture_output=True, text=True
            ).stdout.splitlines()
            entries = [line.split("|") for line in listed]
            sizes = [entry[-1] for entry in entries if entry[:-1] == kind]
            wanted = " ".join(map(str, launched[:2])) + f" {frames}"
            if sizes != [wanted]:
                self.defect(
                    f"{p}_launch_size at {width}x{height}x{frames}: {sizes} for the tuned entry, the "
                    f"manifest's rule {wanted}"
                )

    def _check_record(self, record: dict[str, Any], item: Exported) -> None:
        problem = item.tuned.problem
        for field, value in problem.kind().items():
            if record.get(field) != value:
                self.defect(f"export --json says {field}={record.get(field)!r}, the problem {value!r}")
        if record.get("image_size") != list(problem.size):
            self.defect(f"export --json image_size {record.get('image_size')} != {list(problem.size)}")
        if record.get("config") != item.config:
            self.defect("export --json config is not the one stored")
        if bool(record.get("note")) != item.noted:
            self.defect(
                f"export --json note {record.get('note')!r}, expected {'one' if item.noted else 'none'}"
            )
        if record.get("device") != self.tuned_on.name:
            self.defect(f"export --json device {record.get('device')!r} is not {self.tuned_on.name!r}")

    def _check_manifest(self, manifest: dict[str, Any], source: str, item: Exported) -> None:
        family, problem, config = self.family, item.tuned.problem, item.config
        label = expected_stem(family, problem)
        for field, value in expected_fields(family, problem, item.compiled_in).items():
            if manifest.get(field, "<missing>") != value:
                self.defect(
                    f"{label}: manifest {field}={manifest.get(field, '<missing>')!r}, expected {value!r}"
                )
        for field in ("anchor", "anchor_y"):
            if not problem.same and field in manifest:
                self.defect(f"{label}: manifest of 'valid' output has {field}={manifest[field]!r}")
        if manifest.get("config") != config:
            self.defect(f"{label}: manifest config is not the one stored")
        if manifest.get("image_size") != list(problem.size):
            self.defect(f"{label}: manifest image_size {manifest.get('image_size')} != {list(problem.size)}")
        if manifest.get("device") != self.tuned_on.fingerprint:
            self.defect(f"{label}: manifest device {manifest.get('device')} is not the device tuned on")
        launches = manifest.get("launches") or [manifest]
        declared = {launch.get("kernel_name"): launch.get("arguments") for launch in launches}
        if kernel_signatures(source) != declared:
            self.defect(f"{label}: manifest arguments {declared} != the kernel's {kernel_signatures(source)}")
        if family.name == "conv2d":
            frames_dim = [1] if problem.frames > 1 else []
            wanted = (
                [config["local_x"], config["local_y"], *frames_dim],
                [config["work_x"], config["work_y"], *frames_dim],
            )
            geometry = (manifest.get("local_size"), manifest.get("work_per_item"))
            if geometry != wanted:
                self.defect(
                    f"{label}: manifest local_size, work_per_item {geometry} != the config's {wanted}"
                )
            if bool(manifest.get("border_groups")) != bool(config.get("border_groups")):
                groups = manifest.get("border_groups")
                self.defect(
                    f"{label}: manifest border_groups {groups!r}, config {config.get('border_groups')}"
                )

    def _check_t4(self, path: Path, expected: list[Exported]) -> None:
        if not path.is_file():
            self.defect(f"--format t4 wrote no {path.name}")
            return
        results = json.loads(path.read_text()).get("results", [])
        trials = sum(len(e.tuned.configs) for e in expected)
        if len(results) < trials:
            self.defect(f"T4 results hold {len(results)} trials, the kinds exported {trials}")
        widths = {e.tuned.problem.filter_width for e in expected}
        for entry in results:
            if entry["configuration"].get("filter_width") not in widths:
                self.defect(f"T4 configuration {entry['configuration']} lacks the filter width")

    def _check_launch(
        self,
        host: ManifestHost,
        manifest: dict[str, Any],
        source: str,
        run: Any,
        image: np.ndarray,
        taps: dict[str, np.ndarray],
        given: np.ndarray | None,
        border_value: float,
        number: int,
    ) -> None:
        """(a): the kernel launched from its manifest on one data set, against the reference."""
        label = f"run {number} ({run.out_width}x{run.out_height}"
        label += f", {run.frames} frames)" if getattr(run, "frames", 1) > 1 else ")"
        expected, bound, arguments = self._reference(run, image, taps, given, border_value)
        sizes = {
            "in_width": run.in_width * getattr(run, "channels", 1),
            "in_height": run.in_height,
            "out_width": run.out_width * getattr(run, "channels", 1),
            "out_height": run.out_height,
            "filter_width": run.filter_width,
            "frames": getattr(run, "frames", 1),
        }
        try:
            got, problem_found = host.run(
                manifest, source, image, arguments, expected.shape, sizes, border_value
            )
        except Exception as exc:  # noqa: BLE001 - any failure of a manifest-only host is the defect
            self.defect(f"{label}: launching from the manifest failed: {str(exc).splitlines()[0][:300]}")
            return
        if problem_found:
            self.defect(f"{label}: {problem_found}")
        wrong = compare(got, expected, bound)
        if wrong:
            self.defect(f"{label}: manifest launch: {wrong}")
        if self.family.name == "conv2d" and not problem_found:
            self.launched.append(((run.out_width, run.out_height, sizes["frames"]), host.global_sizes[-1]))

    def _reference(
        self,
        run: Any,
        image: np.ndarray,
        taps: dict[str, np.ndarray],
        given: np.ndarray | None,
        border_value: float,
    ) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
        """The reference and tolerance of one data set (of the filter given with --filter,
        where one was), and the tap arrays the kernel gets (zeros where the taps are compiled
        in: reading them would show)."""
        if self.family.name == "conv2d":
            filt = np.ascontiguousarray(given if given is not None else taps["filter"])
            planes = image.reshape(run.frames, run.in_height, run.in_width, run.channels)
            expected, bound = conv2d_reference(planes, filt.astype(np.float64), run, border_value)
            arguments = {"filter": np.zeros_like(filt) if self.baked else filt}
            return expected.reshape(run.output_shape), bound, arguments
        if given is not None:
            terms = separable_terms(given, MAX_RANK)
            assert terms is not None
            filt = given.astype(np.float64)
            arguments = dict(zip(("row_taps", "column_taps"), terms, strict=True))
            if self.baked:
                arguments = {name: np.zeros_like(values) for name, values in arguments.items()}
        else:
            terms = (taps["row_taps"], taps["column_taps"])
            filt = full_filter(*terms)
            arguments = {name: np.ascontiguousarray(taps[name]) for name in ("row_taps", "column_taps")}
        expected, bound = separable_reference(image, terms, filt, run, border_value)
        return expected, bound, arguments

    def _check_c_host(
        self,
        header_dir: Path,
        runs: list[tuple[Any, np.ndarray, dict[str, np.ndarray]]],
        given: np.ndarray | None,
        border_value: float,
        work: Path,
        elsewhere: bool,
    ) -> None:
        """(b): the example host built against the header, run on both data sets."""
        binary = work / "convolve_host"
        build = subprocess.run(
            [*HOST_COMPILE, f"-I{header_dir}", "-o", str(binary), str(HOST_SOURCE), "-lOpenCL", "-lm"],
            capture_output=True,
            text=True,
        )
        if build.returncode != 0:
            lines = [line for line in build.stderr.splitlines() if "error" in line] or [build.stderr]
            self.defect(f"C host does not build against the header: {lines[0][:300]}")
            return
        for number, (run, image, taps) in enumerate(runs):
            pixels = image
            if (
                self.host_bytes
                and run.dtype == "float32"
                and getattr(run, "channels", 1) in (1, 3)
                and getattr(run, "frames", 1) == 1
            ):
                pixels = np.random.default_rng(self.seed + number).integers(0, 256, image.shape, np.uint8)
                image = pixels.astype(np.float32)
            expected, bound, _ = self._reference(run, image, taps, given, border_value)
            label = f"C host run {number} ({run.out_width}x{run.out_height}, {pixels.dtype} pixels)"
            command = [
                str(binary),
                "-d",
                str(self.device_index),
                *self._host_options(run, border_value, pixels),
            ]
            command += [self._host_image(run, pixels, work), self._host_filter(run, taps, given, work)]
            command.append(str(work / "host_out.raw"))
            result = subprocess.run(command, capture_output=True, text=True, timeout=300)
            if result.returncode != 0:
                self.defect(f"{label}: exit {result.returncode}: {result.stderr.strip()[-300:]}")
                continue
            picked = "using the default entry" if elsewhere else "kernel tuned on it"
            if picked not in result.stderr:
                self.defect(f"{label}: stderr does not say {picked!r}: {result.stderr.strip()[-200:]}")
            got = np.fromfile(work / "host_out.raw", dtype=run.output_dtype)
            if got.size != expected.size:
                self.defect(f"{label}: wrote {got.size} values, not {expected.size}")
                continue
            wrong = compare(got, expected, bound)
            if wrong:
                self.defect(f"{label}: {wrong}")

    def _host_options(self, run: Any, border_value: float, pixels: np.ndarray) -> list[str]:
        if self.family.name == "separable":
            return []
        options = ["-f", f"{run.filter_rows}x{run.filter_width}"]
        if not self._pnm(run, pixels):
            options += ["-t", pixels.dtype.name] if pixels.dtype != np.float32 else []
            options += ["-n", str(run.frames)] if run.frames > 1 else []
        if run.same:
            options += ["-b", run.border, "-a", f"{run.anchor_column},{run.anchor_row}"]
            if run.border == "constant":
                options += ["-v", repr(border_value)]
        if run.out_dtype == run.dtype and run.dtype != "float32":
            options += ["-o", "same"]
        return options

    def _pnm(self, run: Any, image: np.ndarray) -> bool:
        """Whether the host reads the image as PGM/PPM: 8 and 16 bits, one frame of one or
        three channels, every other seed (else as raw values, `-t` saying their type), and
        always for the separable host, which reads raw float32 only."""
        channels, frames = getattr(run, "channels", 1), getattr(run, "frames", 1)
        if image.dtype not in (np.uint8, np.uint16) or channels not in (1, 3) or frames != 1:
            return False
        return self.family.name == "separable" or self.seed % 2 == 0

    def _host_image(self, run: Any, image: np.ndarray, work: Path) -> str:
        """The image as the host reads it: PGM/PPM (`_pnm`), else raw values of its type."""
        channels = getattr(run, "channels", 1)
        if not self._pnm(run, image):
            image.tofile(work / "host_in.raw")
            shape = f"{run.in_width}x{run.in_height}" + (f"x{channels}" if channels > 1 else "")
            return f"{shape}:{work / 'host_in.raw'}"
        path = work / ("host_in.ppm" if channels == 3 else "host_in.pgm")
        maxval = 255 if image.dtype == np.uint8 else 65535
        header = f"P{6 if channels == 3 else 5}\n{run.in_width} {run.in_height}\n{maxval}\n".encode()
        path.write_bytes(header + image.astype(f">u{image.itemsize}").tobytes())
        return str(path)

    def _host_filter(
        self, run: Any, taps: dict[str, np.ndarray], given: np.ndarray | None, work: Path
    ) -> str:
        """The filter file: rows of taps (the direct family), or 2r lines of row then column
        taps (the separable family)."""
        if self.family.name == "conv2d":
            rows = given if given is not None else taps["filter"]
        elif given is not None:
            rows = np.vstack(separable_terms(given, MAX_RANK))
        else:
            rows = np.vstack([taps["row_taps"], taps["column_taps"]])
        path = work / "host_filter.txt"
        path.write_text("\n".join(" ".join(f"{v:.9g}" for v in row) for row in rows) + "\n")
        return str(path)


def expected_stem(family: KernelFamily, problem: Any) -> str:
    """The file name the README gives an exported kernel of this problem."""
    key = problem.key()
    width = key["filter_width"]
    if family.name == "separable":
        stem = f"separable_f{width}_r{key['rank']}"
        if (key.get("dtype", "float32"), key.get("out_dtype", "float32"), key.get("border", "none")) == (
            "float32",
            "float32",
            "none",
        ):
            return stem
        stem += f"_{problem.dtype}_{problem.out_dtype}_{problem.border}"
        return stem + (f"_anchor{problem.anchor_tap}" if problem.anchor != -1 else "")
    rows = problem.filter_rows
    stem = f"convolve_f{width}" if rows == width else f"convolve_f{rows}x{width}"
    plain = (problem.dtype, problem.out_dtype, problem.border, problem.channels) == (
        "float32",
        "float32",
        "none",
        1,
    )
    if not plain:
        stem += f"_{problem.dtype}_{problem.out_dtype}_{problem.border}"
        anchor, anchor_y = problem.anchor_column, problem.anchor_row
        if problem.same and (anchor, anchor_y) != (width // 2, rows // 2):
            stem += f"_anchor{anchor}" + (f"y{anchor_y}" if anchor_y != anchor else "")
        if problem.channels != 1:
            stem += f"_{problem.channels}ch"
    return stem + ("_batch" if problem.frames > 1 else "")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


# --- the run ----------------------------------------------------------------------------


def one_draw(seed: int, device_index: int, family_name: str | None, host_every: int) -> dict[str, Any]:
    """Run one seed in this process; what it found."""
    draw = Draw(seed, device_index, family_name, host_every)
    work = Path(tempfile.mkdtemp(prefix=f"fuzz-export-{seed}-"))
    try:
        outcome = draw.run(work)
    except Exception as exc:  # noqa: BLE001 - the check itself failed: report, do not hide
        outcome = "defect"
        draw.defect(
            f"the check raised {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "seed": seed,
        "family": draw.family.name,
        "host": draw.with_host,
        "outcome": outcome,
        "problem": draw.problem.key() if draw.problem is not None else None,
        "config": draw.config,
        "defects": draw.defects,
    }


def in_child(seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One seed in a child process (a kernel that kills it is that draw's defect)."""
    command = [sys.executable, __file__, "--one", str(seed), "--device", str(args.device)]
    command += ["--host-every", str(args.host_every)]
    if args.family:
        command += ["--family", args.family]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"seed": seed, "outcome": "defect", "defects": [f"no result within {CHILD_TIMEOUT_S} s"]}
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        tail = (result.stderr.strip().splitlines() or [""])[-1]
        return {
            "seed": seed,
            "outcome": "defect",
            "defects": [f"the draw's process died ({result.returncode}): {tail}"],
        }
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", default="0-99")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--family", choices=FAMILIES, default=None, help="[default: drawn per seed]")
    parser.add_argument("--host-every", type=int, default=10, help="run the C host every Nth seed (0: never)")
    parser.add_argument("--jobs", type=int, default=1, help="draws at once")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one_draw(args.one, args.device, args.family, args.host_every)), flush=True)
        return 0
    try:
        chosen = seeds(args.seeds)
    except ValueError:
        print(f"fuzz_export: --seeds takes N or FIRST-LAST, got {args.seeds!r}", file=sys.stderr)
        return 2
    try:
        device_info(args.device)
    except AutotuneError as exc:
        print(f"fuzz_export: {exc}", file=sys.stderr)
        return 2
    if args.host_every > 0 and (shutil.which("gcc") is None or not Path("/usr/include/CL/cl.h").exists()):
        print("fuzz_export: no gcc or OpenCL headers: the C host is not run", file=sys.stderr)
        args.host_every = 0
    again = f"python checks/fuzz_export.py --device {args.device}" + (
        f" --family {args.family}" if args.family else ""
    )
    counts: Counter[str] = Counter()
    defects = 0
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for found in pool.map(lambda seed: in_child(seed, args), chosen):
            counts[found["outcome"]] += 1
            counts[f"{found.get('family', '?')} draws"] += 1
            counts["with the C host"] += bool(found.get("host"))
            for text in found["defects"]:
                defects += 1
                problem, config = json.dumps(found.get("problem")), json.dumps(found.get("config"))
                what = f"{found.get('family')} {problem} {config}"
                print(
                    f"seed {found['seed']}: {text} :: {what} :: {again} --seeds {found['seed']}", flush=True
                )
    print("counts:", dict(counts), "defects:", defects)
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
