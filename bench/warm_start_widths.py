#!/usr/bin/env python3
"""One search at one width, warm-started from the best configs of N other widths.

Compares how many tuned widths the warm start should draw from: run it once per N on
copies of the same database (which holds the other widths but not this one). The
search is `autotune search --fresh` with the same defaults (sampler, seed, output size
for the device type), run in this process so the warm start's limit can be set.

    python3 bench/warm_start_widths.py --db sqlite:///copy.db --filter-width 17 --widths 3 [--trials 80]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from autotune.devices import device_info
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import image_size, parse_filter_widths
from autotune.store import Store
from autotune.tune import Budget, Tuner


def _ratio(other: float | None, best: float | None) -> str:
    return f"{other / best:.2f}x" if other and best else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--filter-width", default="17")
    parser.add_argument("--widths", type=int, required=True, help="other widths to warm-start from")
    parser.add_argument("--trials", type=int, default=80)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--image-size", default=None, help="output WxH [default: autotune search's]")
    args = parser.parse_args()

    device = device_info(args.device)
    widths = parse_filter_widths(args.filter_width)
    size = image_size(args.image_size, device)

    def listen(kind: str, data: dict[str, Any]) -> None:
        if kind == "problem_done":
            print(f"{data['label']}: {data['result'].trials} trials", file=sys.stderr, flush=True)

    tuner = Tuner(
        Store(args.db),
        args.device,
        device,
        CONV2D,
        [Conv2DProblem(width, *size) for width in widths],
        budget=Budget(trials=args.trials),
        fresh=True,
        listener=listen,
        warm_start=args.widths,
        other_devices=0,  # this device's own widths only, whatever else the database holds
    )
    results = tuner.run()
    print(
        f"run {tuner.run_id}: best kernels on {device.name}, {size[0]}x{size[1]} output, "
        f"warm start from {args.widths} other widths"
    )
    print("| F | best ms | GFLOP/s | GB/s | vs baseline | vs best seed | trials |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        seed = f"{_ratio(r.best_seed_ms, r.best_ms)} ({r.best_seed_preset})" if r.best_seed_preset else "-"
        cells = [
            str(r.problem.key()["filter_width"]),
            f"{r.best_ms:.4f}" if r.best_ms else "-",
            f"{r.gflops:.1f}" if r.gflops else "-",
            f"{r.gbs:.1f}" if r.gbs else "-",
            _ratio(r.baseline_ms, r.best_ms),
            seed,
            str(r.trials),
        ]
        print("| " + " | ".join(cells) + " |")
    for r in results:
        print(f"{r.label}: {json.dumps(r.best_config, separators=(',', ':'))}")
    return 130 if tuner.stop.requested else 0


if __name__ == "__main__":
    sys.exit(main())
