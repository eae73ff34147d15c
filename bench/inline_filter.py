#!/usr/bin/env python3
"""Each chosen config beside its twin with the filter compiled in (`filter_space=literal`),
timed in interleaved rounds, with the registers NVIDIA's compiler reports.

With the taps as literals the compiler folds them into the multiply-adds, so no
register holds a tap; the question is how much of the mid-size filters' register
pressure (64-124 registers at F = 7-11) that removes, and what it is worth. Both
versions are verified against the NumPy reference before they are timed.

    python3 bench/inline_filter.py --device 0 --filter-width 7,9,11 --config @configs.json
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("--filter-width", default="7,9,11")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--image-size", default=None, help="output WxH (default 4096x4096)")
    parser.add_argument("--config", action="append", default=[], help="JSON object or @file (list ok)")
    args = parser.parse_args()

    import pyopencl as cl

    info, device = open_device(args.device)
    context = cl.Context([device])
    nvidia = "NVIDIA" in info.platform
    configs = read_configs(args.config)
    size = parse_image_size(args.image_size) if args.image_size else GPU_IMAGE
    print(f"{info.name} ({info.platform}, driver {info.driver_version}), {size[0]}x{size[1]} output")
    print("| F | config | filter_space | registers | median ms | vs as given |")
    print("|---|---|---|---|---|---|")
    with Evaluator(args.device, CONV2D) as evaluator:
        for width in parse_filter_widths(args.filter_width):
            problem = Conv2DProblem(width, *size)
            for config in configs:
                spaces = [config.get("filter_space", "constant"), "literal"]
                twins = [{**config, "filter_space": space} for space in spaces]
                # A literal twin is compiled for the problem's seeded filter, the one it is verified with.
                variants = [CONV2D.render(twin, problem) for twin in twins]
                times: list[list[float]] = [[] for _ in variants]
                failures: list[str] = ["failed" for _ in variants]
                for _ in range(args.rounds):
                    for i, variant in enumerate(variants):
                        m = evaluator.measure(variant, problem)
                        if m.ok and m.time_ms is not None:
                            times[i].append(m.time_ms)
                        else:
                            failures[i] = m.status.value
                label = json.dumps(config, separators=(",", ":"))
                reference = statistics.median(times[0]) if times[0] else None
                for space, variant, samples, failure in zip(spaces, variants, times, failures, strict=True):
                    ms = statistics.median(samples) if samples else None
                    ratio = f"{ms / reference:.3f}" if ms and reference else "-"
                    used = nvidia_resources(cl, context, device, variant)[0] if nvidia else "?"
                    shown = f"{ms:.4f}" if ms else failure
                    print(f"| {width} | {label} | {space} | {used} | {shown} | {ratio} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
