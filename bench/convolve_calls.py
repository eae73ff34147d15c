#!/usr/bin/env python3
"""What each `autotune.convolve()` call costs, wall clock, as a program sees it: the
first call for a width, the same or a new filter again, and the same with
`specialise=True` (a kernel with the filter compiled in, one compile per filter).

    python3 bench/convolve_calls.py --device 0 --db sqlite:///tuned.db --filter-width 9 [-s 4096x4096]

With `--repeated WxH,...`: the same call repeated on small images (median wall time
per call), in this tree and, with `--baseline DIR` (another commit's files, e.g.
`mkdir /tmp/before && git archive <commit> | tar -x -C /tmp/before`), in that tree too:
each tree times in a process of its own, and the two take turns round by round so both
see the same load.

    python3 bench/convolve_calls.py --db sqlite:///t.db --repeated 64x64,256x256 -f 3 --baseline /tmp/before
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from bench_common import TreeWorkers

import autotune
from autotune import runtime
from autotune.families.conv2d.inputs import GPU_IMAGE, parse_filter_widths, parse_image_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--db", required=True)
    parser.add_argument("--filter-width", "-f", default="9")
    parser.add_argument("--image-size", "-s", default=None, help="output WxH (default 4096x4096)")
    parser.add_argument("--repeated", default=None, help="output sizes WxH,... of repeated calls")
    parser.add_argument("--baseline", default=None, help="another tree to time beside this one")
    parser.add_argument("--calls", type=int, default=200, help="calls per round (--repeated)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per tree (--repeated)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.repeated:
        return repeated(args)
    width_px, height_px = parse_image_size(args.image_size) if args.image_size else GPU_IMAGE
    rng = np.random.default_rng(0)
    print("| F | call | kernel | wall ms |")
    print("|---|---|---|---|")
    for width in parse_filter_widths(args.filter_width):
        image = rng.uniform(-1, 1, (height_px + width - 1, width_px + width - 1)).astype(np.float32)
        a, b, c = (rng.uniform(-1, 1, (width, width)).astype(np.float32) for _ in range(3))
        plan = autotune.plan(image.shape, width, device=args.device, db=args.db)
        print(f"<!-- F={width}: {plan.level} {plan.config} -->")
        calls = [
            ("first call for the width, filter A", a, False),
            ("filter A again", a, False),
            ("new filter B", b, False),
            ("filter A, specialise=True", a, True),
            ("filter A again, specialise=True", a, True),
            ("new filter C, specialise=True", c, True),
        ]
        for label, filt, specialise in calls:
            start = time.perf_counter()
            autotune.convolve(image, filt, device=args.device, db=args.db, specialise=specialise)
            wall = (time.perf_counter() - start) * 1e3
            _, source = next(reversed(runtime._programs))
            kind = "filter compiled in" if "filter_values" in source else "reads the argument"
            print(f"| {width} | {label} | {kind} | {wall:.1f} |", flush=True)
    return 0


def worker(args: argparse.Namespace) -> int:
    """Answer {"size": [W, H], "width": F, "calls": N} lines with the median ms per call
    (after one warm-up call), as JSON, in whatever tree PYTHONPATH points at."""
    for line in sys.stdin:
        request = json.loads(line)
        (width_px, height_px), width = request["size"], request["width"]
        rng = np.random.default_rng(0)
        image = rng.uniform(-1, 1, (height_px + width - 1, width_px + width - 1)).astype(np.float32)
        filt = rng.uniform(-1, 1, (width, width)).astype(np.float32)
        autotune.convolve(image, filt, device=args.device, db=args.db)
        times = []
        for _ in range(request["calls"]):
            start = time.perf_counter()
            autotune.convolve(image, filt, device=args.device, db=args.db)
            times.append((time.perf_counter() - start) * 1e3)
        print(json.dumps({"median_ms": statistics.median(times)}), flush=True)
    return 0


def repeated(args: argparse.Namespace) -> int:
    trees = {"this tree": Path(__file__).resolve().parent.parent}
    if args.baseline:
        trees = {"baseline": Path(args.baseline).resolve(), **trees}
    workers = TreeWorkers(__file__, trees, ["--db", args.db, "--device", str(args.device)])
    print(
        f"Repeated `autotune.convolve()` calls, {time.strftime('%Y-%m-%d')}, device {args.device}, "
        f"--db {args.db}; wall ms per call: median of {args.calls} calls per round, "
        f"median over {args.rounds} rounds; trees take turns round by round.\n"
    )
    names = list(trees)
    header = ["output", "F", *(f"{n} ({workers.revisions[n]})" for n in names)]
    header += ["ratio"] if len(names) == 2 else []
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for size in args.repeated.split(","):
        width_px, height_px = parse_image_size(size)
        for width in parse_filter_widths(args.filter_width):
            medians: dict[str, list[float]] = {n: [] for n in names}
            request = {"size": [width_px, height_px], "width": width, "calls": args.calls}
            for _ in range(args.rounds):
                for name in names:
                    medians[name].append(workers.ask(name, request)["median_ms"])
            cells = [f"{statistics.median(medians[n]):.3f}" for n in names]
            if len(names) == 2:
                ratio = statistics.median(medians[names[0]]) / statistics.median(medians[names[1]])
                cells.append(f"{ratio:.1f}x")
            print(f"| {width_px}x{height_px} | {width} | " + " | ".join(cells) + " |", flush=True)
    workers.close()
    print()
    print(database_costs(args.db))
    return 0


def database_costs(db: str) -> str:
    """What a kept plan still asks the database on every call (this tree's generation
    query on a kept connection) against what every call did before (open the database
    read-only, read every best row, close it)."""
    from autotune.store import Store, readers

    def per_call_us(call: Callable[[], object], calls: int) -> float:
        call()
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            call()
            times.append((time.perf_counter() - start) * 1e6)
        return statistics.median(times)

    def open_read_close() -> None:
        store = Store(db, read_only=True)
        store.best()
        store.close()

    check = per_call_us(lambda: readers.generation(db), 2000)
    lookup = per_call_us(open_read_close, 200)
    return (
        f"Database per call, this tree: generation check {check:.1f} µs (median of 2000); "
        f"opening read-only, reading the best rows and closing, as every call did before: "
        f"{lookup:.0f} µs (median of 200)."
    )


if __name__ == "__main__":
    sys.exit(main())
