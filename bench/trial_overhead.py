#!/usr/bin/env python3
"""Where one search trial's time goes on the measuring side, phase by phase.

    python bench/trial_overhead.py --device 0 --filter-width 3,33 [--image-size 4096x4096]
                                   [--configs 8]

A search spends each trial asking the sampler, rendering, measuring in the worker and
recording. This times the worker's part in this process, as `autotune.session.Session`
runs it: first its preparation for a problem it has not measured yet (the seeded data,
the float64 reference and tolerance, the buffers; beside it the reference alone computed
as one FFT on one core), then for the conv2d presets that are valid on the device (up to `--configs`): the
program built from its binary, the output buffer filled, the first run and its read back,
the check against the reference (as the session does it, a block at a time, and as one
NumPy expression over the whole output, as it did before), and the timed runs. Then the
sampler's ask and tell in the family's space after 100 random valid points with random
times. Medians over the configs, in milliseconds (wall clock).
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import time
from collections import defaultdict
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.devices import device_info  # noqa: E402
from autotune.families.conv2d import CONV2D, Conv2DProblem  # noqa: E402
from autotune.families.conv2d.inputs import parse_filter_widths, parse_image_size  # noqa: E402
from autotune.outcomes import TimingPolicy  # noqa: E402
from autotune.session import Session, _time  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sampler_overhead import family_search  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="3,33")
    parser.add_argument("--image-size", default="4096x4096", help="output WxH")
    parser.add_argument("--configs", type=int, default=8)
    args = parser.parse_args()
    width, height = parse_image_size(args.image_size)
    device = device_info(args.device)
    session = Session(args.device)
    cl = session.cl
    print(f"{device.name}, {width}x{height} output, float32, medians in ms\n")
    from autotune.families.conv2d import problem as conv2d_problem

    phases = ["build", "fill", "first run", "read back", "check (blocks)", "check (whole)", "timed runs"]
    columns = ["first visit", "reference, one FFT on one core", "configs", *phases, "ask", "tell"]
    print(f"| F | {' | '.join(columns)} |")
    print("|---|" + "---|" * len(columns))
    for filter_width in parse_filter_widths(args.filter_width):
        problem = Conv2DProblem(filter_width, width, height)
        started = time.perf_counter()
        session._prepare(problem)
        first_visit = (time.perf_counter() - started) * 1e3
        bands, cores = conv2d_problem.FFT_BLOCK_ROWS, conv2d_problem.copy_threads
        conv2d_problem.FFT_BLOCK_ROWS, conv2d_problem.copy_threads = 1 << 30, lambda: 1
        try:
            started = time.perf_counter()
            problem.reference()
            one_fft = (time.perf_counter() - started) * 1e3
        finally:
            conv2d_problem.FFT_BLOCK_ROWS, conv2d_problem.copy_threads = bands, cores
        spent: dict[str, list[float]] = defaultdict(list)
        configs = CONV2D.presets_for(problem, device)[: args.configs]
        for config in configs:
            variant = CONV2D.render(config, problem)
            binary = base64.b64decode(session.compile(variant)["binary"])
            marks = [time.perf_counter()]
            launcher = session._build(CONV2D, variant, binary)
            marks.append(time.perf_counter())
            cl.enqueue_copy(session.queue, session.buffers["output"], session.blank).wait()
            marks.append(time.perf_counter())
            launcher.enqueue(session.queue, problem, session.buffers)[-1].wait()
            marks.append(time.perf_counter())
            result = np.empty_like(session.blank)
            cl.enqueue_copy(session.queue, result, session.buffers["output"]).wait()
            marks.append(time.perf_counter())
            session._verify(result, None)
            marks.append(time.perf_counter())
            out = result[: session.reference.size].reshape(session.reference.shape)
            difference = np.abs(out - session.reference)
            float(difference.max()) if np.all(np.isfinite(difference)) else None
            marks.append(time.perf_counter())
            _time(partial(launcher.enqueue, session.queue, problem, session.buffers), TimingPolicy())
            marks.append(time.perf_counter())
            for name, before, after in zip(phases, marks[:-1], marks[1:], strict=True):
                spent[name].append((after - before) * 1e3)
        ask, tell = sampler_costs(problem, device)
        cells = [f"{statistics.median(spent[name]):.1f}" for name in phases]
        print(
            f"| {filter_width} | {first_visit:.0f} | {one_fft:.0f} | {len(configs)} | {' | '.join(cells)} "
            f"| {ask:.1f} | {tell:.1f} |",
            flush=True,
        )
    return 0


def sampler_costs(
    problem: Conv2DProblem, device: object, history: int = 100, asks: int = 10
) -> tuple[float, float]:
    """Median ms of `gp`'s ask and tell after `history` random valid points."""
    search, rng = family_search(CONV2D, problem, device, history, seed=0)
    asked_ms, told_ms = [], []
    for _ in range(asks):
        start = time.perf_counter()
        asked = search.ask()
        asked_ms.append((time.perf_counter() - start) * 1e3)
        if asked is None:
            break
        start = time.perf_counter()
        search.tell(asked[0], rng.lognormvariate(0.0, 0.5))
        told_ms.append((time.perf_counter() - start) * 1e3)
    return statistics.median(asked_ms), statistics.median(told_ms)


if __name__ == "__main__":
    sys.exit(main())
