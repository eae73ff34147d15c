#!/usr/bin/env python3
"""Real-image kernels on a GPU: uint8 pixels and 'same' output with a border, side by side.

For each filter width, in interleaved rounds (OpenCL profiling events in the measuring
worker, CUDA events for the peers):
- float32 'valid' and float32 'same' (mirror border, cv2's default) with one config:
  what handling the border inside the kernel costs;
- uint8 -> uint8 'valid' and 'same' (mirror): the tuned kernel of that kind (from the
  database, or tuned here with --trials), and the float32 'valid' best config on uint8;
- a copy of the same bytes (the honest bound for small filters) and the roofline
  max(bytes / bandwidth, flops / peak);
- torch (uint8 on the device -> float -> conv2d, cuDNN -> round, clamp -> uint8; with
  F.pad(mode="reflect") for the mirror border) and CuPy's ndimage.correlate on the
  uint8 array (mirror), where installed.

    python bench/pixels_gpu.py --device 0 [--filter-width 3,5,9,17] [--image-size 4096x4096]
                               [--db URL] [--trials 0] [--rounds 3] [--float-configs @FILE]

--float-configs: the float32 'valid' best config per width (a search's --json output,
or a list of configs with filter_width) where the database has none.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import add_roofline_options, roofline_ms
from copy_ceiling import ceiling_ms, copy_timer
from gpu_compare import cuda_timer

from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import image_size, parse_filter_widths
from autotune.lookup import resolve
from autotune.outcomes import TimingPolicy
from autotune.store import Store
from autotune.tune import Budget, Tuner

KINDS = {
    "f32 valid": {},
    "f32 same": {"border": "mirror"},
    "u8 valid": {"dtype": "uint8", "out_dtype": "uint8"},
    "u8 same": {"dtype": "uint8", "out_dtype": "uint8", "border": "mirror"},
}


def float_configs(text: str | None) -> dict[int, dict]:
    if not text:
        return {}
    data = json.loads(Path(text[1:]).read_text() if text.startswith("@") else text)
    results = data.get("data", data).get("results", []) if isinstance(data, dict) else data
    return {r["filter_width"]: r["config"] for r in results if r.get("problem", "").count(" ") == 0}


def peers(problem: Conv2DProblem) -> dict[str, Callable[[], float]]:
    """Timers for uint8 -> uint8 filtering in the libraries that are installed."""
    image, filt = problem.data()
    width = problem.filter_width
    before, after = width // 2, width - 1 - width // 2
    found: dict[str, Callable[[], float]] = {}
    try:
        import torch
        import torch.nn.functional as functional

        if torch.cuda.is_available():
            torch.backends.cudnn.benchmark = True
            torch.backends.cudnn.allow_tf32 = False
            x = torch.from_numpy(np.array(image)).cuda()[None, None]
            w = torch.from_numpy(np.array(filt)).cuda()[None, None]
            timer = cuda_timer(torch.cuda.synchronize, lambda: torch.cuda.Event(enable_timing=True))

            def torch_run() -> Any:
                source = x.float()
                if problem.same:
                    source = functional.pad(source, (before, after, before, after), mode="reflect")
                return functional.conv2d(source, w).round_().clamp_(0, 255).to(torch.uint8)

            found["torch"] = lambda timer=timer: timer(torch_run)
    except Exception:  # noqa: BLE001 - not installed or no CUDA: skipped
        pass
    try:
        import cupy
        from cupyx.scipy import ndimage

        gpu_image, gpu_filter = cupy.asarray(image), cupy.asarray(filt)
        timer = cuda_timer(cupy.cuda.Device().synchronize, cupy.cuda.Event, cupy.cuda.get_elapsed_time)
        if problem.same:
            found["CuPy"] = lambda timer=timer: timer(
                lambda: ndimage.correlate(gpu_image, gpu_filter, mode="mirror")
            )
    except Exception:  # noqa: BLE001
        pass
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="3,5,9,17")
    parser.add_argument("--image-size", default=None)
    parser.add_argument("--db", default=None, help="database URL [default: autotune's default]")
    parser.add_argument("--trials", type=int, default=0, help="tune uint8 kinds missing from the database")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--float-configs", default=None)
    add_roofline_options(parser)
    args = parser.parse_args()

    device = device_info(args.device)
    widths = parse_filter_widths(args.filter_width)
    size = image_size(args.image_size, device)
    store = Store(args.db)
    given = float_configs(args.float_configs)

    def tuned(problem: Conv2DProblem) -> dict | None:
        choice = resolve(store.best(), CONV2D, problem, device)
        return choice.config if choice.level == "exact" else None

    missing = [
        Conv2DProblem(w, *size, **KINDS[kind])
        for kind in ("u8 valid", "u8 same")
        for w in widths
        if tuned(Conv2DProblem(w, *size, **KINDS[kind])) is None
    ]
    if missing and args.trials > 0:
        for kind in ("u8 valid", "u8 same"):
            problems = [p for p in missing if p.same == (kind == "u8 same")]
            Tuner(store, args.device, device, CONV2D, problems, budget=Budget(trials=args.trials)).run()
            print(f"tuned {kind}", file=sys.stderr, flush=True)
    policy = TimingPolicy(min_runs=10, min_time_s=0.2, max_runs=500, max_time_s=3.0)
    copy = copy_timer(args.device, repeats=20)
    print(
        f"Real-image kernels, {datetime.date.today()}, {device.name} ({device.platform}, driver "
        f"{device.driver_version}), {size[0]}x{size[1]}, median of {args.rounds} interleaved rounds; "
        "'same' = mirror border (cv2's default) inside the kernel.\n"
    )
    with Evaluator(args.device, CONV2D, policy=policy) as evaluator:
        for width in widths:
            float_config = tuned(Conv2DProblem(width, *size)) or given.get(width)
            if float_config is None:
                print(f"F={width}: no float32 'valid' config; skipped", file=sys.stderr)
                continue
            runs: dict[str, tuple[Conv2DProblem, dict]] = {}
            for kind, fields in KINDS.items():
                problem = Conv2DProblem(width, *size, **fields)
                runs[f"{kind} (f32 config)"] = (problem, float_config)
                config = tuned(problem) if kind.startswith("u8") else None
                if config is not None:
                    runs[f"{kind} (tuned)"] = (problem, config)
            timers = {}
            for kind in ("u8 valid", "u8 same"):
                for peer, timer in peers(Conv2DProblem(width, *size, **KINDS[kind])).items():
                    timers[f"{kind} {peer}"] = timer
            times: dict[str, list[float]] = {}
            for _ in range(args.rounds):
                for name, (problem, config) in runs.items():
                    m = evaluator.evaluate(config, problem)
                    if not m.ok:
                        print(f"F={width} {name}: {m.status.value} {m.error}", file=sys.stderr)
                    times.setdefault(name, []).append(m.time_ms if m.ok else float("nan"))
                for name, timer in timers.items():
                    times.setdefault(name, []).append(timer())
                for label, itemsize in (("f32", 4), ("u8", 1)):
                    pixels = size[0] * size[1] * itemsize // 4  # the bytes, as floats
                    copied = copy(pixels, pixels)
                    times.setdefault(f"copy {label}", []).append(ceiling_ms(copied, pixels, pixels))
            medians = {name: statistics.median(v) for name, v in times.items()}
            rooflines = {
                kind: roofline_ms(p, args)
                for kind, p in ((k, Conv2DProblem(width, *size, **f)) for k, f in KINDS.items())
            }
            print_width(width, medians, rooflines, {n: c for n, (_, c) in runs.items()})
            print(f"F={width} done", file=sys.stderr, flush=True)

        print()
    return 0


def print_width(width: int, medians: dict[str, float], rooflines: dict[str, float], configs: dict) -> None:
    """One width's table, printed as soon as it is measured (a run cut short keeps it)."""
    print(f"F={width}:\n")
    print("| kernel | ms | % of roofline | % of copy of its bytes |")
    print("|---|---|---|---|")
    for name in sorted(medians):
        if name.startswith("copy"):
            continue
        kind = " ".join(name.split()[:2])
        ms = medians[name]
        copy_ms = medians["copy u8" if kind.startswith("u8") else "copy f32"]
        print(f"| {name} | {ms:.4f} | {rooflines[kind] / ms * 100:.0f}% | {copy_ms / ms * 100:.0f}% |")
    print(f"| copy f32 (in + out) | {medians['copy f32']:.4f} | | |")
    print(f"| copy u8 (in + out) | {medians['copy u8']:.4f} | | |")
    same = medians["f32 same (f32 config)"] / medians["f32 valid (f32 config)"]
    print(f"\n'same' (mirror) / 'valid', float32, one config: {same:.3f}")
    for kind in ("u8 valid", "u8 same"):
        best = min((medians[n], n) for n in medians if n.startswith(kind + " ("))
        for peer in ("torch", "CuPy"):
            if f"{kind} {peer}" in medians:
                print(f"{kind}: {peer} / ours ({best[1]}) = {medians[f'{kind} {peer}'] / best[0]:.2f}x")
    print("\nConfigs:")
    for name, config in configs.items():
        print(f"- {name}: `{json.dumps(config, separators=(',', ':'))}`")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
