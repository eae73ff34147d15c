#!/usr/bin/env python3
"""What a call costs: `autotune.convolve()`, a `Convolver` on NumPy arrays, and a
`Convolver` on device arrays (100 chained calls), beside the kernel's own time (profiling
events, in the measuring worker) and the NumPy round trips of CuPy and torch, in one run.

    python bench/convolver_calls.py --device 0 [--filter-width 3,9,17] [--image-size 4096x4096] [--db URL]

With `--case WxH:F` (repeatable): NumPy round trips only, the CPU's view. A Convolver
called with an image whose data starts 128-byte aligned (what a CPU device uses in
place) and 16 bytes past that (all NumPy promises: one copy in), `convolve()`, and
`cv2.filter2D` with `--cv2-threads` threads on the same image, with `--baseline DIR`
(another commit's files) the Convolver of that tree too, each tree in a process of its
own, taking turns round by round; kernel: profiling events in the measuring worker.

    python bench/convolver_calls.py --case 256x256:3 --case 2048x2048:5 --baseline /tmp/before
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
from typing import Any

import numpy as np
from bench_common import interleaved_medians

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
    calls = {
        "Convolver": lambda: convolver(image),
        "convolve()": lambda: autotune.convolve(image, filt, device=args.device, db=args.db),
        **round_trips(image, filt),
    }
    for call in calls.values():  # warm-up: compiles, plans, CUDA's first use
        call()
    # Rounds taking turns, so a load on the host that comes and goes falls on every way alike.
    others = interleaved_medians(calls, args.rounds, args.repeats)
    return [
        str(width),
        f"{kernel.time_ms:.4f}" if kernel.ok else kernel.status.value,
        f"{per_chained:.4f}",
        f"{others['Convolver']:.2f}",
        f"{others['convolve()']:.2f}",
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
    parser.add_argument("--case", action="append", default=[], help="WxH:F, NumPy round trips only")
    parser.add_argument("--baseline", default=None, help="another tree's Convolver beside this one's")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cv2-threads", type=int, default=2)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.case:
        return host_round_trips(args)
    device = device_info(args.device)
    size = parse_image_size(args.image_size)
    policy = TimingPolicy(min_runs=10, min_time_s=0.2, max_runs=500, max_time_s=3.0)
    print(
        f"Call costs, {datetime.date.today()}, {device.name} ({device.platform}), {size[0]}x{size[1]} "
        f"output, float32; wall ms after one warm-up: NumPy calls the median of {args.repeats} per round, "
        f"median of {args.rounds} rounds taking turns.\n"
    )
    header = ["F", "kernel ms", "device arrays, per chained call", "Convolver, NumPy", "convolve()"]
    header += ["CuPy round trip", "torch round trip", "level"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    with Evaluator(args.device, CONV2D, policy=policy) as evaluator:
        for width in parse_filter_widths(args.filter_width):
            print("| " + " | ".join(timings(width, size, args, evaluator)) + " |", flush=True)
    return 0


def placed(image: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `image` whose data starts `offset` bytes past a 128-byte boundary."""
    raw = np.empty(image.nbytes + 256, np.uint8)
    start = -raw.ctypes.data % 128 + offset
    copy = raw[start : start + image.nbytes].view(image.dtype).reshape(image.shape)
    copy[...] = image
    return copy


def worker(args: argparse.Namespace) -> int:
    """Answer JSON requests {"call", "size", "width", "offset"} with the median wall ms
    of that call, in whatever tree PYTHONPATH points at (the baseline's Convolver too)."""
    convolvers: dict[tuple[int, ...], Any] = {}
    for line in sys.stdin:
        request = json.loads(line)
        width = request["width"]
        image, filt = Conv2DProblem(width, *request["size"]).data()
        image = placed(image, request["offset"])
        key = (*request["size"], width)
        if key not in convolvers:
            convolvers[key] = autotune.Convolver(
                image.shape, filt, device=args.device, db=args.db, algorithm="direct"
            )
        convolver = convolvers[key]
        call = one_call(request["call"], image, filt, convolver, args)
        copies = getattr(convolver, "host_copies", None)
        median, made = timed_ms(call, args.repeats)
        answer = {"ms": median, "config": convolver.plan.config, "level": convolver.plan.level}
        if copies is not None and request["call"] == "Convolver":
            answer["copies_per_call"] = (convolver.host_copies - copies) / made
        print(json.dumps(answer), flush=True)
    return 0


