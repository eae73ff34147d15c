#!/usr/bin/env python3
"""float64 pixels: the kernel reading and writing double with float32 arithmetic (what
autotune runs), against the same kernel in double arithmetic, and against float32
pixels (what a host conversion feeds it), side by side; with each one's error.

For every filter width and config the direct family renders three kernels of one tile
shape ('valid' output):
- `float32`: float32 pixels in and out (the kernel a host conversion pass feeds);
- `float64`: float64 pixels read and written as double, summed in float32 (today's);
- `double`: the same source with every float made double (taps, sums and all): what
  arithmetic in double would cost.
Times are OpenCL profiling events (median of `--repeats`); the error is the largest
difference from a float64 reference over two corners of the output, in units of the
float32 tolerance `(F * F + 2) * 2^-24 * sum|filter| * max|image|`. The host conversion
a device without double precision pays is timed too (`numpy.astype`, one thread).

    python bench/float64_pixels.py --device 0 --filter-width 3,5,9,17 [--image-size 4096x4096]
        [--config '{"work_x": 4, ...}' ...] [--repeats 30]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time

import numpy as np

from autotune.devices import open_device
from autotune.families.conv2d import CONV2D
from autotune.families.conv2d.inputs import parse_filter_widths, parse_image_size
from autotune.families.conv2d.problem import Conv2DProblem

# Tile shapes that do well on GPUs and CPUs alike for float32 (BENCHMARKS.md); each is
# timed as all three kernels.
CONFIGS = [
    {"work_x": 4, "work_y": 4, "local_x": 32, "local_y": 8, "unroll": "full", "filter_mode": "define"},
    {"work_x": 2, "work_y": 8, "local_x": 32, "local_y": 4, "unroll": "full", "filter_mode": "define"},
    {"work_x": 8, "work_y": 4, "local_x": 16, "local_y": 8, "unroll": "full", "filter_mode": "define"},
]
CORNER = 256  # outputs per side of each corner checked against the reference


def in_double(source: str) -> str:
    """The kernel with every float type, conversion and vector made double."""
    source = re.sub(r"\bconvert_float(\d*)\b", r"convert_double\1", source)
    source = re.sub(r"\bfloat(\d*)\b", r"double\1", source)
    if "cl_khr_fp64" not in source:
        source = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + source
    return source


def reference_corners(image: np.ndarray, filt: np.ndarray, out_shape: tuple[int, int]) -> list[np.ndarray]:
    """The exact 'valid' correlation over the top-left and bottom-right corners."""
    from numpy.lib.stride_tricks import sliding_window_view

    rows, width = filt.shape
    height, out_width = out_shape
    corners = []
    for y0, x0 in ((0, 0), (height - CORNER, out_width - CORNER)):
        patch = image[y0 : y0 + CORNER + rows - 1, x0 : x0 + CORNER + width - 1]
        windows = sliding_window_view(patch, (rows, width))
        corners.append(np.einsum("ijkl,kl->ij", windows, filt))
    return corners


def main() -> int:
    import pyopencl as cl

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="3,5,9,17")
    parser.add_argument("--image-size", default="4096x4096", help="output WxH")
    parser.add_argument("--config", action="append", default=[], help="JSON object (repeatable)")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    info, device = open_device(args.device)
    if not info.double_precision:
        print(f"{info.name} has no double precision", file=sys.stderr)
        return 1
    context = cl.Context([device])
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    out_width, out_height = parse_image_size(args.image_size)
    configs = [json.loads(text) for text in args.config] or CONFIGS
    rng = np.random.default_rng(0)
    print(f"{info.name}, 'valid' output {out_width}x{out_height}, median of {args.repeats} launches")
    print("| F | config | float32 ms | float64 ms | double ms | float64 error | double error |")
    print("|---|---|---|---|---|---|---|")
    best: dict[int, dict[str, float]] = {}
    for width in parse_filter_widths(args.filter_width):
        image64 = rng.uniform(-1, 1, (out_height + width - 1, out_width + width - 1))
        filt = rng.uniform(-1, 1, (width, width))
        start = time.perf_counter()
        image32 = image64.astype(np.float32)
        convert_ms = (time.perf_counter() - start) * 1e3
        exact = reference_corners(image64, filt, (out_height, out_width))
        tolerance = (width * width + 2) * 2.0**-24 * np.abs(filt).sum() * np.abs(image64).max()
        for config in configs:
            row: dict[str, float] = {}
            errors: dict[str, float] = {}
            for label, dtype in (("float32", "float32"), ("float64", "float64"), ("double", "float64")):
                problem = Conv2DProblem(width, out_width, out_height, dtype, out_dtype=dtype)
                full = {**CONV2D.space.complete(config)}
                if CONV2D.violations(full, problem, info):
                    break
                variant = CONV2D.render(full, problem)
                source = in_double(variant.source) if label == "double" else variant.source
                kernel = getattr(cl.Program(context, source).build(), variant.kernel_name)
                pixels = image32 if dtype == "float32" else image64
                taps = filt.astype(np.float64 if label == "double" else np.float32)
                flags = cl.mem_flags
                input_buffer = cl.Buffer(context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=pixels)
                filter_buffer = cl.Buffer(context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=taps)
                output = np.empty((out_height, out_width), dtype=np.dtype(dtype))
                output_buffer = cl.Buffer(context, flags.WRITE_ONLY, output.nbytes)
                buffers = {"input": input_buffer, "filter": filter_buffer, "output": output_buffer}
                arguments = CONV2D.arguments(variant, problem, buffers)
                global_size = CONV2D.global_size(variant, problem)
                times = []
                for _ in range(args.repeats + 3):
                    event = kernel(queue, global_size, variant.local_size, *arguments)
                    event.wait()
                    times.append((event.profile.end - event.profile.start) * 1e-6)
                row[label] = statistics.median(times[3:])
                cl.enqueue_copy(queue, output, output_buffer)
                corners = (output[:CORNER, :CORNER], output[-CORNER:, -CORNER:])
                errors[label] = max(
                    float(np.abs(got.astype(np.float64) - want).max())
                    for got, want in zip(corners, exact, strict=True)
                )
            else:
                print(
                    f"| {width} | `{json.dumps(config, separators=(',', ':'))}` | {row['float32']:.4f} "
                    f"| {row['float64']:.4f} | {row['double']:.4f} | {errors['float64'] / tolerance:.3f} "
                    f"| {errors['double'] / tolerance:.2e} |",
                    flush=True,
                )
                for label, ms in row.items():
                    best.setdefault(width, {})[label] = min(best.get(width, {}).get(label, ms), ms)
        if width in best:
            best[width]["convert"] = convert_ms
    print()
    print("Best of the configs, and the host conversion float64 -> float32 of the image:")
    print("| F | float32 ms | float64 ms | double ms | double / float64 | float64 / float32 | astype ms |")
    print("|---|---|---|---|---|---|---|")
    for width, row in best.items():
        print(
            f"| {width} | {row['float32']:.4f} | {row['float64']:.4f} | {row['double']:.4f} "
            f"| {row['double'] / row['float64']:.2f} | {row['float64'] / row['float32']:.2f} "
            f"| {row['convert']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
