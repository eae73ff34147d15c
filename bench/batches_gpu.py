#!/usr/bin/env python3
"""Batches and rows x F filters on a GPU, side by side in one run.

Batches: N frames of HxW filtered in one launch, against N launches of one frame and
against one image of as many pixels, with the kernel tuned for that image's kind
(from the database): kernel time (profiling events, in the measuring worker) and the
wall time of a `Convolver` call on device arrays (N calls for N launches), plus torch
conv2d on the (N, 1, H, W) batch (uint8 -> float -> conv2d -> round, clamp -> uint8,
reflect padding for the mirror border) where installed.

Rows x F: the tuned kernel of each ROWSxF kind in the database, as a share of its
roofline max(bytes / bandwidth, flops / peak), beside the tuned F x F kernel of the
same width.

    python bench/batches_gpu.py --device 0 [--filter-width 3,9] [--frames 64x512x512]
                                [--image-size 4096x4096] [--sizes 1x17,17x1,3x9] [--db URL]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_common import add_roofline_options, roofline_ms

from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import parse_filter_sizes, parse_filter_widths, parse_image_size
from autotune.lookup import resolve
from autotune.outcomes import TimingPolicy
from autotune.store import Store

PIXELS = {"dtype": "uint8", "out_dtype": "uint8", "border": "mirror"}


def wall_ms(call: Callable[[], object], finish: Callable[[], object], repeats: int = 20) -> float:
    call()
    finish()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        finish()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def torch_batch(problem: Conv2DProblem) -> Callable[[], float] | None:
    """CUDA-event time of torch on the same uint8 batch, or None without torch/CUDA."""
    try:
        import torch
        import torch.nn.functional as functional
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    image, filt = problem.data()
    frames = torch.from_numpy(np.array(image)).cuda().reshape(problem.frames, 1, *image.shape[-2:])
    weights = torch.from_numpy(np.array(filt)).cuda()[None, None]
    before, after = problem.anchor_column, problem.filter_width - 1 - problem.anchor_column

    def run() -> Any:
        padded = functional.pad(frames.float(), (before, after, before, after), mode="reflect")
        return functional.conv2d(padded, weights).round_().clamp_(0, 255).to(torch.uint8)

    def timed() -> float:
        run()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            run()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 10

    return timed


def call_walls(filter_width: int, shape: tuple[int, int, int], db: str | None) -> tuple[float, float]:
    """Wall ms of one batched Convolver call and of N one-frame calls, on device arrays
    (the kernel runs as the public API serves it)."""
    import pyopencl.array as cl_array

    import autotune

    rng = np.random.default_rng(0)
    taps = rng.uniform(0, 1, (filter_width, filter_width)).astype(np.float32)
    taps /= taps.sum()
    options = {"mode": "same", "border": "mirror", "dtype": np.uint8, "out_dtype": "same", "db": db}
    batched = autotune.Convolver(shape, taps, batch=True, **options)
    single = autotune.Convolver(shape[1:], taps, **options)
    data = rng.integers(0, 256, shape, dtype=np.uint8)
    on_device = cl_array.to_device(batched.queue, data)
    out = cl_array.empty(batched.queue, shape, np.uint8)
    views = [cl_array.to_device(single.queue, frame) for frame in data]
    outs = [cl_array.empty(single.queue, shape[1:], np.uint8) for _ in views]
    batch_wall = wall_ms(lambda: batched(on_device, out=out, wait=False), batched.queue.finish)
    frames_wall = wall_ms(
        lambda: [single(v, out=o, wait=False) for v, o in zip(views, outs, strict=True)], single.queue.finish
    )
    return batch_wall, frames_wall


def batches(args: argparse.Namespace, store: Store, device: Any, evaluator: Evaluator) -> list[str]:
    frames, height, width = (int(n) for n in args.frames.lower().split("x"))
    whole = parse_image_size(args.image_size)
    lines = [
        f"Batches: {frames} frames of {width}x{height} uint8, mirror border, uint8 out, against one "
        f"{whole[0]}x{whole[1]} image; the kernel tuned for the {whole[0]}x{whole[1]} kind.\n",
        "| F | one image, kernel ms | batch, one launch, kernel ms | batch tuned as one, kernel ms "
        "| one frame x N, kernel ms | batch call, wall ms | N frame calls, wall ms | torch batch ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for filter_width in parse_filter_widths(args.filter_width):
        image_problem = Conv2DProblem(filter_width, *whole, **PIXELS)
        choice = resolve(store.best(), CONV2D, image_problem, device)
        if choice.level != "exact":
            print(f"F={filter_width}: no tuned {whole} uint8 mirror kernel; skipped", file=sys.stderr)
            continue
        config = choice.config
        batch = Conv2DProblem(filter_width, width, height, **PIXELS, frames=frames)
        frame = Conv2DProblem(filter_width, width, height, **PIXELS)
        own = resolve(store.best(), CONV2D, batch, device)  # `search --frames N` tunes the batch itself
        runs = [("image", image_problem, config), ("batch", batch, config), ("frame", frame, config)]
        if own.level == "exact":
            runs.append(("batch tuned", batch, own.config))
        kernel: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for name, problem, run_config in runs:
                m = evaluator.evaluate(run_config, problem)
                kernel.setdefault(name, []).append(m.time_ms if m.ok else float("nan"))
                if not m.ok:
                    print(f"F={filter_width} {name}: {m.status.value} {m.error}", file=sys.stderr)
        ms = {name: statistics.median(v) for name, v in kernel.items()}
        batch_wall, frames_wall = call_walls(filter_width, (frames, height, width), args.db)
        torch_timer = torch_batch(batch)
        torch_ms = (
            statistics.median(torch_timer() for _ in range(args.rounds)) if torch_timer else float("nan")
        )
        lines.append(
            f"| {filter_width} | {ms['image']:.4f} | {ms['batch']:.4f} "
            f"| {ms.get('batch tuned', float('nan')):.4f} "
            f"| {ms['frame'] * frames:.4f} "
            f"| {batch_wall:.4f} | {frames_wall:.4f} | {torch_ms:.4f} |"
        )
        lines.append(f"\nF={filter_width} config: `{json.dumps(config, separators=(',', ':'))}`")
        if own.level == "exact":
            lines.append(
                f"F={filter_width} batch tuned as one: `{json.dumps(own.config, separators=(',', ':'))}`"
            )
        lines.append("")
    return lines


def rectangles(args: argparse.Namespace, store: Store, device: Any, evaluator: Evaluator) -> list[str]:
    size = parse_image_size(args.image_size)
    lines = [
        f"\nRows x F filters, float32 'valid', {size[0]}x{size[1]}: the tuned kernel of each kind "
        f"(roofline at {args.bandwidth / 1e12:.2f} TB/s, {args.peak / 1e12:.0f} TFLOP/s).\n",
        "| filter | kernel ms | GFLOP/s | % of roofline | config |",
        "|---|---|---|---|---|",
    ]
    for filter_size in parse_filter_sizes(args.sizes):
        rows, columns = filter_size if isinstance(filter_size, tuple) else (0, filter_size)
        problem = Conv2DProblem(columns, *size, filter_height=rows)
        choice = resolve(store.best(), CONV2D, problem, device)
        if choice.level != "exact":
            print(f"{filter_size}: not tuned here; skipped", file=sys.stderr)
            continue
        times = []
        for _ in range(args.rounds):
            m = evaluator.evaluate(choice.config, problem)
            times.append(m.time_ms if m.ok else float("nan"))
        ms = statistics.median(times)
        roofline = roofline_ms(problem, args)
        label = f"{problem.filter_rows}x{columns}"
        lines.append(
            f"| {label} | {ms:.4f} | {problem.gflops(ms):.0f} | {roofline / ms * 100:.0f}% "
            f"| `{json.dumps(choice.config, separators=(',', ':'))}` |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="3,9")
    parser.add_argument("--frames", default="64x512x512", help="NxHxW of the batch")
    parser.add_argument("--image-size", default="4096x4096")
    parser.add_argument("--sizes", default="1x17,17x1,3x9,9x3,17", help="ROWSxF kinds to time")
    parser.add_argument("--db", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    add_roofline_options(parser)
    args = parser.parse_args()
    device = device_info(args.device)
    store = Store(args.db)
    policy = TimingPolicy(min_runs=10, min_time_s=0.2, max_runs=500, max_time_s=3.0)
    print(
        f"{datetime.date.today()}, {device.name} ({device.platform}, driver {device.driver_version}), "
        f"median of {args.rounds} interleaved rounds.\n"
    )
    with Evaluator(args.device, CONV2D, policy=policy) as evaluator:
        lines = batches(args, store, device, evaluator) + rectangles(args, store, device, evaluator)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
