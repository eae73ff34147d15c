#!/usr/bin/env python3
"""uint8 'same' output (mirror border) through the separable and the direct family, side
by side in one run: each kind's tuned kernel from the database (separable kinds tuned here
with --trials where missing), timed in interleaved rounds with OpenCL profiling events in
the measuring worker, as a share of the roofline max(bytes / bandwidth, flops / peak).

    python bench/separable_pixels_gpu.py --device 0 [--filter-width 9,17,33] [--image-size 4096x4096]
                                         [--db URL] [--trials 0] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys

from bench_common import add_roofline_options, roofline_ms

from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import image_size, parse_filter_widths
from autotune.families.separable import SEPARABLE, SeparableProblem
from autotune.lookup import resolve
from autotune.outcomes import TimingPolicy
from autotune.store import Store
from autotune.tune import Budget, Tuner

PIXELS = {"out_dtype": "uint8", "border": "mirror"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="9,17,33")
    parser.add_argument("--image-size", default="4096x4096")
    parser.add_argument("--db", default=None)
    parser.add_argument(
        "--trials", type=int, default=0, help="tune separable kinds missing from the database"
    )
    parser.add_argument("--rounds", type=int, default=3)
    add_roofline_options(parser)
    args = parser.parse_args()
    device = device_info(args.device)
    widths = parse_filter_widths(args.filter_width)
    size = image_size(args.image_size, device)
    store = Store(args.db)

    def tuned(family, problem):  # noqa: ANN001, ANN202 - two families
        choice = resolve(store.best(), family, problem, device)
        return choice.config if choice.level == "exact" else None

    separable = {w: SeparableProblem(w, 1, *size, "uint8", **PIXELS) for w in widths}
    direct = {w: Conv2DProblem(w, *size, "uint8", **PIXELS) for w in widths}
    missing = [p for p in separable.values() if tuned(SEPARABLE, p) is None]
    if missing and args.trials > 0:
        Tuner(store, args.device, device, SEPARABLE, missing, budget=Budget(trials=args.trials)).run()
    policy = TimingPolicy(min_runs=10, min_time_s=0.2, max_runs=500, max_time_s=3.0)
    lines = [
        f"uint8 -> uint8 'same' (mirror), {datetime.date.today()}, {device.name} ({device.platform}, driver "
        f"{device.driver_version}), {size[0]}x{size[1]}, median of {args.rounds} interleaved rounds.\n",
        "| F | separable (rank 1) ms | % of its roofline | direct ms | % of its roofline "
        "| direct / separable |",
        "|---|---|---|---|---|---|",
    ]
    configs = []
    with (
        Evaluator(args.device, SEPARABLE, policy=policy) as on_separable,
        Evaluator(args.device, CONV2D, policy=policy) as on_direct,
    ):
        for width in widths:
            runs = [(on_separable, separable[width], tuned(SEPARABLE, separable[width]))]
            runs.append((on_direct, direct[width], tuned(CONV2D, direct[width])))
            times: list[list[float]] = [[], []]
            for _ in range(args.rounds):
                for index, (evaluator, problem, config) in enumerate(runs):
                    if config is None:
                        times[index].append(float("nan"))
                        continue
                    measured = evaluator.evaluate(config, problem)
                    times[index].append(measured.time_ms if measured.ok else float("nan"))
            ms = [statistics.median(t) for t in times]
            shares = [roofline_ms(p, args) / t * 100 for (_, p, _), t in zip(runs, ms, strict=True)]
            lines.append(
                f"| {width} | {ms[0]:.4f} | {shares[0]:.0f}% | {ms[1]:.4f} | {shares[1]:.0f}% "
                f"| {ms[1] / ms[0]:.2f}x |"
            )
            configs.append(f"- F={width} separable: `{json.dumps(runs[0][2], separators=(',', ':'))}`")
            print(lines[-1], file=sys.stderr, flush=True)
    print("\n".join(lines + ["", *configs]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
