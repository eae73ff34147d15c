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
from collections.abc import Callable

import numpy as np

from autotune.devices import open_device
from autotune.families.conv2d.inputs import parse_filter_widths, parse_image_size

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
LOCAL = 256


def copy_timer(device_index: int, repeats: int = 50) -> Callable[[int, int], dict[str, float]]:
    """A function (input floats, output floats) -> median ms of each way of copying the
    output's worth of floats, on the given device."""
    import pyopencl as cl

    _, device = open_device(device_index)
    context = cl.Context([device])
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    program = cl.Program(context, SOURCE).build()
    kernels = {name: cl.Kernel(program, name) for name in ("copy1", "copy4")}

    def median_ms(launch: Callable[[], cl.Event]) -> float:
        runs = []
        for _ in range(repeats + 3):
            event = launch()
            event.wait()
            runs.append((event.profile.end - event.profile.start) * 1e-6)
        return statistics.median(runs[3:])

    def measure(in_floats: int, out_floats: int) -> dict[str, float]:
        src = cl.Buffer(context, cl.mem_flags.READ_WRITE, in_floats * 4)
        dst = cl.Buffer(context, cl.mem_flags.READ_WRITE, out_floats * 4)
        cl.enqueue_fill_buffer(queue, src, np.float32(1), 0, in_floats * 4)
        times = {}
        for name, count in (("copy1", out_floats), ("copy4", out_floats // 4)):
            global_size = -(-count // LOCAL) * LOCAL
            kernel = kernels[name]
            times[name] = median_ms(
                lambda kernel=kernel, size=global_size, n=count: kernel(
                    queue, (size,), (LOCAL,), src, dst, np.int32(n)
                )
            )
        times["buffer"] = median_ms(lambda: cl.enqueue_copy(queue, dst, src, byte_count=out_floats * 4))
        return times

    return measure


def ceiling_ms(times: dict[str, float], in_floats: int, out_floats: int) -> float:
    """The best copy, scaled to the bytes the convolution moves (input halo included)."""
    return min(times.values()) * (in_floats + out_floats) / (2 * out_floats)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--image-size", default="4096x4096", help="output WxH")
    parser.add_argument("--filter-width", default="3,5")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()

    info, _ = open_device(args.device)
    measure = copy_timer(args.device, args.repeats)
    width, height = parse_image_size(args.image_size)
    print(f"{info.name}, output {width}x{height}, median of {args.repeats} runs")
    print("| F | convolution moves MB | copy1 ms | copy4 ms | CopyBuffer ms | copy GB/s | ceiling for F ms |")
    print("|---|---|---|---|---|---|---|")
    for filter_width in parse_filter_widths(args.filter_width):
        in_floats = (width + filter_width - 1) * (height + filter_width - 1)
        out_floats = width * height
        times = measure(in_floats, out_floats)
        rate = 2 * out_floats * 4 / (min(times.values()) * 1e-3) / 1e9
        print(
            f"| {filter_width} | {(in_floats + out_floats) * 4 / 1e6:.1f} | {times['copy1']:.4f} "
            f"| {times['copy4']:.4f} | {times['buffer']:.4f} | {rate:.0f} "
            f"| {ceiling_ms(times, in_floats, out_floats):.4f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