def one_call(
    kind: str, image: np.ndarray, filt: np.ndarray, convolver: Any, args: argparse.Namespace
) -> Callable[[], object]:
    if kind == "cv2":
        import cv2

        cv2.setNumThreads(args.cv2_threads)
        return lambda: cv2.filter2D(image, -1, filt)
    if kind == "convolve()":
        return lambda: autotune.convolve(image, filt, device=args.device, db=args.db, algorithm="direct")
    return lambda: convolver(image)


def timed_ms(call: Callable[[], object], least: int) -> tuple[float, int]:
    """Median wall ms of `call` after one warm-up (at least `least` calls and 0.3 s), and
    how many calls were made."""
    call()
    times: list[float] = []
    while len(times) < least or (sum(times) < 300 and len(times) < 500):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), len(times) + 1


def host_round_trips(args: argparse.Namespace) -> int:
    from bench_common import TreeWorkers

    here = Path(__file__).resolve().parent.parent
    trees = {"this tree": here} | ({"baseline": Path(args.baseline).resolve()} if args.baseline else {})
    options = ["--db", args.db, "--device", str(args.device), "--repeats", str(args.repeats)]
    workers = TreeWorkers(__file__, trees, [*options, "--cv2-threads", str(args.cv2_threads)])
    device = device_info(args.device)
    calls = [("this tree", "Convolver", 0), ("this tree", "Convolver", 16), ("this tree", "convolve()", 16)]
    calls += [("this tree", "cv2", 16)]
    if args.baseline:
        calls = [("baseline", "Convolver", 16), *calls]
    names = {
        ("baseline", "Convolver", 16): f"Convolver before ({workers.revisions.get('baseline')})",
        ("this tree", "Convolver", 0): "Convolver, aligned image",
        ("this tree", "Convolver", 16): "Convolver, 16-byte aligned image",
        ("this tree", "convolve()", 16): "convolve(), 16-byte aligned image",
        ("this tree", "cv2", 16): f"cv2.filter2D, {args.cv2_threads} threads",
    }
    print(
        f"NumPy round trips, {datetime.date.today()}, {device.name} ({device.platform}), float32, "
        f"'valid' output, --db {args.db}; wall ms, median of >= {args.repeats} calls (and >= 0.3 s) "
        f"after a warm-up, median of {args.rounds} rounds taking turns; this tree is "
        f"{workers.revisions['this tree']}.\n"
    )
    header = ["output", "F", "kernel ms", *(names[c] for c in calls), "copies per call (16-byte, aligned)"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    policy = TimingPolicy(min_runs=10, min_time_s=0.2, max_runs=500, max_time_s=3.0)
    with Evaluator(args.device, CONV2D, policy=policy) as evaluator:
        for case in args.case:
            size_text, width_text = case.split(":")
            size, width = parse_image_size(size_text), int(width_text)
            times: dict[tuple[str, str, int], list[float]] = {c: [] for c in calls}
            answers: dict[tuple[str, str, int], dict] = {}
            for _ in range(args.rounds):
                for tree, call, offset in calls:
                    request = {"call": call, "size": list(size), "width": width, "offset": offset}
                    answers[tree, call, offset] = workers.ask(tree, request)
                    times[tree, call, offset].append(answers[tree, call, offset]["ms"])
            config = answers["this tree", "Convolver", 0]["config"]
            kernel = evaluator.evaluate(config, Conv2DProblem(width, *size))
            copies = [answers["this tree", "Convolver", o].get("copies_per_call") for o in (16, 0)]
            cells = [
                f"{size[0]}x{size[1]}",
                str(width),
                f"{kernel.time_ms:.3f}" if kernel.ok else kernel.status.value,
            ]
            cells += [f"{statistics.median(times[c]):.3f}" for c in calls]
            cells.append(", ".join(f"{c:g}" for c in copies if c is not None))
            print("| " + " | ".join(cells) + " |", flush=True)
    workers.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
