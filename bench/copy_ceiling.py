#!/usr/bin/env python3
"""What a plain copy of a convolution's bytes takes: the real ceiling for small filters.

Times copy kernels that move exactly the bytes of one 'valid' convolution (read the
input image, write the output image) with the same OpenCL profiling events the tuner
uses, next to `clEnqueueCopyBuffer` of the same sizes. For small F the tuned kernels
should be judged against these times rather than against a bandwidth figure taken
from a much larger copy.

    python bench/copy_ceiling.py --device 0 [--image-size 4096x4096] [--filter-width 3,5] [--repeats 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from autotune.cli import parse_filter_widths, parse_image_size
from autotune.devices import open_device

SOURCE = """
__kernel void copy1(__global const float *restrict src, __global float *restrict dst, const int n)
{
    const int i = get_global_id(0);
    if (i < n) dst[i] = src[i];
}
__kernel void copy4(__global const float4 *restrict src, __global float4 *restrict dst, const int n4)
{
    const int i = get_global_id(0);
    if (i < n4) dst[i] = src[i];
}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--image-size", default="4096x4096", help="output WxH")
    parser.add_argument("--filter-width", default="3,5")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()

    import pyopencl as cl

    info, device = open_device(args.device)
    context = cl.Context([device])
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    program = cl.Program(context, SOURCE).build()
    kernels = {name: cl.Kernel(program, name) for name in ("copy1", "copy4")}
    width, height = parse_image_size(args.image_size)
    print(f"{info.name}, output {width}x{height}, median of {args.repeats} runs")
    print("| F | convolution moves MB | copy1 ms | copy4 ms | CopyBuffer ms | copy GB/s | ceiling for F ms |")
    print("|---|---|---|---|---|---|---|")
    for filter_width in parse_filter_widths(args.filter_width):
        in_floats = (width + filter_width - 1) * (height + filter_width - 1)
        out_floats = width * height
        src = cl.Buffer(context, cl.mem_flags.READ_WRITE, in_floats * 4)
        dst = cl.Buffer(context, cl.mem_flags.READ_WRITE, out_floats * 4)
        cl.enqueue_fill_buffer(queue, src, np.float32(1), 0, in_floats * 4)
        # The copies read as many floats as they write; the convolution reads a few
        # more (the halo), so its ceiling is the best copy time scaled by bytes.
        times = {}
        for name, count, local in (("copy1", out_floats, 256), ("copy4", out_floats // 4, 256)):
            kernel = kernels[name]
            global_size = -(-count // local) * local
            runs = []
            for _ in range(args.repeats + 3):
                event = kernel(queue, (global_size,), (local,), src, dst, np.int32(count))
                event.wait()
                runs.append((event.profile.end - event.profile.start) * 1e-6)
            times[name] = statistics.median(runs[3:])
        runs = []
        for _ in range(args.repeats + 3):
            event = cl.enqueue_copy(queue, dst, src, byte_count=out_floats * 4)
            event.wait()
            runs.append((event.profile.end - event.profile.start) * 1e-6)
        times["buffer"] = statistics.median(runs[3:])
        moved = 2 * out_floats * 4  # what the copies move
        needed = (in_floats + out_floats) * 4  # what the convolution must move
        best = min(times.values())
        print(
            f"| {filter_width} | {needed / 1e6:.1f} | {times['copy1']:.4f} | {times['copy4']:.4f} "
            f"| {times['buffer']:.4f} | {moved / (best * 1e-3) / 1e9:.0f} | {best * needed / moved:.4f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
