#!/usr/bin/env python3
"""uint8 filtering beside NVIDIA's NPP, on the same device arrays, in one run.

For each filter width, one and three interleaved channels, 'valid' and 'same' output
(mirror border, cv2's default; NPP's replicate where its mirror is refused, said in
the table), in interleaved rounds:
- ours: the tuned kernel of that kind from the database (tuned here with --trials where
  missing), timed with OpenCL profiling events in the measuring worker;
- NPP: nppiFilter32f_8u_C1R / _C3R ('valid') and nppiFilterBorder32f_8u_C1R / _C3R
  ('same') with float taps, on CuPy arrays, timed with CUDA events; its output is
  checked against `autotune.convolve()` on the same data (largest difference, in levels);
- the roofline max(bytes / bandwidth, flops / peak).

    python bench/npp_compare.py --device 0 [--filter-width 3,5,9,17] [--image-size 4096x4096]
                                [--db URL] [--trials 0] [--rounds 3]

Needs CuPy, gcc, and NPP's headers and libraries (the CUDA toolkit) where it runs: the
NPP calls go through bench/npp/npp_filter.c, built here.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import glob
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import add_roofline_options, roofline_ms

import autotune
from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import image_size, parse_filter_widths
from autotune.lookup import resolve
from autotune.outcomes import TimingPolicy
from autotune.store import Store
from autotune.tune import Budget, Tuner

SHIM = Path(__file__).parent / "npp" / "npp_filter.c"


def load_npp() -> Any:
    """The shim, built against the newest CUDA toolkit's NPP headers and libraries."""
    roots = sorted(glob.glob("/usr/local/cuda*/targets/x86_64-linux"))
    if not roots:
        raise SystemExit("no CUDA toolkit under /usr/local: NPP's headers and libraries are needed")
    root = roots[-1]
    library = Path(tempfile.mkdtemp()) / "libnpp_filter.so"
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", f"-I{root}/include", "-o", str(library), str(SHIM),
         f"-L{root}/lib", "-lnppif", "-lnppc", "-lcudart", f"-Wl,-rpath,{root}/lib"],
        check=True,
    )  # fmt: skip
    shim = ctypes.CDLL(str(library))
    shim.npp_filter_8u.restype = ctypes.c_int
    shim.npp_filter_8u.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    shim.npp_filter_8u.argtypes += [ctypes.c_int] * 3 + [ctypes.c_void_p] + [ctypes.c_int] * 6
    return shim


def npp_run(shim: Any, problem: Conv2DProblem, border_code: int) -> tuple[Any, Any]:
    """A call of NPP on the problem's data (device arrays made once), and its output array."""
    import cupy

    image, filt = problem.data()
    source = cupy.asarray(image)
    out = cupy.empty(problem.output_shape, dtype=cupy.uint8)
    taps = cupy.asarray(np.ascontiguousarray(filt[::-1, ::-1]))  # NPP takes its taps in reverse order
    channels = problem.channels
    rows, width = problem.filter_shape
    anchor_x, anchor_y = problem.anchor_column, problem.anchor_row
    if not problem.same:  # a 'valid' filter's anchor, mirrored as the reversed taps are
        anchor_x, anchor_y = width - 1 - width // 2, rows - 1 - rows // 2
    else:
        anchor_x, anchor_y = width - 1 - anchor_x, rows - 1 - anchor_y
    arguments = (
        source.data.ptr, problem.in_width * channels, problem.in_width, problem.in_height,
        out.data.ptr, problem.out_width * channels, problem.out_width, problem.out_height,
        taps.data.ptr, width, rows, anchor_x, anchor_y, channels, border_code if problem.same else -1,
    )  # fmt: skip

    def call() -> int:
        return shim.npp_filter_8u(*arguments)

    return call, out


