#!/usr/bin/env python3
"""'same' output on a CPU: edge tiles that keep their vectors against the per-output loop.

Kernels with explicit vectors (`x_vector` > 1) give the tiles at the image edge the
interior's vectors, each lane read through a table of the columns the border gives, at
every filter width (`keeps_edge_tile` in autotune/families/conv2d/render.py). Before,
from F = 9 on, those tiles looped over outputs and taps one at a time. This times both
forms of the same configs side by side: the kernel as rendered today, and the same kernel
rendered with the edge tiles' loop (the measuring worker verifies each against the
float64 reference first). Medians of interleaved rounds of the worker's own timing.

    python bench/vector_edge_tiles.py [--filter-width 9,17,33] [--image-size 2048x2048] \
        [--rounds 3] [--config JSON|@file ...] \
        [--pixels '{"dtype": "uint8", "out_dtype": "uint8", "border": "mirror"}' ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from unittest import mock

from bench_common import read_configs

from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d import render as conv2d_render
from autotune.families.conv2d.inputs import parse_filter_widths, parse_image_size

# The layout CPU searches find at F = 9 and 17 (preset `cpu_vectors_full`), with the
# builtin and the bit conversion of integer outputs.
DEFAULT_CONFIGS = [
    {"filter_mode": "define", "filter_space": "constant", "unroll": "full", "x_vector": 16,
     "local_x": 8, "local_y": 8, "work_x": 16, "work_y": 4},
    {"filter_mode": "define", "filter_space": "constant", "unroll": "full", "x_vector": 16,
     "local_x": 8, "local_y": 8, "work_x": 16, "work_y": 4, "output_conversion": "bits"},
]  # fmt: skip
UINT8_MIRROR = {"dtype": "uint8", "out_dtype": "uint8", "border": "mirror"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="9,17")
    parser.add_argument("--image-size", default="2048x2048")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pixels", action="append", default=None, help="problem fields (JSON), repeatable")
    parser.add_argument("--config", action="append", default=[], help="JSON object or @file (list ok)")
    args = parser.parse_args()
    widths = parse_filter_widths(args.filter_width)
    width, height = parse_image_size(args.image_size)
    kinds = [json.loads(text) for text in args.pixels] if args.pixels else [UINT8_MIRROR]
    configs = read_configs(args.config) or DEFAULT_CONFIGS
    device = device_info(args.device)
    print(f"{device.name}, {width}x{height} output, medians of {args.rounds} interleaved rounds")
    print("| F | pixels | config | vector edge tiles ms | edge loop ms | loop / vectors | compile ms |")
    print("|---|---|---|---|---|---|---|")
    with Evaluator(args.device, CONV2D) as evaluator:
        cases = []
        for filter_width in widths:
            for fields in kinds:
                problem = Conv2DProblem(filter_width, width, height, **fields)
                for config in configs:
                    config = CONV2D.space.complete(config)
                    if CONV2D.violations(config, problem, evaluator.device):
                        print(f"not valid here: F = {filter_width} {fields} {config}", file=sys.stderr)
                        continue
                    today = CONV2D.render(config, problem)
                    with mock.patch.object(conv2d_render, "keeps_edge_tile", lambda *_: False):
                        loop = CONV2D.render(config, problem)
                    cases.append((filter_width, fields, config, {"vectors": today, "loop": loop}, problem))
        times: dict[tuple[int, str], list[float]] = {}
        compile_ms: dict[int, float] = {}
        for _ in range(args.rounds):
            for index, (_, _, _, variants, problem) in enumerate(cases):
                for form, variant in variants.items():
                    measured = evaluator.measure(variant, problem)
                    if not measured.ok:
                        print(f"{form} {index}: {measured.status.value} {measured.error}", file=sys.stderr)
                        return 1
                    times.setdefault((index, form), []).append(measured.time_ms)
                    if form == "vectors" and measured.compile_ms is not None:
                        compile_ms.setdefault(index, measured.compile_ms)
        for index, (filter_width, fields, config, _, _) in enumerate(cases):
            vectors = statistics.median(times[(index, "vectors")])
            loop = statistics.median(times[(index, "loop")])
            label = (
                f"x_vector {config['x_vector']}, {config['local_x']}x{config['local_y']} of "
                f"{config['work_x']}x{config['work_y']}, unroll {config['unroll']}, "
                f"{config['output_conversion']}"
            )
            pixels = json.dumps(fields, separators=(",", ":"))
            print(
                f"| {filter_width} | {pixels} | {label} | {vectors:.2f} | {loop:.2f} | {loop / vectors:.2f} "
                f"| {compile_ms.get(index, 0):.0f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
