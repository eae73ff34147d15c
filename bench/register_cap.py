#!/usr/bin/env python3
"""Chosen kernels built with a register cap (NVIDIA's `-cl-nv-maxrregcount`), timed in
interleaved rounds, with the registers and spills the compiler reports.

A cap trades spills for warps per SM: the question is whether the mid-size filters'
winners (64-121 registers, 16-32 warps per SM) run faster with more warps. NVIDIA only.

    python3 bench/register_cap.py --device 0 --filter-width 9,11 --caps 0,64,80,96 --config @configs.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys

from bench_common import nvidia_resources, read_configs

from autotune.devices import open_device
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import GPU_IMAGE, parse_filter_widths, parse_image_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="9,11")
    parser.add_argument("--caps", default="0,64,80,96", help="registers per work-item; 0: no cap")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--image-size", default=None, help="output WxH (default 4096x4096)")
    parser.add_argument("--config", action="append", default=[], help="JSON object or @file (list ok)")
    args = parser.parse_args()

    import pyopencl as cl

    info, device = open_device(args.device)
    context = cl.Context([device])
    configs = read_configs(args.config)
    caps = [int(c) for c in args.caps.split(",")]
    size = parse_image_size(args.image_size) if args.image_size else GPU_IMAGE
    print(f"{info.name} ({info.platform}, driver {info.driver_version}), {size[0]}x{size[1]} output")
    print("| F | config | cap | registers | spill stores | median ms | vs no cap |")
    print("|---|---|---|---|---|---|---|")
    with Evaluator(args.device, CONV2D) as evaluator:
        for width in parse_filter_widths(args.filter_width):
            problem = Conv2DProblem(width, *size)
            for config in configs:
                base = CONV2D.render(config, problem)
                variants = [
                    dataclasses.replace(
                        base,
                        build_options=(*base.build_options, f"-cl-nv-maxrregcount={cap}")
                        if cap
                        else base.build_options,
                    )
                    for cap in caps
                ]
                nvidia = "NVIDIA" in info.platform
                resources = [
                    nvidia_resources(cl, context, device, v) if nvidia else ("?", "?") for v in variants
                ]
                times: list[list[float]] = [[] for _ in variants]
                for _ in range(args.rounds):
                    for i, variant in enumerate(variants):
                        m = evaluator.measure(variant, problem)
                        if m.ok and m.time_ms is not None:
                            times[i].append(m.time_ms)
                label = json.dumps(config, separators=(",", ":"))
                reference = statistics.median(times[0]) if times[0] else None
                for cap, (registers, stores), samples in zip(caps, resources, times, strict=True):
                    ms = statistics.median(samples) if samples else None
                    ratio = f"{ms / reference:.3f}" if ms and reference else "-"
                    shown = f"{ms:.4f}" if ms else "failed"
                    row = [width, label, cap or "-", registers, stores, shown, ratio]
                    print("| " + " | ".join(map(str, row)) + " |")
                    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