def cuda_ms(call: Any, repeats: int = 20) -> float:
    import cupy

    call()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(repeats):
        call()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / repeats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="3,5,9,17")
    parser.add_argument("--image-size", default="4096x4096")
    parser.add_argument("--db", default=None)
    parser.add_argument("--trials", type=int, default=0, help="tune kinds missing from the database")
    parser.add_argument("--rounds", type=int, default=3)
    add_roofline_options(parser)
    args = parser.parse_args()
    device = device_info(args.device)
    widths = parse_filter_widths(args.filter_width)
    size = image_size(args.image_size, device)
    store = Store(args.db)
    shim = load_npp()
    borders = {"mirror": shim.npp_border(0), "replicate": shim.npp_border(1)}
    kinds = [(c, border) for c in (1, 3) for border in ("none", "mirror")]

    def problem_of(width: int, channels: int, border: str) -> Conv2DProblem:
        return Conv2DProblem(width, *size, "uint8", out_dtype="uint8", border=border, channels=channels)

    def tuned(problem: Conv2DProblem) -> dict | None:
        choice = resolve(store.best(), CONV2D, problem, device)
        return choice.config if choice.level == "exact" else None

    missing = [problem_of(w, c, b) for c, b in kinds for w in widths if tuned(problem_of(w, c, b)) is None]
    for channels, border in kinds:
        problems = [p for p in missing if (p.channels, p.border) == (channels, border)]
        if problems and args.trials > 0:
            Tuner(store, args.device, device, CONV2D, problems, budget=Budget(trials=args.trials)).run()
            print(f"tuned {channels}ch {border}", file=sys.stderr, flush=True)
    policy = TimingPolicy(min_runs=10, min_time_s=0.2, max_runs=500, max_time_s=3.0)
    lines = [
        f"uint8 -> uint8 beside NPP, {datetime.date.today()}, {device.name} ({device.platform}, driver "
        f"{device.driver_version}), {size[0]}x{size[1]}, median of {args.rounds} interleaved rounds.\n",
        "| F | channels | output | ours ms | NPP ms | NPP / ours | ours % of roofline | NPP % of roofline "
        "| NPP's largest difference from ours |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    configs = []
    with Evaluator(args.device, CONV2D, policy=policy) as evaluator:
        for width in widths:
            for channels, border in kinds:
                problem = problem_of(width, channels, border)
                config = tuned(problem)
                if config is None:
                    print(f"F={width} {channels}ch {border}: not tuned; skipped", file=sys.stderr)
                    continue
                npp_border = "mirror"
                call, out = npp_run(shim, problem, borders["mirror"])
                if problem.same and call() != 0:  # NPP's mirror refused: its replicate, and ours too
                    npp_border = "replicate"
                    call, out = npp_run(shim, problem, borders["replicate"])
                status = call()
                if status != 0:
                    print(f"F={width} {channels}ch {border}: NPP status {status}; skipped", file=sys.stderr)
                    continue
                image, filt = problem.data()
                mode = "same" if problem.same else "valid"
                ours_out = autotune.convolve(
                    image,
                    filt,
                    mode=mode,
                    border=npp_border,
                    out_dtype="same",
                    db=args.db,
                    device=args.device,
                )
                difference = int(np.abs(out.get().astype(int) - ours_out.astype(int)).max())
                ours_ms, npp_ms = [], []
                for _ in range(args.rounds):
                    measured = evaluator.evaluate(config, problem)
                    ours_ms.append(measured.time_ms if measured.ok else float("nan"))
                    npp_ms.append(cuda_ms(call))
                ours, npp = statistics.median(ours_ms), statistics.median(npp_ms)
                roofline = roofline_ms(problem, args)
                output = "valid" if border == "none" else f"same ({npp_border})"
                lines.append(
                    f"| {width} | {channels} | {output} | {ours:.4f} | {npp:.4f} | {npp / ours:.2f}x "
                    f"| {roofline / ours * 100:.0f}% | {roofline / npp * 100:.0f}% | {difference} |"
                )
                configs.append(
                    f"- F={width} {channels}ch {border}: `{json.dumps(config, separators=(',', ':'))}`"
                )
                print(lines[-1], file=sys.stderr, flush=True)
    print("\n".join(lines + ["", "Our configs:", *configs]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
