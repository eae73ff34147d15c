#!/usr/bin/env python3
"""What a call costs: `autotune.convolve()`, a `Convolver` on NumPy arrays, and a
`Convolver` on device arrays (100 chained calls), beside the kernel's own time (profiling
events, in the measuring worker) and the NumPy round trips of CuPy and torch, in one run.

    python bench/convolver_calls.py --device 0 [--filter-width 3,9,17] [--image-size 4096x4096] [--db URL]
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import autotune
from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import parse_filter_widths, parse_image_size
from autotune.outcomes import TimingPolicy


def wall_ms(call: Callable[[], object], repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def round_trips(image: np.ndarray, filt: np.ndarray) -> dict[str, Callable[[], object]]:
    """NumPy in, NumPy out through the libraries that are installed."""
    calls: dict[str, Callable[[], object]] = {}
    try:
        import cupy
        from cupyx.scipy import ndimage

        gpu_filter = cupy.asarray(filt)
        calls["CuPy round trip"] = lambda: cupy.asnumpy(ndimage.correlate(cupy.asarray(image), gpu_filter))
    except Exception:  # noqa: BLE001 - not installed or no CUDA
        pass
    try:
        import torch

        if torch.cuda.is_available():
            weights = torch.from_numpy(filt).cuda()[None, None]
            calls["torch round trip"] = lambda: (
                torch.nn.functional.conv2d(torch.from_numpy(image).cuda()[None, None], weights).cpu().numpy()
            )
    except Exception:  # noqa: BLE001
        pass
    return calls


def timings(width: int, size: tuple[int, int], args: argparse.Namespace, evaluator: Evaluator) -> list[str]:
    """One table row: every way of running one width."""
    import pyopencl.array as cl_array

    problem = Conv2DProblem(width, *size)
    image, filt = problem.data()
    convolver = autotune.Convolver(image.shape, filt, device=args.device, db=args.db, algorithm="direct")
    kernel = evaluator.evaluate(convolver.plan.config, problem)
    on_device = cl_array.to_device(convolver.queue, image)
    out = convolver(on_device)

    def chained(chain: int = 100) -> None:
        for _ in range(chain):
            convolver(on_device, out=out, wait=False)
        convolver.queue.finish()

    per_chained = wall_ms(chained, 5) / 100
    host = wall_ms(lambda: convolver(image), args.repeats)
    plain = wall_ms(lambda: autotune.convolve(image, filt, device=args.device, db=args.db), args.repeats)
    others = {name: wall_ms(call, args.repeats) for name, call in round_trips(image, filt).items()}
    return [
        str(width),
        f"{kernel.time_ms:.4f}" if kernel.ok else kernel.status.value,
        f"{per_chained:.4f}",
        f"{host:.2f}",
        f"{plain:.2f}",
        *(f"{others[n]:.2f}" if n in others else "-" for n in ("CuPy round trip", "torch round trip")),
        convolver.plan.level,
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="3,9,17")
    parser.add_argument("--image-size", default="4096x4096", help="output WxH")
    parser.add_argument("--db", default="sqlite:///:memory:", help="[default: none: the fallback kernel]")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    device = device_info(args.device)
    size = parse_image_size(args.image_size)
    policy = TimingPolicy(min_runs=10, min_time_s=0.2, max_runs=500, max_time_s=3.0)
    print(
        f"Call costs, {datetime.date.today()}, {device.name} ({device.platform}), {size[0]}x{size[1]} "
        f"output, float32; wall ms, median of {args.repeats} calls after one warm-up.\n"
    )
    header = ["F", "kernel ms", "device arrays, per chained call", "Convolver, NumPy", "convolve()"]
    header += ["CuPy round trip", "torch round trip", "level"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    with Evaluator(args.device, CONV2D, policy=policy) as evaluator:
        for width in parse_filter_widths(args.filter_width):
            print("| " + " | ".join(timings(width, size, args, evaluator)) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
