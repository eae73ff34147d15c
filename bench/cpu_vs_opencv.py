#!/usr/bin/env python3
"""Tuned kernels on PoCL against cv2.filter2D on the same CPU, side by side.

For each filter width: tune with a fixed budget (or reuse the database), then time
the best kernel (OpenCL profiling events, kernel only) and cv2.filter2D (host clock,
cv2 limited to as many threads as PoCL has compute units) in interleaved rounds, and
print the ratio; on float32 'valid' problems torch's conv2d (oneDNN) and Halide pipelines
(Adams2019 and Mullapudi2016 autoschedulers) with as many threads are timed beside them,
each checked against SciPy first. GFLOP/s are shown as a share of the FMA peak measured
on the device (`bench/device_peak.py`). cv2 filters the same input image; its output is the input's size,
so it computes slightly more outputs ((W+F-1)^2 against W^2). With --pixels naming a
pixel type, output type, border or channels (problem fields as JSON), both filter the
same uint8 / colour image, 'same' output with the same border, cv2 with ddepth=-1 where
the output keeps the input's type.

    python bench/cpu_vs_opencv.py --device 0 [--filter-width 3,5,9,17] [--image-size 2048x2048]
                                  [--trials 60] [--db sqlite:///bench.db] [--rounds 5]
                                  [--pixels '{"dtype": "uint8", "out_dtype": "uint8", "border": "mirror"}']
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable

import cpu_peers
import device_peak
import numpy as np
from bench_common import interleaved_medians

from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import parse_filter_widths, parse_image_size
from autotune.outcomes import TimingPolicy
from autotune.store import Store
from autotune.tune import Budget, Tuner

CV2_BORDERS = {"none": 0, "constant": 0, "replicate": 1, "reflect": 2, "wrap": 3, "mirror": 4}  # cv2.BORDER_*


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="3,5,9,17")
    parser.add_argument("--image-size", default="2048x2048")
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--db", default="sqlite:///cpu_vs_opencv.db")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--pixels", default="{}", help="problem fields as JSON (dtype, out_dtype, border, channels)"
    )
    parser.add_argument(
        "--peers",
        default="torch,halide",
        help="libraries timed beside cv2 on float32 'valid' problems (torch, halide; '' for none)",
    )
    args = parser.parse_args()
    pixels = json.loads(args.pixels)

    import cv2

    device = device_info(args.device)
    widths = parse_filter_widths(args.filter_width)
    size = parse_image_size(args.image_size)
    threads = device.compute_units
    cv2.setNumThreads(threads)
    store = Store(args.db)
    tuner = Tuner(
        store,
        args.device,
        device,
        CONV2D,
        [Conv2DProblem(width, *size, **pixels) for width in widths],
        budget=Budget(trials=args.trials),
        listener=lambda kind, data: (
            print(f"  {kind} {data['label']}", file=sys.stderr) if kind == "problem_done" else None
        ),
    )
    started = time.perf_counter()
    results = tuner.run()
    tuning_s = time.perf_counter() - started
    policy = TimingPolicy(min_runs=5, min_time_s=0.5, max_runs=200, max_time_s=5.0)
    peak = device_peak.best_of(args.device, rounds=3)
    float_valid = not pixels or pixels == {"dtype": "float32"}
    peers = [name for name in args.peers.split(",") if name] if float_valid else []
    rows = []
    with Evaluator(args.device, CONV2D, policy=policy) as evaluator:
        for result in results:
            problem = result.problem
            assert isinstance(problem, Conv2DProblem)
            width = problem.filter_width
            image, filt = problem.data()
            depth = -1 if problem.out_dtype == problem.dtype else cv2.CV_32F
            border = CV2_BORDERS[problem.border]
            expected = cv2.filter2D(image, depth, filt, borderType=border)
            half = width // 2
            if not problem.same:
                assert width % 2 == 1, "cv2's anchor for even widths differs; use odd widths"
                expected = expected[half : half + size[1], half : half + size[0]]
            reference = problem.reference()
            calls = {"cv2": functools.partial(cv2.filter2D, image, depth, filt, borderType=border)}
            for name in peers:
                calls |= _peer_calls(name, image, filt, threads)
            for name, call in calls.items():
                if name != "cv2":
                    error = float(np.abs(call() - reference).max())
                    assert error <= problem.tolerance(), f"{name} F={width}: max error {error}"
            ours: list[float] = []
            theirs: dict[str, list[float]] = {name: [] for name in calls}
            for _ in range(args.rounds):
                m = evaluator.evaluate(result.best_config, problem)
                assert m.ok, m.error
                ours.append(m.time_ms)
                for name, ms in interleaved_medians(calls, rounds=1, repeats=5).items():
                    theirs[name].append(ms)
            ours_ms = statistics.median(ours)
            rows.append(
                {
                    "filter_width": width,
                    "ours_ms": ours_ms,
                    "peers_ms": {name: statistics.median(times) for name, times in theirs.items()},
                    "gflops": problem.flops / (ours_ms * 1e-3) / 1e9,
                    "config": result.best_config,
                    "cv2_max_error": float(np.abs(expected.reshape(reference.shape) - reference).max()),
                }
            )
    kind_words = CONV2D.describe_kind(Conv2DProblem(1, 1, 1, **pixels).kind()).partition(" ")[2]
    print(
        f"CPU comparison, {datetime.date.today()}, {device.name} ({device.platform}, "
        f"{threads} compute units), "
        f"{size[0]}x{size[1]} output, {kind_words or 'float32'}; "
        f"tuning {args.trials} trials per width took {tuning_s:.0f} s; measured on this device: "
        f"FP32 FMA peak {peak.peak_gflops:.0f} GFLOP/s, copy {peak.bandwidth_gbs:.1f} GB/s "
        "(`bench/device_peak.py`).\n"
    )
    names = list(rows[0]["peers_ms"]) if rows else ["cv2"]
    print(
        "| F | tuned kernel ms | "
        + " | ".join(f"{n} ms" for n in names)
        + " | "
        + " | ".join(f"ours / {n}" for n in names)
        + " | GFLOP/s | % of peak | config |"
    )
    print("|---" * (5 + 2 * len(names)) + "|")
    for r in rows:
        peers_ms = r["peers_ms"]
        print(
            f"| {r['filter_width']} | {r['ours_ms']:.2f} | "
            + " | ".join(f"{peers_ms[n]:.2f}" for n in names)
            + " | "
            + " | ".join(f"{r['ours_ms'] / peers_ms[n]:.2f}" for n in names)
            + f" | {r['gflops']:.1f} | {100 * r['gflops'] / peak.peak_gflops:.0f} | "
            f"`{json.dumps(r['config'], separators=(',', ':'))}` |"
        )
    return 0


def _peer_calls(name: str, image: np.ndarray, filt: np.ndarray, threads: int) -> dict[str, Callable]:
    """The named peer's calls on these arrays ('halide': one per autoscheduler)."""
    if name == "torch":
        return {"torch": cpu_peers.torch_correlate(image, filt, threads)}
    if name == "halide":
        return {
            f"halide {scheduler}": cpu_peers.halide_correlate(image, filt, threads, scheduler)
            for scheduler in cpu_peers.HALIDE_AUTOSCHEDULERS
        }
    raise SystemExit(f"unknown peer {name!r}: torch or halide")


if __name__ == "__main__":
    sys.exit(main())
