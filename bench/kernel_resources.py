#!/usr/bin/env python3
"""Registers, spills and shared memory of chosen kernels on NVIDIA's OpenCL driver.

Builds each config with `-cl-nv-verbose` and prints the compiler's resource lines
(ptxas info), the first thing to look at when a tile shape loses on the GPU.

    python3 bench/kernel_resources.py --device 0 --filter-width 9,17,33 --config @configs.json
    python3 bench/kernel_resources.py --device 0 --family separable --rank 1,2 --filter-width 17,33 \
        --config @bench/configs/separable_stage_vectors.json
"""

from __future__ import annotations

import argparse
import json
import sys

from bench_common import read_configs

from autotune.devices import open_device
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import GPU_IMAGE, parse_filter_widths
from autotune.families.separable import SEPARABLE, SeparableProblem


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--family", choices=["conv2d", "separable"], default="conv2d")
    parser.add_argument("--rank", default="1", help="ranks, for the separable family")
    parser.add_argument("--filter-width", default="9,17,33")
    parser.add_argument("--config", action="append", default=[], help="JSON object or @file (list ok)")
    parser.add_argument("--pixels", default="{}", help='problem fields, e.g. {"border": "mirror"}')
    args = parser.parse_args()

    import pyopencl as cl

    info, device = open_device(args.device)
    context = cl.Context([device])
    configs = read_configs(args.config)
    print(f"{info.name} ({info.platform}, driver {info.driver_version})")
    pixels = json.loads(args.pixels)
    ranks = [int(rank) for rank in args.rank.split(",")] if args.family == "separable" else [None]
    for width in parse_filter_widths(args.filter_width):
        for rank in ranks:
            for config in configs:
                if rank is None:
                    variant = CONV2D.render(config, Conv2DProblem(width, *GPU_IMAGE, **pixels))
                    c = variant.config
                    label = (
                        f"work {c['work_x']}x{c['work_y']} local {c['local_x']}x{c['local_y']} "
                        f"unroll {c['unroll']} vector {c['vector']}"
                    )
                else:
                    problem = SeparableProblem(width, rank, *GPU_IMAGE, **pixels)
                    completed = SEPARABLE.space.complete(config)
                    reasons = SEPARABLE.space.violations(completed, problem.key(), info)
                    if reasons:
                        label = json.dumps(config, sort_keys=True)
                        print(f"F={width} rank {rank} {label}: invalid: {reasons[0]}", flush=True)
                        continue
                    variant = SEPARABLE.render(completed, problem)
                    label = f"rank {rank} " + json.dumps(config, sort_keys=True, separators=(",", ":"))
                program = cl.Program(context, variant.source).build(options=["-cl-nv-verbose"])
                log = program.get_build_info(device, cl.program_build_info.LOG)
                lines = [
                    line.strip()
                    for line in log.splitlines()
                    if "ptxas" in line and ("Used" in line or "spill" in line)
                ]
                print(
                    f"F={width} {label}: " + " | ".join(lines or ["no ptxas lines in the build log"]),
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
