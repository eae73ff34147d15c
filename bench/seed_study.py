#!/usr/bin/env python3
"""Reproduce the seed study on one device: every seed kernel (preset), per filter width.

Prints a Markdown table (median ms, speed-up over the seed baseline) ready for
BENCHMARKS.md. Usage:

    python bench/seed_study.py --device 0 [--filter-width 3,5,7,9,11,17,33] [--image-size 4096x4096]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys

from autotune.devices import device_info
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import image_size, parse_filter_widths
from autotune.study import StudyRow, run_study, speedups


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="3,5,7,9,11,17,33")
    parser.add_argument("--image-size", default=None, help="output WxH")
    parser.add_argument("--json", dest="json_path", help="also write the raw rows here")
    args = parser.parse_args()

    device = device_info(args.device)
    widths = parse_filter_widths(args.filter_width)
    size = image_size(args.image_size, device)
    problems = [Conv2DProblem(width, *size) for width in widths]
    by_width = dict(zip(widths, problems, strict=True))

    def progress(row: StudyRow) -> None:
        m = row.measurement
        shown = f"{m.time_ms:.4f} ms" if m.ok else f"{m.status.value}: {m.error}"
        print(f"{row.label:<5} {row.preset:<14} {shown}", file=sys.stderr, flush=True)

    rows = run_study(args.device, CONV2D, problems, on_row=progress)
    gains = speedups(rows)
    presets = list(dict.fromkeys(r.preset for r in rows))
    print(
        f"Seed study, {datetime.date.today()}, {device.name} ({device.platform}, driver "
        f"{device.driver_version}), {size[0]}x{size[1]} output, float32, median of "
        "OpenCL profiling events.\n"
    )
    print("| preset | " + " | ".join(f"F={w}" for w in widths) + " |")
    print("|---|" + "---|" * len(widths))
    for name in presets:
        cells = []
        for w in widths:
            row = next(r for r in rows if r.problem == by_width[w] and r.preset == name)
            m = row.measurement
            gain = gains.get((by_width[w], name))
            shown = f"{m.time_ms:.3f} ({gain:.2f}x)" if gain is not None else f"{m.time_ms:.3f}"
            cells.append(shown if m.ok else m.status.value)
        print(f"| {name} | " + " | ".join(cells) + " |")
    best = []
    for w in widths:
        ok = [r for r in rows if r.problem == by_width[w] and r.measurement.ok]
        if ok:
            top = min(ok, key=lambda r: r.measurement.time_ms)
            best.append(f"F={w}: {top.preset} {top.gflops:.0f} GFLOP/s")
    print("\nFastest preset per width: " + "; ".join(best))
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(
                {
                    "device": device.to_dict(),
                    "image_size": size,
                    "rows": [
                        {
                            "filter_width": r.problem.key()["filter_width"],
                            "preset": r.preset,
                            **r.measurement.to_dict(),
                        }
                        for r in rows
                    ],
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
