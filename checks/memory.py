#!/usr/bin/env python3
"""Run every template path under Oclgrind and fail on any memory or race error.

    python checks/memory.py            # `make check-memory`

Needs Debian's `oclgrind` (apt-get install oclgrind). Each kernel runs on small,
awkward output sizes (not multiples of the tile, smaller than one work-group) with
Oclgrind's checks for invalid accesses, uninitialised values and data races switched
on; Oclgrind reports on stderr and lets the run go on, so this script reads that
output, kernel by kernel.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ICD_LIBRARY = "/usr/lib/oclgrind/liboclgrind-rt-icd.so"
PROBLEMS = [
    "Invalid read",
    "Invalid write",
    "Uninitialized",
    "Uninitialised",
    "Data race",
    "data race",
    "Work-group divergence",
    "Oclgrind - ",
    "wrong result",
]
MARKER = "@@autotune-kernel@@"
# Oclgrind 21.10 reports a store of a vector built from initialised scalars,
# `*(float2 *)p = (float2)(a, b)`, as "uninitialized" (a 3-line kernel shows it; the
# stored values are right, and vstore2 is not reported). vstore2 is no way out: NVIDIA
# compiles it to scalar stores, 4-14% slower on the H200 (bench/store_forms.py). So
# reports of exactly this kind are set aside, to `__global` and to `__local` memory (the
# float2 row-pass values of paired_terms); the result check still catches wrong values.
VECTOR_STORE_FALSE_POSITIVE = ("Uninitialized value written to", "store <", " x float> ")


class NoValidConfig(Exception):
    """A knob value that no valid config can take."""


Case = tuple[str, dict, dict]  # family name, config, problem key


def _knob_values(space, base: dict, problem_fields: dict, skip: tuple[str, ...] = ()) -> list[dict]:  # noqa: ANN001 - a SearchSpace
    """Every value of every knob but `skip`, in the valid config nearest to the base (the
    space finds what a value needs). Work-groups stay small: Oclgrind runs work-items one
    by one, and the larger group shapes add time, not template paths."""
    configs = []
    for name, knob in space.knobs.items():
        if name in skip or name == "output_conversion":  # integer outputs only: their own cases
            continue
        if name in ("channel_items", "edge_outputs_per_item", "adjacent_edge_outputs"):  # own cases below
            continue
        values = [v for v in knob.values if v <= 8] if name in ("local_x", "local_y") else list(knob.values)
        if name == "work_x":  # 3, 6, 12, 24: tiles of whole pixels of three channels, their own cases
            values = [v for v in values if v & (v - 1) == 0]
        for value in values:
            config = space.with_value(base, name, value, problem_fields)
            if config is None:
                raise NoValidConfig(f"{space.name}: no valid config has {name}={value}")
            configs.append(config)
    return configs


def _conv2d_cases() -> list[Case]:
    from autotune.families.conv2d import CONV2D

    space = CONV2D.space
    base = {"filter_mode": "define", "local_x": 4, "local_y": 4, "work_x": 2, "work_y": 2}
    configs = [dict(p.config, local_x=8, local_y=4) for p in space.presets.values()]
    configs += _knob_values(space, base, {"filter_width": 5}, skip=("border_groups",))  # 'same' only: below
    # Combinations on purpose: the widest tiles with every column unrolled and float4
    # taps, full column unrolling without row unrolling, the __local tile with float4
    # taps, and vector image reads on every tile and row parity.
    configs.append(space.complete({**base, "work_x": 8, "work_y": 8, "unroll": "full", "vector": 4}))
    configs.append(space.complete({**base, "work_x": 4, "work_y": 8, "unroll": "full", "unroll_rows": False}))
    configs.append(space.complete({**base, "work_x": 4, "work_y": 8, "cache_local": True, "vector": 4}))
    for cache_local in (False, True):
        for image_vector in (2, 4):
            for work_y in (1, 2):
                config = {**base, "work_x": 4, "work_y": work_y, "image_vector": image_vector}
                configs.append(space.complete({**config, "cache_local": cache_local}))
    out = []
    for i, config in enumerate(configs):
        sizes = [(3, (7, 5)), (5 + i % 3, (13, 9)), (4, (1, 1))]
        if config["image_vector"] > 1:
            sizes.append((5, (12, 6)))  # pitches 16 and 12: the vector paths
            sizes.append((5, (10, 7)))  # pitch 14 (2 mod 4): float4 reads on alternate rows
        for filter_width, (out_w, out_h) in sizes:
            if not space.violations(config, {"filter_width": filter_width}):
                key = {"filter_width": filter_width, "out_width": out_w, "out_height": out_h}
                out.append(("conv2d", config, {**key, "dtype": "float32"}))
    return out


def _pixel_cases() -> list[Case]:
    """Every border with and without the __local tile and float4 reads, on each pixel
    type and 1-4 interleaved channels, with anchors at every alignment and filters on
    both sides of the edge-tile threshold (images smaller than one tile and than the
    filter among them)."""
    import random

    from autotune.families.conv2d import CONV2D
    from autotune.families.image import BORDERS, PIXEL_TYPES

    space = CONV2D.space
    rng = random.Random(5)
    out = []
    for border in BORDERS:
        for cache_local in (False, True):
            for image_vector in (1, 4):
                config = {"filter_mode": "define", "local_x": 4, "local_y": 4, "work_x": 4, "work_y": 2}
                config = space.complete({**config, "cache_local": cache_local, "image_vector": image_vector})
                dtype = rng.choice(list(PIXEL_TYPES))
                sizes = ((3, (13, 9)), (rng.choice([4, 6, 9]), (12, 7)), (5, (2, 3)))
                for filter_width, (out_w, out_h) in sizes:
                    key = {"filter_width": filter_width, "out_width": out_w, "out_height": out_h}
                    key |= {"dtype": dtype, "out_dtype": rng.choice([dtype, "float32"]), "border": border}
                    key["channels"] = rng.choice([1, 1, 2, 3, 4])
                    if (filter_width, out_w) == (3, 13):  # a batch: each frame reads and writes its own
                        key["frames"] = 3
                    if border != "none":
                        key["anchor"] = rng.randrange(filter_width)
                    elif out_w == 2:
                        continue
                    if not space.violations(
                        config, {"filter_width": filter_width, "channels": key["channels"]}
                    ):
                        out.append(("conv2d", config, key))
    # Filters of other height than width, flat and tall, with anchors off their centre.
    for border in BORDERS:
        for cache_local in (False, True):
            for rows, width, channels in ((2, 7, 1), (7, 2, 3)):
                config = {"filter_mode": "define", "local_x": 4, "local_y": 4, "work_x": 4, "work_y": 2}
                config = space.complete({**config, "cache_local": cache_local, "image_vector": 4})
                key = {"filter_width": width, "filter_height": rows, "out_width": 11, "out_height": 6}
                key |= {"dtype": "uint8", "out_dtype": "uint8", "border": border, "channels": channels}
                if border != "none":
                    key |= {"anchor": width - 1, "anchor_y": 0}
                out.append(("conv2d", config, key))
    # Edge outputs in work-groups of their own (`border_groups`): every border, images
    # smaller than the filter and than a tile among them, channels, frames, rows x F.
    for border in [b for b in BORDERS if b != "none"]:
        for image_vector, (rows, width), (out_w, out_h) in (
            (1, (3, 3), (1, 1)),
            (4, (5, 5), (13, 9)),
            (4, (2, 7), (23, 6)),
            (1, (9, 9), (7, 12)),
        ):
            config = {"filter_mode": "define", "local_x": 4, "local_y": 4, "work_x": 4, "work_y": 2}
            config = space.complete({**config, "image_vector": image_vector, "border_groups": True})
            key = {"filter_width": width, "filter_height": rows, "out_width": out_w, "out_height": out_h}
            key |= {"dtype": rng.choice(list(PIXEL_TYPES)), "out_dtype": "float32", "border": border}
            key |= {"channels": rng.choice([1, 3]), "frames": rng.choice([1, 2])}
            key |= {"anchor": rng.randrange(width), "anchor_y": rng.randrange(rows)}
            out.append(("conv2d", config, key))
    # Explicit vectors past a scalar edge tile's widths (F > 8): the edge tiles' column
    # table sized for the filter, every border, rows x F, images thinner than the filter,
    # float and integer outputs (their own generator: the cases after keep their draws).
    wide = random.Random(9)
    for border in [b for b in BORDERS if b != "none"]:
        for (rows, width), (out_w, out_h) in (((9, 9), (5, 11)), ((3, 12), (29, 4)), ((11, 2), (17, 6))):
            config = {"filter_mode": "define", "local_x": 2, "local_y": 2, "work_x": 8, "work_y": 2}
            config = space.complete({**config, "x_vector": 4, "unroll": wide.choice([1, 4, "full"])})
            dtype = wide.choice(list(PIXEL_TYPES))
            out_dtype = wide.choice(["float32", dtype])
            if out_dtype in ("uint8", "uint16", "int16"):
                config["output_conversion"] = wide.choice(["builtin", "bits"])
            key = {"filter_width": width, "filter_height": rows, "out_width": out_w, "out_height": out_h}
            key |= {"dtype": dtype, "out_dtype": out_dtype, "border": border}
            key |= {"channels": wide.choice([1, 3]), "anchor": wide.randrange(width)}
            key |= {"anchor_y": wide.randrange(rows)}
            out.append(("conv2d", config, key))
    # float64 pixels read and written as double: scalar, vector and staged reads, both outputs.
    for border in ("none", "mirror"):
        for changes in ({"image_vector": 1}, {"image_vector": 4}, {"cache_local": True}, {"x_vector": 4}):
            config = {"filter_mode": "define", "local_x": 4, "local_y": 4, "work_x": 4, "work_y": 2}
            config = space.complete({**config, **changes})
            key = {"filter_width": 3, "out_width": 13, "out_height": 7, "border": border}
            key |= {"dtype": "float64", "out_dtype": rng.choice(["float64", "float32"]), "channels": 1}
            if not space.violations(config, {"filter_width": 3, "channels": 1}):
                out.append(("conv2d", config, key))
    # Integer outputs written through `output_conversion = bits`: vector, float4 and
    # checked scalar stores, and the preset for them.
    preset = next(p.config for p in space.presets.values() if p.config["output_conversion"] == "bits")
    for out_dtype, border in (("uint8", "mirror"), ("uint16", "none"), ("int16", "wrap")):
        for changes in ({"image_vector": 4}, {"x_vector": 4}, {"cache_local": True}, preset):
            config = {"filter_mode": "define", "local_x": 4, "local_y": 4, "work_x": 4, "work_y": 2}
            config = space.complete({**config, **changes, "output_conversion": "bits"})
            key = {"filter_width": 3, "out_width": 13, "out_height": 7, "border": border, "channels": 1}
            key |= {"dtype": "uint8", "out_dtype": out_dtype} | ({"anchor": 1} if border != "none" else {})
            out.append(("conv2d", config, key))
    # Tiles of whole pixels of three channels (`work_x` 3, 6, 12, 24 values): 'valid' and a
    # border, staged and read from __global with the widest reads each allows.
    whole_pixels = ((3, "mirror", True), (6, "none", False), (12, "wrap", False), (24, "none", True))
    for work_x, border, cache_local in whole_pixels:
        image_vector = 4 if work_x % 4 == 0 else (2 if work_x % 2 == 0 else 1)
        config = {"filter_mode": "define", "local_x": 2, "local_y": 4, "work_x": work_x, "work_y": 2}
        config = space.complete({**config, "image_vector": image_vector, "cache_local": cache_local})
        key = {"filter_width": 5, "out_width": 11, "out_height": 7, "border": border, "channels": 3}
        key |= {"dtype": "uint8", "out_dtype": "uint8"} | ({"anchor": 3} if border != "none" else {})
        out.append(("conv2d", config, key))
    # Work-items of one channel's pixels (`channel_items`): rows whose last pixels fill no
    # whole block, rolled and unrolled taps, 2-4 channels.
    for channels, work_x, unroll, (out_w, out_h) in (
        (3, 4, "full", (11, 7)),
        (2, 2, 2, (9, 5)),
        (4, 8, 1, (19, 3)),
    ):
        config = {"filter_mode": "define", "local_x": 4, "local_y": 2, "work_x": work_x, "work_y": 2}
        config = space.complete({**config, "unroll": unroll, "channel_items": True})
        key = {"filter_width": 3, "out_width": out_w, "out_height": out_h, "channels": channels}
        out.append(("conv2d", config, key | {"dtype": "uint8", "out_dtype": "uint8"}))
    # The same with 'same' output: edge work-groups around a box of whole blocks, every
    # border, an image narrower than a block, anchors off centre.
    for border in [b for b in BORDERS if b != "none"]:
        for channels, work_x, (out_w, out_h), anchor in (
            (3, 4, (11, 7), 0),
            (2, 2, (3, 5), 2),
            (4, 8, (19, 4), 1),
        ):
            config = {"filter_mode": "define", "local_x": 4, "local_y": 2, "work_x": work_x, "work_y": 2}
            config = space.complete({**config, "channel_items": True, "border_groups": True})
            # 2 outputs an edge work-item apart, 4 and 8 adjacent ones (runs and, at the
            # narrow image's row ends, the one-at-a-time path)
            per_item, adjacent = {3: (2, False), 2: (4, True), 4: (8, True)}[channels]
            config |= {"edge_outputs_per_item": per_item, "adjacent_edge_outputs": adjacent}
            key = {"filter_width": 3, "out_width": out_w, "out_height": out_h, "channels": channels}
            key |= {"dtype": "uint8", "out_dtype": "uint8", "border": border, "anchor": anchor}
            out.append(("conv2d", config, key))
    return out


def _separable_cases() -> list[Case]:
    from autotune.families.separable import SEPARABLE

    space = SEPARABLE.space
    base = {"local_x": 4, "local_y": 4, "work_x": 2, "work_y": 2}
    configs = [dict(p.config, local_x=8, local_y=4) for p in space.presets.values()]
    # fast_fir holds from F = 17 with 8 outputs a pass: its own cases below
    configs += _knob_values(space, base, {"filter_width": 5, "rank": 2}, skip=("fast_fir",))
    # Every row-pass layout with and without the staged input, on a wide tile.
    for row_columns in ("strided", "contiguous", "transposed"):
        for cache_input in (False, True):
            config = {**base, "work_x": 4, "work_y": 4, "row_columns": row_columns}
            configs.append(space.complete({**config, "cache_input": cache_input}))
    # Row windows wider than work_x, read as floats or float4s, also on tiles that walk down.
    for row_columns, row_window, row_loads, tiles_down in (
        ("contiguous", 8, 1, 1),
        ("transposed", 8, 4, 1),
        ("contiguous", 16, 4, 2),
        ("transposed", 4, 4, 4),
    ):
        config = {**base, "work_x": 4, "work_y": 4, "row_columns": row_columns, "cache_input": True}
        config |= {"row_window": row_window, "row_loads": row_loads, "tiles_down": tiles_down}
        configs.append(space.complete(config))
    # Work-items that walk down whole columns, carrying the shared rows in registers.
    for row_columns, cache_input in (("strided", False), ("transposed", True)):
        config = {**base, "local_y": 1, "work_y": 4, "tiles_down": 4, "carry_rows": True}
        configs.append(space.complete({**config, "row_columns": row_columns, "cache_input": cache_input}))
    # Two launches (a row pass into a scratch buffer, then a column pass): both row
    # layouts, and windows read as vectors of 4 pixels.
    for row_columns, row_loads, column_vector in (
        ("strided", 1, 1),
        ("contiguous", 1, 1),
        ("contiguous", 4, 1),
        ("strided", 1, 4),
        ("contiguous", 4, 4),
    ):
        config = {**base, "work_x": 4, "work_y": 4, "passes": 2, "row_columns": row_columns}
        configs.append(space.complete({**config, "row_loads": row_loads, "column_vector": column_vector}))
    out = []
    for i, config in enumerate(configs):
        for filter_width, rank, (out_w, out_h) in ((3, 1, (7, 5)), (4 + i % 3, 2, (13, 9)), (5, 1, (1, 1))):
            problem = {"filter_width": filter_width, "rank": rank}
            if not space.violations(config, problem):
                key = {**problem, "out_width": out_w, "out_height": out_h, "dtype": "float32"}
                out.append(("separable", config, key))
    # Pixel types and every border, the tile staged (as 'same' output needs), anchors off centre.
    pixel_types = ("uint8", "uint16", "int16", "float16", "float32", "float64")
    for number, border in enumerate(("none", "constant", "replicate", "reflect", "mirror", "wrap")):
        for row_columns, tiles_down in (("strided", 1), ("transposed", 1), ("contiguous", 4)):
            config = {**base, "cache_input": True, "row_columns": row_columns, "tiles_down": tiles_down}
            config = space.complete(config)
            dtype = pixel_types[number % len(pixel_types)]
            key = {"filter_width": 4, "rank": 2, "out_width": 11, "out_height": 6, "dtype": dtype}
            key |= {"out_dtype": dtype, "border": border} | ({"anchor": 3} if border != "none" else {})
            out.append(("separable", config, key))
    # Tiles that walk down and read the next tile's rows ahead (prefetch), 'valid' and every
    # border: groups whose walk ends inside the image and past its last row.
    for number, border in enumerate(("none", "constant", "replicate", "reflect", "mirror", "wrap")):
        row_columns = ("strided", "transposed")[number % 2]
        config = {**base, "cache_input": True, "row_columns": row_columns, "tiles_down": 4, "prefetch": True}
        dtype = pixel_types[(number + 4) % len(pixel_types)]
        key = {"filter_width": 4, "rank": 1 + number % 2, "out_width": 19, "out_height": 37, "dtype": dtype}
        key |= {"out_dtype": dtype, "border": border} | ({"anchor": 1} if border != "none" else {})
        out.append(("separable", space.complete(config), key))
    # The same with row windows read as float4s, and with columns carried in registers.
    for changes in (
        {"row_columns": "transposed", "work_x": 4, "row_window": 4, "row_loads": 4},
        {"row_columns": "contiguous", "local_y": 1, "work_y": 4, "carry_rows": True},
    ):
        config = {**base, "cache_input": True, "tiles_down": 4, "prefetch": True, **changes}
        key = {"filter_width": 4, "rank": 2, "out_width": 19, "out_height": 37, "dtype": "float32"}
        out.append(("separable", space.complete(config), key | {"border": "mirror", "anchor": 2}))
    # Tiles staged in vectors of 4 pixels, 'valid' and every border: groups whose columns
    # are read as whole vectors (rows of 32 or 48 pixels, anchor 4) and groups at the edges.
    for number, border in enumerate(("none", "constant", "replicate", "reflect", "mirror", "wrap")):
        config = {**base, "cache_input": True, "row_columns": "transposed", "work_x": 4, "row_window": 4}
        config |= {"row_loads": 4, "stage_vectors": True}
        if number % 2:
            config |= {"tiles_down": 4, "prefetch": True}
        dtype = pixel_types[(number + 1) % len(pixel_types)]
        filter_width, out_width = (5, 28) if border == "none" else (9, 48)
        key = {"filter_width": filter_width, "rank": 1 + number % 2, "out_width": out_width, "out_height": 21}
        key |= {"dtype": dtype, "out_dtype": dtype, "border": border}
        key |= {"anchor": 4} if border != "none" else {}
        out.append(("separable", space.complete(config), key))
    # Walks that stage only each step's new rows and start a step above the first tile:
    # 'valid' (that step partly above the image) and through a border, with groups whose
    # columns are read as whole vectors (rows of 32 and 48 pixels, anchor 4).
    for border, filter_width, out_width in (("none", 3, 30), ("mirror", 9, 48)):
        config = {**base, "cache_input": True, "row_columns": "transposed", "work_x": 4, "row_window": 4}
        config |= {"row_loads": 4, "stage_vectors": True, "tiles_down": 4, "prefetch": True}
        config |= {"stage_new_rows": True}
        key = {"filter_width": filter_width, "rank": 2, "out_width": out_width, "out_height": 37}
        key |= {"dtype": "float32", "border": border} | ({"anchor": 4} if border != "none" else {})
        out.append(("separable", space.complete(config), key))
    # Outputs in pairs by the fast FIR algorithm: a walk staging new rows through a border,
    # and column pairs. Not with paired_terms: Oclgrind 21.10 ends with a segmentation fault
    # on those kernels (either pass; the same kernels without the knob run clean, and the
    # knob adds no memory access of its own: it changes the arithmetic between the same loads
    # and stores); tests/test_separable_pixels.py verifies their results on PoCL.
    for border, changes in (
        ("mirror", {"stage_new_rows": True, "stage_vectors": True, "tiles_down": 4}),
        ("none", {"column_pairs": True, "tiles_down": 4}),
    ):
        config = {**base, "cache_input": True, "row_columns": "transposed", "work_x": 2, "row_window": 8}
        config |= {"row_loads": 4, "work_y": 8, "local_y": 2, "fast_fir": "both"} | changes
        key = {"filter_width": 17, "rank": 3, "out_width": 21, "out_height": 37, "dtype": "float32"}
        key |= {"border": border} | ({"anchor": 8} if border != "none" else {})
        out.append(("separable", space.complete(config), key))
    # Two terms' row-pass rows paired in float2 tiles: a walk (rank 3: a pair and a lone
    # term) through a border, and single tiles whose lone third term uses the pairs' .x parts.
    for border, tiles_down in (("mirror", 4), ("none", 1)):
        config = {**base, "cache_input": True, "row_columns": "transposed", "work_x": 4, "row_window": 4}
        config |= {"row_loads": 4, "tiles_down": tiles_down, "paired_terms": True}
        key = {"filter_width": 5, "rank": 3, "out_width": 21, "out_height": 37, "dtype": "float32"}
        key |= {"border": border} | ({"anchor": 1} if border != "none" else {})
        out.append(("separable", space.complete(config), key))
    # Row-pass values in float2s of two adjacent columns: a walk through a border whose
    # last tile passes the right edge at an odd width, and a single tile, 'valid'.
    for border, tiles_down, out_width in (("reflect", 4, 21), ("none", 1, 18)):
        config = {**base, "cache_input": True, "row_columns": "transposed", "work_x": 4, "row_window": 4}
        config |= {"row_loads": 4, "tiles_down": tiles_down, "column_pairs": True}
        key = {"filter_width": 5, "rank": 1, "out_width": out_width, "out_height": 37, "dtype": "uint8"}
        key |= {"out_dtype": "uint8", "border": border} | ({"anchor": 3} if border != "none" else {})
        out.append(("separable", space.complete(config), key))
    # Two launches, each pixel type: rows read as vectors (13 outputs: rows 16 pixels wide,
    # 4-pixel aligned), and columns as float4s with outputs stored as vectors (16 outputs).
    for dtype in pixel_types:
        for column_vector, out_width in ((1, 13), (4, 16)):
            config = {**base, "work_x": 4, "passes": 2, "row_columns": "contiguous", "row_loads": 4}
            config = space.complete({**config, "column_vector": column_vector})
            key = {"filter_width": 4, "rank": 2, "out_width": out_width, "out_height": 6, "dtype": dtype}
            out.append(("separable", config, key | {"out_dtype": dtype}))
    # Two launches, 'same' output with every border: windows past each edge, anchors off centre.
    for number, border in enumerate(("constant", "replicate", "reflect", "mirror", "wrap")):
        for changes in ({"row_columns": "strided"}, {"row_loads": 4, "column_vector": 4}):
            config = {**base, "work_x": 4, "passes": 2, "row_columns": "contiguous"}
            config = space.complete(config | changes)
            dtype = pixel_types[number % len(pixel_types)]
            key = {"filter_width": 4, "rank": 2, "out_width": 16, "out_height": 6, "dtype": dtype}
            out.append(("separable", config, key | {"out_dtype": dtype, "border": border, "anchor": 3}))
    # The streaming form: strips inside the image (whole vector reads) and at its edges
    # (a line copied through the border), every border, several pixel types; every other
    # border with the output rows summed in registers (`column_accumulators`).
    for number, border in enumerate(("none", "constant", "replicate", "reflect", "mirror", "wrap")):
        config = {"stream_rows": 16, "x_vector": 4, "work_x": 8, "local_x": 2, "local_y": 2}
        config = space.complete(config | {"column_accumulators": number % 2 == 1})
        dtype = pixel_types[(number + 2) % len(pixel_types)]
        key = {"filter_width": 3, "rank": 2, "out_width": 37, "out_height": 6, "dtype": dtype}
        key |= {"out_dtype": dtype, "border": border} | ({"anchor": 2} if border != "none" else {})
        out.append(("separable", config, key))
    # Integer outputs written through `output_conversion = bits`, in each form.
    for out_dtype, changes in (
        ("uint8", {"cache_input": True}),
        ("int16", {"stream_rows": 16, "x_vector": 4, "work_x": 8, "work_y": 1, "local_x": 2, "local_y": 2}),
        ("uint16", {"work_x": 4, "passes": 2, "row_columns": "contiguous", "column_vector": 4}),
    ):
        config = space.complete({**base, **changes, "output_conversion": "bits"})
        key = {"filter_width": 3, "rank": 2, "out_width": 37, "out_height": 6, "dtype": "uint8"}
        out.append(("separable", config, key | {"out_dtype": out_dtype, "border": "mirror", "anchor": 1}))
    return out


def cases() -> list[Case]:
    return _conv2d_cases() + _pixel_cases() + _separable_cases()


def child() -> int:
    import numpy as np
    import pyopencl as cl

    from autotune.families import get_family
    from autotune.launcher import Launcher

    platform = cl.get_platforms()[0]
    sys.stderr.write(f"platform: {platform.name}\n")
    context = cl.Context(platform.get_devices())
    queue = cl.CommandQueue(context)
    mf = cl.mem_flags
    for number, (family_name, config, key) in enumerate(cases()):
        family = get_family(family_name)
        problem = family.problem(key, seed=number)
        variant = family.render(config, problem)
        if number == 0:
            # A planted out-of-bounds read first: proof that the checker sees one.
            variant = dataclasses.replace(
                variant,
                source=variant.source.replace(
                    "float acc_0_0 = 0.0f", "float acc_0_0 = input[in_width * (out_height + fw)]", 1
                ),
            )
        sys.stderr.write(f"{MARKER} {number} {family_name} {key} {config}\n")
        sys.stderr.flush()
        launcher = Launcher(family, variant, cl.Program(context, variant.source).build())
        buffers = {
            name: cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(array))
            for name, array in problem.inputs().items()
        }
        output = np.zeros(problem.output_shape, dtype=problem.output_dtype)
        buffers["output"] = cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=output)
        # Scratch buffers between launches start as NaN: a value the first launch leaves
        # unwritten and the next reads makes a wrong result. Left as made (no host data),
        # Oclgrind 21.10 called values the column pass read from one uninitialised in some
        # runs, though the row pass had written every one (filled with NaN first on PoCL,
        # the buffer came back without one and the results were right).
        for scratch in launcher.scratch(queue, problem).values():
            cl.enqueue_copy(queue, scratch, np.full(scratch.size // 4, np.nan, np.float32))
        launcher.enqueue(queue, problem, buffers)
        cl.enqueue_copy(queue, output, buffers["output"])
        queue.finish()
        error = float(np.abs(output.astype(np.float64) - problem.reference()).max())
        if error > max(1e-4, problem.tolerance()):
            sys.stderr.write(f"error: wrong result, max error {error}\n")
        sys.stderr.flush()
    return 0


def _without_known_false_positives(section: str) -> str:
    """The section minus Oclgrind reports of the kind VECTOR_STORE_FALSE_POSITIVE names
    (a report: one line, then its indented detail lines)."""
    reports: list[list[str]] = []
    for line in section.splitlines():
        if reports and line[:1].isspace():
            reports[-1].append(line)
        else:
            reports.append([line])
    kept = ["\n".join(r) for r in reports]
    return "\n".join(r for r in kept if not all(marker in r for marker in VECTOR_STORE_FALSE_POSITIVE))


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))  # the autotune beside this script, as the child gets it
    try:
        cases()  # a knob value no valid config can take fails here, before any kernel runs
    except NoValidConfig as exc:
        print(f"checks/memory.py: {exc}", file=sys.stderr)
        return 1
    if not Path(ICD_LIBRARY).exists():
        print("checks/memory.py: Oclgrind is not installed (apt-get install oclgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as vendors:
        Path(vendors, "oclgrind.icd").write_text(ICD_LIBRARY + "\n")
        env = dict(
            os.environ,
            OCL_ICD_VENDORS=vendors,
            OCLGRIND_DATA_RACES="1",
            OCLGRIND_UNINITIALIZED="1",
            PYTHONPATH=str(root),
        )
        result = subprocess.run(
            [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True
        )
    if "platform: Oclgrind" not in result.stderr:
        print(result.stderr[-3000:], file=sys.stderr)
        print("checks/memory.py: the kernels did not run on Oclgrind", file=sys.stderr)
        return 1
    sections = result.stderr.split(MARKER)
    planted, sections = sections[1], sections[2:]
    if "Invalid read" not in planted:
        print(planted[:2000], file=sys.stderr)
        print("checks/memory.py: Oclgrind missed the planted out-of-bounds read", file=sys.stderr)
        return 1
    failures = [s.strip() for s in sections if any(p in _without_known_false_positives(s) for p in PROBLEMS)]
    checked = len(sections)
    if result.returncode != 0:
        print(result.stderr[-3000:], file=sys.stderr)
        print(f"checks/memory.py: the kernel runner failed (exit {result.returncode})", file=sys.stderr)
        return 1
    for failure in failures:
        print(failure[:2000], file=sys.stderr)
    print(
        f"{checked} kernels run under Oclgrind (after a planted invalid read it caught), "
        f"{len(failures)} with a reported problem"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(child() if "--child" in sys.argv else main())
