#!/usr/bin/env python3
"""What `Convolver(chunks=N)` gains on a NumPy round trip: uploads, kernels and downloads
of bands of rows overlapping on three queues, against the call in one piece, in
interleaved rounds; every chunked result is checked equal to the unchunked one first.

Made for a GPU (copy engines beside the compute units); on a CPU device it runs the
staged path (`zero_copy=False`) so the script can be tried anywhere, but there the
copies and the kernel share the same cores and nothing overlaps.

    python3 bench/overlap_chunks.py --device 0 [--image-size 8192x8192] [--filter-width 3,9,17]
                                    [--chunks 1,2,4,8] [--mode valid|same] [--db URL]
"""

from __future__ import annotations

import argparse
import datetime
import sys

import numpy as np
from bench_common import interleaved_medians

import autotune
from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import parse_filter_widths, parse_image_size
from autotune.outcomes import TimingPolicy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--image-size", default="8192x8192", help="output WxH")
    parser.add_argument("--filter-width", default="3,9,17")
    parser.add_argument("--chunks", default="1,2,4,8")
    parser.add_argument("--mode", choices=("valid", "same"), default="valid")
    parser.add_argument("--db", default="sqlite:///:memory:", help="[default: none: the fallback kernel]")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    device = device_info(args.device)
    width_px, height_px = parse_image_size(args.image_size)
    counts = [int(n) for n in args.chunks.split(",")]
    print(
        f"Chunked NumPy round trips, {datetime.date.today()}, {device.name} ({device.platform}), "
        f"{width_px}x{height_px} output, float32, mode {args.mode}, --db {args.db}; wall ms per call, "
        f"median of {args.repeats} calls per round, median of {args.rounds} interleaved rounds.\n"
    )
    header = ["F", "kernel ms", *(f"chunks={n}" for n in counts), "best vs chunks=1", "level"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    policy = TimingPolicy(min_runs=10, min_time_s=0.2, max_runs=500, max_time_s=3.0)
    with Evaluator(args.device, CONV2D, policy=policy) as evaluator:
        for width in parse_filter_widths(args.filter_width):
            print(
                "| " + " | ".join(row(width, (width_px, height_px), counts, args, evaluator)) + " |",
                flush=True,
            )
    return 0


def row(
    width: int, size: tuple[int, int], counts: list[int], args: argparse.Namespace, evaluator: Evaluator
) -> list[str]:
    problem = Conv2DProblem(width, *size)
    image, filt = problem.data()
    if args.mode == "same":
        image = np.ascontiguousarray(image[: size[1], : size[0]])
    options = {"device": args.device, "db": args.db, "mode": args.mode, "algorithm": "direct"}
    convolvers = {
        n: autotune.Convolver(image.shape, filt, zero_copy=False, chunks=n, **options) for n in counts
    }
    expected = convolvers[counts[0]](image)
    for n, convolver in convolvers.items():
        if not np.array_equal(convolver(image), expected):
            raise SystemExit(f"F={width}, chunks={n}: the result differs from chunks={counts[0]}")
    calls = {n: (lambda convolver=convolver: convolver(image)) for n, convolver in convolvers.items()}
    medians = interleaved_medians(calls, args.rounds, args.repeats)
    plan = convolvers[counts[0]].plan
    kernel = evaluator.evaluate(plan.config, plan.problem) if args.mode == "valid" else None
    kernel_ms = f"{kernel.time_ms:.3f}" if kernel is not None and kernel.ok else "-"
    base = medians[1] if 1 in medians else medians[counts[0]]
    best = min(medians.values())
    return [str(width), kernel_ms, *(f"{medians[n]:.2f}" for n in counts), f"{base / best:.2f}x", plan.level]


if __name__ == "__main__":
    sys.exit(main())
