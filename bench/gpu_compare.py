#!/usr/bin/env python3
"""Our tuned kernels against the seed presets, CuPy and cuDNN, side by side in one run.

For each filter width the best kernel comes from the database (tuned with
`autotune search` beforehand, or here with --trials N when missing). Then, in
interleaved rounds: our kernel and the best seed preset (OpenCL profiling events, in
the measuring worker), `cupyx.scipy.ndimage.correlate` and `torch.nn.functional.conv2d`
(cuDNN, TF32 off, benchmark mode; CUDA events), each where installed. The roofline is
max(bytes / bandwidth, flops / peak) with the H200 figures measured on the machine; the
copy ceiling is a float4 copy kernel or clEnqueueCopyBuffer moving the same bytes, timed
in the same rounds (`bench/copy_ceiling.py`), the honest bound for small filters.

    python bench/gpu_compare.py --device 0 [--filter-width 3,5,7,9,11,17,33] [--db URL]
                                [--image-size 4096x4096] [--trials 0] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from collections.abc import Callable

import numpy as np
from bench_common import add_roofline_options, roofline_ms, tuned_configs
from copy_ceiling import ceiling_ms, copy_timer

from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import image_size, parse_filter_widths
from autotune.outcomes import TimingPolicy
from autotune.store import Store
from autotune.tune import Budget, Tuner


def cuda_timer(
    synchronize: Callable[[], None],
    event: Callable[[], object],
    elapsed: Callable[[object, object], float] = lambda start, end: start.elapsed_time(end),  # type: ignore[attr-defined]
) -> Callable[[Callable[[], None]], float]:
    """Median ms of a callable over repeated runs, with CUDA events (torch's; for CuPy's
    pass `elapsed=cupy.cuda.get_elapsed_time`, as its events have no elapsed_time)."""

    def measure(run: Callable[[], None], repeats: int = 20) -> float:
        run()
        synchronize()
        times = []
        for _ in range(repeats):
            start, end = event(), event()
            start.record()  # type: ignore[attr-defined]
            run()
            end.record()  # type: ignore[attr-defined]
            end.synchronize()  # type: ignore[attr-defined]
            times.append(elapsed(start, end))
        return statistics.median(times)

    return measure


def peers(image, filt) -> dict[str, Callable[[], float]]:  # noqa: ANN001 - numpy arrays
    """Timers for the libraries that are installed; each returns median ms."""
    found: dict[str, Callable[[], float]] = {}
    try:
        import cupy
        from cupyx.scipy import ndimage

        gpu_image, gpu_filter = cupy.asarray(image), cupy.asarray(filt)
        timer = cuda_timer(cupy.cuda.Device().synchronize, cupy.cuda.Event, cupy.cuda.get_elapsed_time)
        found["CuPy ndimage.correlate"] = lambda timer=timer: timer(
            lambda: ndimage.correlate(gpu_image, gpu_filter, mode="constant")
        )
    except Exception:  # noqa: BLE001 - not installed or no CUDA: skipped
        pass
    try:
        import torch

        if torch.cuda.is_available():
            torch.backends.cudnn.benchmark = True
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
            x = torch.from_numpy(np.array(image)).cuda()[None, None]
            w = torch.from_numpy(np.array(filt)).cuda()[None, None]
            timer = cuda_timer(torch.cuda.synchronize, lambda: torch.cuda.Event(enable_timing=True))
            found["cuDNN conv2d"] = lambda timer=timer: timer(lambda: torch.nn.functional.conv2d(x, w))
    except Exception:  # noqa: BLE001
        pass
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="3,5,7,9,11,17,33")
    parser.add_argument("--image-size", default=None)
    parser.add_argument("--db", default=None, help="database URL [default: autotune's default]")
    parser.add_argument("--trials", type=int, default=0, help="tune widths missing from the database")
    parser.add_argument("--rounds", type=int, default=3)
    add_roofline_options(parser)
    args = parser.parse_args()

    device = device_info(args.device)
    widths = parse_filter_widths(args.filter_width)
    size = image_size(args.image_size, device)
    store = Store(args.db)
    # Same GPU model and platform; a different driver version is accepted (and said).
    tuned = {}
    for width, (config, driver) in tuned_configs(store, device, size).items():
        tuned[width] = config
        if driver != device.driver_version:
            print(f"F={width}: tuned with driver {driver}, running {device.driver_version}", file=sys.stderr)
    missing = [w for w in widths if w not in tuned]
    if missing and args.trials > 0:
        problems = [Conv2DProblem(w, *size) for w in missing]
        for result in Tuner(
            store, args.device, device, CONV2D, problems, budget=Budget(trials=args.trials)
        ).run():
            if result.best_config is not None:
                tuned[result.problem.filter_width] = result.best_config
    policy = TimingPolicy(min_runs=10, min_time_s=0.2, max_runs=500, max_time_s=3.0)
    copy = copy_timer(args.device, repeats=20)
    rows = []
    with Evaluator(args.device, CONV2D, policy=policy) as evaluator:
        presets = CONV2D.space.presets
        for width in widths:
            if width not in tuned:
                print(f"F={width}: not tuned on this device at {size[0]}x{size[1]}; skipped", file=sys.stderr)
                continue
            problem = Conv2DProblem(width, *size)
            image, filt = problem.data()
            timers = peers(image, filt)
            times: dict[str, list[float]] = {}
            for _ in range(args.rounds):
                m = evaluator.evaluate(tuned[width], problem)
                times.setdefault("autotune (tuned)", []).append(m.time_ms if m.ok else float("nan"))
                for name, preset in presets.items():
                    m = evaluator.evaluate(preset.config, problem)
                    times.setdefault(f"seed {name}", []).append(m.time_ms if m.ok else float("inf"))
                for name, timer in timers.items():
                    times.setdefault(name, []).append(timer())
                in_floats = (size[0] + width - 1) * (size[1] + width - 1)
                copied = copy(in_floats, size[0] * size[1])
                times.setdefault("copy ceiling", []).append(ceiling_ms(copied, in_floats, size[0] * size[1]))
            medians = {name: statistics.median(v) for name, v in times.items()}
            seed_name = min((n for n in medians if n.startswith("seed ")), key=medians.get)
            roofline = roofline_ms(problem, args)
            rows.append((width, medians, seed_name, roofline, tuned[width]))
            print(f"F={width} done", file=sys.stderr, flush=True)

    print(
        f"GPU comparison, {datetime.date.today()}, {device.name} ({device.platform}, driver "
        f"{device.driver_version}), {size[0]}x{size[1]} output, float32, median of {args.rounds} "
        "interleaved rounds.\n"
    )
    peer_names = sorted(
        {n for _, m, *_ in rows for n in m if not n.startswith(("seed ", "autotune", "copy"))}
    )
    header = [
        "F",
        "autotune ms",
        "% of roofline",
        "copy ceiling ms",
        "% of copy",
        "best seed ms",
        *[f"{n} ms" for n in peer_names],
        "speed-up vs seed",
        *[f"vs {n}" for n in peer_names],
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for width, medians, seed_name, roofline, _ in rows:
        ours = medians["autotune (tuned)"]
        cells = [
            str(width),
            f"{ours:.4f}",
            f"{roofline / ours * 100:.0f}%",
            f"{medians['copy ceiling']:.4f}",
            f"{medians['copy ceiling'] / ours * 100:.0f}%",
            f"{medians[seed_name]:.4f} ({seed_name[5:]})",
        ]
        cells += [f"{medians[n]:.4f}" if n in medians else "-" for n in peer_names]
        cells += [f"{medians[seed_name] / ours:.2f}x"]
        cells += [f"{medians[n] / ours:.2f}x" if n in medians else "-" for n in peer_names]
        print("| " + " | ".join(cells) + " |")
    print("\nConfigs:")
    for width, _, _, _, config in rows:
        print(f"- F={width}: `{json.dumps(config, separators=(',', ':'))}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
