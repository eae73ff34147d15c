#!/usr/bin/env python3
"""Would a two-kernel separable form pay? A probe, not part of the family: a row pass
into a global buffer of rank x in_height x out_width floats (float4 windows, RX outputs
per work-item), then a column pass (float4 columns, CY outputs down each), each swept
over a few shapes, then the best pair timed back to back beside the fused one-kernel
winners of a search (`--fused`: search JSON as `autotune search --json` writes it), all
in one process on one device. Square 'valid' output, float32, taps compiled in.

    python3 bench/separable_two_pass_probe.py --device 0 --fused bench/results/search_separable_windows.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyopencl as cl
from scipy import signal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autotune.devices import open_device  # noqa: E402
from autotune.families.separable import SEPARABLE, SeparableProblem  # noqa: E402
from autotune.report.ceilings import profiled_median_ms  # noqa: E402

ROW_PASS = r"""
__kernel __attribute__((reqd_work_group_size(LX, 1, 1)))
void rows(__global const float4 *restrict input, __global float *restrict mid,
          const int in_width4, const int out_width, const int in_height)
{
    const int x4 = get_global_id(0) * (RX / 4);  /* the first float4 of this work-item's outputs */
    const int y = get_global_id(1);
    if (x4 * 4 >= out_width || y >= in_height)
        return;
    __global const float4 *row = input + y * in_width4 + x4;
    float v[RX + F + 3];
    #pragma unroll
    for (int q = 0; q < (RX + F + 2) / 4; ++q) {
        const float4 w = row[q];
        v[4 * q] = w.x; v[4 * q + 1] = w.y; v[4 * q + 2] = w.z; v[4 * q + 3] = w.w;
    }
    #pragma unroll
    for (int k = 0; k < RANK; ++k) {
        float s[RX];
        #pragma unroll
        for (int i = 0; i < RX; ++i) {
            s[i] = 0.0f;
            #pragma unroll
            for (int t = 0; t < F; ++t)
                s[i] += row_taps[k * F + t] * v[i + t];
        }
        __global float4 *m = (__global float4 *)(mid + ((size_t)k * in_height + y) * out_width) + x4;
        #pragma unroll
        for (int q = 0; q < RX / 4; ++q)
            m[q] = (float4)(s[4 * q], s[4 * q + 1], s[4 * q + 2], s[4 * q + 3]);
    }
}
"""

COLUMN_PASS = r"""
__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void columns(__global const float4 *restrict mid, __global float4 *restrict output,
             const int out_width4, const int out_height, const int in_height)
{
    const int x4 = get_global_id(0);
    const int y0 = get_global_id(1) * CY;
    if (x4 >= out_width4 || y0 >= out_height)
        return;
    float4 acc[CY];
    #pragma unroll
    for (int j = 0; j < CY; ++j)
        acc[j] = 0.0f;
    #pragma unroll
    for (int k = 0; k < RANK; ++k) {
        __global const float4 *m = mid + ((size_t)k * in_height + y0) * out_width4 + x4;
        #pragma unroll
        for (int t = 0; t < CY + F - 1; ++t) {
            const float4 u = m[t * out_width4];
            #pragma unroll
            for (int j = 0; j < CY; ++j)
                if (t - j >= 0 && t - j < F)
                    acc[j] += column_taps[k * F + t - j] * u;
        }
    }
    #pragma unroll
    for (int j = 0; j < CY; ++j)
        if (y0 + j < out_height)
            output[(y0 + j) * out_width4 + x4] = acc[j];
}
"""

Launch = Callable[[], cl.Event]


def taps_source(name: str, taps: np.ndarray) -> str:
    return f"__constant float {name}[] = {{" + ", ".join(float(v).hex() + "f" for v in taps.ravel()) + "};\n"


def defines(**names: int) -> str:
    return "".join(f"#define {name} {value}\n" for name, value in names.items())


def launcher(queue: cl.CommandQueue, kernel: cl.Kernel, global_size, local_size, arguments) -> Launch:
    return lambda: kernel(queue, global_size, local_size, *arguments)


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def fused_configs(path: str) -> dict[tuple[int, int], dict]:
    """{(F, rank): config} of the float32 'valid' results in a search JSON file."""
    found = {}
    for envelope in json.loads(Path(path).read_text()).values():
        for result in envelope["data"]["results"]:
            if result.get("dtype", "float32") == "float32" and result.get("config"):
                found[(result["filter_width"], result["rank"])] = result["config"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--fused", required=True, help="search JSON with the one-kernel winners")
    parser.add_argument("--size", type=int, default=4096, help="output width and height")
    args = parser.parse_args()
    fused = fused_configs(args.fused)
    context = cl.Context([open_device(args.device)[1]])
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    size, flags = args.size, cl.mem_flags
    print(
        "| F | rank | row pass ms (RX, local) | column pass ms (CY, local) | both, back to back ms "
        "| fused ms | fused / both |"
    )
    print("|---|---|---|---|---|---|---|")
    for width, rank in [(9, 1), (17, 1), (33, 1), (17, 2), (33, 2)]:
        rng = np.random.default_rng(width)
        row_taps, column_taps = (rng.uniform(-1, 1, (rank, width)).astype(np.float32) for _ in range(2))
        in_size = size + width - 1
        image = rng.uniform(-1, 1, (in_size, in_size)).astype(np.float32)
        image_buffer = cl.Buffer(context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=image)
        mid_buffer = cl.Buffer(context, flags.READ_WRITE, rank * in_size * size * 4)
        out_buffer = cl.Buffer(context, flags.WRITE_ONLY, size * size * 4)
        problem_names = {"F": width, "RANK": rank}

        row_shapes = []
        for rx, lx in itertools.product([4, 8], [64, 128, 256]):
            source = defines(**problem_names, RX=rx, LX=lx) + taps_source("row_taps", row_taps) + ROW_PASS
            kernel = cl.Program(context, source).build().rows
            arguments = (image_buffer, mid_buffer, np.int32(in_size // 4), np.int32(size), np.int32(in_size))
            launch = launcher(queue, kernel, (round_up(size // rx, lx), in_size), (lx, 1), arguments)
            row_shapes.append((profiled_median_ms(launch), (rx, lx), launch))
        row_ms, row_shape, row_launch = min(row_shapes, key=lambda shape: shape[0])
        row_launch().wait()

        column_shapes = []
        for cy, lx, ly in itertools.product([4, 8, 16, 32], [32, 64, 128, 256], [1, 2, 4]):
            if lx * ly > 1024:
                continue
            source = defines(**problem_names, CY=cy, LX=lx, LY=ly) + taps_source("column_taps", column_taps)
            kernel = cl.Program(context, source + COLUMN_PASS).build().columns
            arguments = (mid_buffer, out_buffer, np.int32(size // 4), np.int32(size), np.int32(in_size))
            global_size = (round_up(size // 4, lx), round_up(round_up(size, cy) // cy, ly))
            launch = launcher(queue, kernel, global_size, (lx, ly), arguments)
            column_shapes.append((profiled_median_ms(launch), (cy, lx, ly), launch))
        column_ms, column_shape, column_launch = min(column_shapes, key=lambda shape: shape[0])

        pairs = []
        for _ in range(30):
            first = row_launch()
            last = column_launch()
            last.wait()
            pairs.append((last.profile.end - first.profile.start) * 1e-6)
        pair_ms = float(np.median(pairs))
        out = np.empty((size, size), np.float32)
        cl.enqueue_copy(queue, out, out_buffer)
        full = sum(
            np.outer(column_taps[k].astype(np.float64), row_taps[k].astype(np.float64)) for k in range(rank)
        )
        corner = signal.correlate2d(
            image[: 64 + width - 1, : 96 + width - 1].astype(np.float64), full, "valid"
        )
        assert np.abs(out[:64, :96] - corner).max() < 1e-4 * np.abs(full).sum(), (
            "the two kernels disagree with SciPy"
        )

        fused_text = ratio_text = "-"
        if (width, rank) in fused:
            problem = SeparableProblem(width, rank, size, size)
            variant = SEPARABLE.render(fused[(width, rank)], problem, (row_taps, column_taps))
            kernel = cl.Program(context, variant.source).build().separable
            taps = [
                cl.Buffer(context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=t)
                for t in (row_taps, column_taps)
            ]
            arguments = (
                image_buffer,
                *taps,
                out_buffer,
                *(np.int32(n) for n in (in_size, in_size, size, size)),
            )
            fused_ms = profiled_median_ms(
                launcher(queue, kernel, variant.global_size((size, size)), variant.local_size, arguments)
            )
            fused_text, ratio_text = f"{fused_ms:.4f}", f"{fused_ms / pair_ms:.2f}"
        print(
            f"| {width} | {rank} | {row_ms:.4f} {row_shape} | {column_ms:.4f} {column_shape} | {pair_ms:.4f} "
            f"| {fused_text} | {ratio_text} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
