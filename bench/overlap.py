#!/usr/bin/env python3
"""How well a kernel overlaps its memory traffic with its arithmetic.

For each config, three times from the same rounds (OpenCL profiling events, medians):
- the kernel as rendered (verified first, like every measured kernel);
- its "compute only" twin: the same source with every image-row pointer folded into a
  small window that stays in L1 (same instructions, same stores, almost no DRAM reads;
  its output is wrong on purpose, so it is timed without verification);
- a float4 copy of the convolution's bytes (bench/copy_ceiling.py), the memory floor.
A kernel that overlapped perfectly would take the larger of the last two.

    python3 bench/overlap.py --device 0 --filter-width 5,7,9 --config @configs.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys

from bench_common import read_configs
from copy_ceiling import ceiling_ms, copy_timer

from autotune.devices import open_device
from autotune.evaluate import Evaluator
from autotune.families import KernelVariant
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import GPU_IMAGE, parse_filter_widths, parse_image_size

ROW_POINTER = "input + (y0 + ir) * in_width + x0"
# Keeps the row parity (odd rows of 2-mod-4 pitches take their own path) and x0 mod 4.
IN_L1 = "input + (ir + (y0 & 1)) * in_width + (x0 & 127)"


def compute_only(variant: KernelVariant) -> KernelVariant:
    if ROW_POINTER not in variant.source:
        raise SystemExit("the template's row pointer changed: update bench/overlap.py")
    return dataclasses.replace(variant, source=variant.source.replace(ROW_POINTER, IN_L1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="5,7,9")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--image-size", default=None, help="output WxH (default 4096x4096)")
    parser.add_argument("--config", action="append", default=[], help="JSON object or @file (list ok)")
    args = parser.parse_args()

    import pyopencl as cl

    info, device = open_device(args.device)
    context = cl.Context([device])
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    copy = copy_timer(args.device, repeats=args.repeats)
    configs = read_configs(args.config)
    width, height = parse_image_size(args.image_size) if args.image_size else GPU_IMAGE
    print(f"{info.name} ({info.platform}), {width}x{height} output, median of {args.repeats} runs")
    print("| F | config | kernel ms | compute only ms | copy ms | max(compute, copy) | kernel / max |")
    print("|---|---|---|---|---|---|---|")
    with Evaluator(args.device, CONV2D) as evaluator:
        for filter_width in parse_filter_widths(args.filter_width):
            problem = Conv2DProblem(filter_width, width, height)
            image, taps = problem.data()
            mf = cl.mem_flags
            input_buf = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=image)
            filter_buf = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=taps)
            output_buf = cl.Buffer(context, mf.WRITE_ONLY, size=width * height * 4)
            buffers = {"input": input_buf, "filter": filter_buf, "output": output_buf}
            for config in configs:
                variant = CONV2D.render(config, problem, values=taps)
                checked = evaluator.measure(variant, problem)
                label = json.dumps(config, separators=(",", ":"))
                if not checked.ok:
                    print(f"| {filter_width} | {label} | {checked.status.value} | | | | |", flush=True)
                    continue
                times = {}
                for name, twin in (("kernel", variant), ("compute", compute_only(variant))):
                    program = cl.Program(context, twin.source).build(options=list(twin.build_options))
                    kernel = cl.Kernel(program, twin.kernel_name)
                    kernel.set_args(*CONV2D.arguments(twin, problem, buffers))
                    size = CONV2D.global_size(twin, problem)
                    runs = []
                    for _ in range(args.repeats + 3):
                        event = cl.enqueue_nd_range_kernel(queue, kernel, size, twin.local_size)
                        event.wait()
                        runs.append((event.profile.end - event.profile.start) * 1e-6)
                    times[name] = statistics.median(runs[3:])
                in_floats = problem.in_width * problem.in_height
                floor = ceiling_ms(copy(in_floats, width * height), in_floats, width * height)
                bound = max(times["compute"], floor)
                print(
                    f"| {filter_width} | {label} | {times['kernel']:.4f} | {times['compute']:.4f} "
                    f"| {floor:.4f} | {bound:.4f} | {times['kernel'] / bound:.2f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
