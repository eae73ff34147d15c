#!/usr/bin/env python3
"""Separable kernels beside the direct kernel for the same filter, CuPy and cuDNN, side by
side in one run.

For each filter width and rank the best separable kernel comes from the database (tuned
with `autotune search --family separable` beforehand, or here with --trials N when
missing); the direct kernel for the same F is the database's best too, or one given per
width with --direct-configs FILE ({"F": config}). Then, in interleaved rounds: both
kernels (OpenCL profiling events, in the measuring worker), CuPy's
`ndimage.correlate1d` along rows then columns for each term (the two-pass form a CuPy
user writes), and `torch.nn.functional.conv2d` on the full filter (cuDNN), each where
installed; on a CPU device, OpenCV's `sepFilter2D` per term instead (host clock, as
many threads as the device has compute units; it filters the whole input, slightly more
outputs than the 'valid' ones). `--pixels JSON` ({"dtype": "uint8", "out_dtype": "uint8",
"border": "mirror"}) compares that kind of problem instead of float32 'valid' (cv2 with
the same border and output type; no direct kernel beside it).

    python bench/separable_compare.py --device 0 [--filter-width 3,5,9,17,33] [--rank 1]
        [--db URL] [--image-size 4096x4096] [--trials 0] [--direct-configs FILE] [--rounds 3]
        [--pixels JSON]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from bench_common import tuned_configs
from gpu_compare import cuda_timer

from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import image_size, parse_filter_widths
from autotune.families.separable import SEPARABLE, SeparableProblem
from autotune.families.separable.problem import full_filter
from autotune.outcomes import TimingPolicy
from autotune.store import Store
from autotune.tune import Budget, Tuner

PIXEL_DEFAULTS = {"dtype": "float32", "out_dtype": "float32", "border": "none"}


def separable_configs(
    store: Store, device: object, size: tuple[int, int], pixels: dict[str, str]
) -> dict[tuple[int, int], dict]:
    """(F, rank) -> best separable config of this output size and kind of pixels on this
    device model."""
    found = {}
    wanted = PIXEL_DEFAULTS | pixels
    for best, stored_on, problem in store.best(family=SEPARABLE.name):
        fields = problem.fields
        if (fields["out_width"], fields["out_height"]) != tuple(size):
            continue
        if any(fields.get(name, default) != wanted[name] for name, default in PIXEL_DEFAULTS.items()):
            continue
        if fields.get("anchor", -1) != -1:
            continue
        if (stored_on.platform, stored_on.name) != (device.platform, device.name):  # type: ignore[attr-defined]
            continue
        config = SEPARABLE.read_config(best.config)
        if config is not None:
            found[(fields["filter_width"], fields["rank"])] = config
    return found


def host_timer(run: Callable[[], object], repeats: int = 10) -> float:
    """Median wall ms of a host call."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def peers(problem: SeparableProblem, device: object) -> dict[str, Callable[[], float]]:
    """Timers for the libraries that are installed; each returns median ms. On a CPU
    device: OpenCV's sepFilter2D per term, limited to as many threads as the device has
    compute units; on a GPU: CuPy and cuDNN."""
    image, row_taps, column_taps = problem.data()
    found: dict[str, Callable[[], float]] = {}
    if getattr(device, "type", "") == "CPU":
        try:
            import cv2

            from autotune.families.image import CV2_BORDERS

            cv2.setNumThreads(device.compute_units)  # type: ignore[attr-defined]
            border = {name: code for code, name in CV2_BORDERS.items()}.get(problem.border, 0)
            depth = -1 if problem.out_dtype == problem.dtype else cv2.CV_32F

            def sep_filter() -> None:
                for row, column in zip(row_taps, column_taps, strict=True):
                    cv2.sepFilter2D(image, depth, row, column, borderType=border)

            found["cv2.sepFilter2D"] = lambda: host_timer(sep_filter)
        except ImportError:
            pass
        return found
    try:
        import cupy
        from cupyx.scipy import ndimage

        gpu_image = cupy.asarray(image)
        rows = [cupy.asarray(r) for r in row_taps]
        columns = [cupy.asarray(c) for c in column_taps]
        timer = cuda_timer(cupy.cuda.Device().synchronize, cupy.cuda.Event, cupy.cuda.get_elapsed_time)

        def two_pass() -> None:
            total = None
            for row, column in zip(rows, columns, strict=True):
                term = ndimage.correlate1d(gpu_image, row, axis=1, mode="constant")
                term = ndimage.correlate1d(term, column, axis=0, mode="constant")
                total = term if total is None else total + term

        found["CuPy correlate1d x2"] = lambda timer=timer: timer(two_pass)
    except Exception:  # noqa: BLE001 - not installed or no CUDA: skipped
        pass
    try:
        import torch

        if torch.cuda.is_available():
            torch.backends.cudnn.benchmark = True
            torch.backends.cudnn.allow_tf32 = False
            x = torch.from_numpy(np.array(image)).cuda()[None, None]
            w = torch.from_numpy(full_filter(row_taps, column_taps).astype("float32")).cuda()[None, None]
            timer = cuda_timer(torch.cuda.synchronize, lambda: torch.cuda.Event(enable_timing=True))
            found["cuDNN conv2d (full filter)"] = lambda timer=timer: timer(
                lambda: torch.nn.functional.conv2d(x, w)
            )
    except Exception:  # noqa: BLE001
        pass
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="3,5,9,17,33")
    parser.add_argument("--rank", default="1", help="comma list of ranks")
    parser.add_argument("--image-size", default=None)
    parser.add_argument("--db", default=None, help="database URL [default: autotune's default]")
    parser.add_argument("--trials", type=int, default=0, help="tune separable problems missing from the db")
    parser.add_argument("--direct-configs", default=None, help='JSON file {"F": config}: direct kernels')
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--pixels", default="{}", help='JSON: dtype, out_dtype, border (default float32 "valid")'
    )
    args = parser.parse_args()
    pixels = {k: v for k, v in json.loads(args.pixels).items() if PIXEL_DEFAULTS.get(k) != v}
    if set(pixels) - set(PIXEL_DEFAULTS):
        parser.error(f"--pixels takes {', '.join(PIXEL_DEFAULTS)}")

    def problem_of(width: int, rank: int) -> SeparableProblem:
        return SeparableProblem(width, rank, *size, **pixels)

    device = device_info(args.device)
    widths = parse_filter_widths(args.filter_width)
    ranks = [int(r) for r in args.rank.split(",")]
    size = image_size(args.image_size, device)
    store = Store(args.db)
    tuned = separable_configs(store, device, size, pixels)
    missing = [problem_of(w, r) for w in widths for r in ranks if (w, r) not in tuned]
    if missing and args.trials > 0:
        tuner = Tuner(store, args.device, device, SEPARABLE, missing, budget=Budget(trials=args.trials))
        for result in tuner.run():
            if result.best_config is not None:
                key = result.problem.key()
                tuned[(key["filter_width"], key["rank"])] = result.best_config
    direct = {w: c for w, (c, _) in tuned_configs(store, device, size).items()} if not pixels else {}
    if args.direct_configs and not pixels:
        direct |= {int(w): c for w, c in json.loads(Path(args.direct_configs).read_text()).items()}
    policy = TimingPolicy(min_runs=10, min_time_s=0.2, max_runs=500, max_time_s=3.0)
    rows = []
    with (
        Evaluator(args.device, SEPARABLE, policy=policy) as ours,
        Evaluator(args.device, CONV2D, policy=policy) as direct_evaluator,
    ):
        for width in widths:
            for rank in ranks:
                if (width, rank) not in tuned:
                    print(f"F={width},rank={rank}: not tuned here; skipped", file=sys.stderr)
                    continue
                problem = problem_of(width, rank)
                timers = peers(problem, device)
                times: dict[str, list[float]] = {}
                for _ in range(args.rounds):
                    m = ours.evaluate(tuned[(width, rank)], problem)
                    times.setdefault("separable", []).append(m.time_ms if m.ok else float("nan"))
                    if width in direct:
                        m = direct_evaluator.evaluate(direct[width], Conv2DProblem(width, *size))
                        times.setdefault("direct", []).append(m.time_ms if m.ok else float("nan"))
                    for name, timer in timers.items():
                        times.setdefault(name, []).append(timer())
                medians = {name: statistics.median(v) for name, v in times.items()}
                rows.append((width, rank, medians, tuned[(width, rank)]))
                print(f"F={width},rank={rank} done", file=sys.stderr, flush=True)

    print(
        f"Separable comparison, {datetime.date.today()}, {device.name} ({device.platform}, driver "
        f"{device.driver_version}), {size[0]}x{size[1]} output, "
        f"{json.dumps(pixels) if pixels else 'float32'}, median of {args.rounds} "
        "interleaved rounds.\n"
    )
    peer_names = sorted({n for *_, m, _ in rows for n in m if n not in ("separable", "direct")})
    header = ["F", "rank", "separable ms", "GB/s", "direct ms", *[f"{n} ms" for n in peer_names]]
    header += ["vs direct", *[f"vs {n}" for n in peer_names]]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for width, rank, medians, _ in rows:
        ours_ms = medians["separable"]
        gbs = problem_of(width, rank).gbs(ours_ms)
        cells = [str(width), str(rank), f"{ours_ms:.4f}", f"{gbs:.0f}" if gbs else "-"]
        cells.append(f"{medians['direct']:.4f}" if "direct" in medians else "-")
        cells += [f"{medians[n]:.4f}" if n in medians else "-" for n in peer_names]
        cells.append(f"{medians['direct'] / ours_ms:.2f}x" if "direct" in medians else "-")
        cells += [f"{medians[n] / ours_ms:.2f}x" if n in medians else "-" for n in peer_names]
        print("| " + " | ".join(cells) + " |")
    print("\nSeparable configs:")
    for width, rank, _, config in rows:
        print(f"- F={width}, rank {rank}: `{json.dumps(config, separators=(',', ':'))}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
