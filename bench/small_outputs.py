#!/usr/bin/env python3
"""What a kernel's time is made of where the output is small (a 1080p frame on a large GPU):
the tuned kernel beside an empty kernel and a copy of the same bytes, each timed two ways.

    python3 bench/small_outputs.py --device 0 --filter-width 3,9 --image-size 1920x1080,4096x4096 \\
        --pixels '{"dtype": "uint8", "out_dtype": "uint8"}' --db sqlite:///npp1080.db [--npp]

For each size and width: the kernel the database serves for that problem (as `convolve` would
pick it; `--config` names one instead), an empty kernel of the same launch geometry, and a copy
of the problem's input bytes to its output (one uint per work-item). Each is timed
- one launch at a time: the median of each launch's own profiling events (start to end), what
  the measuring worker records;
- back to back: `--repeats` launches queued at once, first start to last end, divided by their
  count (what a stream of frames costs; launches overlap their set-up).
With `--npp` (CuPy and NPP where it runs, as `bench/npp_compare.py`), NVIDIA's filter on the same
data both ways too: CUDA events around each call, and around 20 calls back to back.
Prints a Markdown table, ms.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autotune.devices import open_device  # noqa: E402
from autotune.families.conv2d import CONV2D  # noqa: E402
from autotune.families.conv2d.inputs import parse_filter_widths, parse_image_size  # noqa: E402
from autotune.launcher import Launcher  # noqa: E402
from autotune.lookup import resolve  # noqa: E402
from autotune.store import Store  # noqa: E402

EMPTY = "__kernel void empty(__global const uchar *input, __global uchar *output) { }\n"
COPY = (
    "__kernel void copy(__global const uint *input, __global uint *output, const uint words) {\n"
    "    const uint i = get_global_id(0);\n"
    "    if (i < words) output[i] = input[i];\n"
    "}\n"
)


def timed(launch, repeats: int, context: object) -> tuple[float, float]:
    """(median of single launches' own event times, back-to-back span / count), ms. The
    back-to-back launches wait behind a user event until all are queued, so the span is the
    device's, not the host's queueing (`launch(wait_for)` returns the launch's last event)."""
    import pyopencl as cl

    launch(None).wait()
    single = []
    for _ in range(repeats):
        event = launch(None)
        event.wait()
        single.append((event.profile.end - event.profile.start) * 1e-6)
    gate = cl.UserEvent(context)
    try:
        events = [launch([gate] if i == 0 else None) for i in range(repeats)]
    finally:
        gate.set_status(cl.command_execution_status.COMPLETE)
    events[-1].wait()
    span = (events[-1].profile.end - events[0].profile.start) * 1e-6 / repeats
    return statistics.median(single), span


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--filter-width", default="3,9")
    parser.add_argument("--image-size", default="1920x1080,4096x4096", help="output sizes WxH, a comma list")
    parser.add_argument(
        "--pixels", default="{}", help="problem fields as JSON (dtype, out_dtype, border, channels)"
    )
    parser.add_argument("--db", default=None, help="database URL the kernels come from (else the defaults)")
    parser.add_argument("--config", default=None, help="a config as JSON, instead of the database's")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--npp", action="store_true", help="time NVIDIA's NPP filter too (CuPy, NPP)")
    args = parser.parse_args()

    import pyopencl as cl

    info, device = open_device(args.device)
    context = cl.Context([device])
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    rows = Store(args.db, read_only=True).best() if args.db else []
    pixels = json.loads(args.pixels)
    empty = cl.Program(context, EMPTY).build().empty
    copy = cl.Program(context, COPY).build().copy
    mf = cl.mem_flags
    print(f"{info.name} ({info.platform}, driver {info.driver_version}); {args.repeats} launches each, ms\n")
    header = (
        "| size | F | kind | kernel: one at a time | back to back | empty kernel: one at a time "
        "| back to back | copy of the bytes: one at a time | back to back |"
    )
    rule = "|---|---|---|---|---|---|---|---|---|"
    if args.npp:
        header += " NPP: one at a time | NPP: back to back |"
        rule += "---|---|"
    print(header)
    print(rule)
    for size_text in args.image_size.split(","):
        size = parse_image_size(size_text.strip())
        for width in parse_filter_widths(args.filter_width):
            (problem,) = CONV2D.problems_of(CONV2D.kinds([width], None, pixels), size)
            config = json.loads(args.config) if args.config else resolve(rows, CONV2D, problem, info).config
            variant = CONV2D.render(config, problem)
            buffers = {
                name: cl.Buffer(
                    context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(values)
                )
                for name, values in problem.inputs().items()
            }
            output_bytes = int(np.prod(problem.output_shape)) * problem.output_dtype.itemsize
            buffers["output"] = cl.Buffer(context, mf.READ_WRITE, size=max(output_bytes, 4))
            launcher = Launcher(CONV2D, variant, cl.Program(context, variant.source).build())
            kernel = timed(
                functools.partial(last_event, launcher, queue, problem, buffers), args.repeats, context
            )
            global_size = CONV2D.global_size(variant, problem)
            local_size = (*variant.local_size, 1, 1)[: len(global_size)]
            ends = (buffers["input"], buffers["output"])
            nothing = timed(
                kernel_launch(empty, queue, global_size, local_size, *ends), args.repeats, context
            )
            words = np.uint32(output_bytes // 4)
            items = (int(words) + 255) // 256 * 256
            copied = timed(kernel_launch(copy, queue, (items,), (256,), *ends, words), args.repeats, context)
            cells = [f"{a:.4f}" for a in (*kernel, *nothing, *copied)]
            if args.npp:
                cells += [f"{t:.4f}" for t in npp_times(problem)]
            kind = CONV2D.describe_kind(problem.kind())
            print(f"| {size[0]}x{size[1]} | {width} | {kind} | {' | '.join(cells)} |", flush=True)
    return 0


def last_event(launcher: Launcher, queue: object, problem: object, buffers: dict, wait_for: object) -> object:
    """Every launch of the variant queued; the last one's event."""
    return launcher.enqueue(queue, problem, buffers, wait_for)[-1]


def kernel_launch(kernel: object, queue: object, global_size: tuple, local_size: tuple, *arguments: object):
    """`launch(wait_for)` for a plain kernel."""
    return lambda wait_for: kernel(queue, global_size, local_size, *arguments, wait_for=wait_for)


def npp_times(problem: object) -> tuple[float, float]:
    """NPP's filter of this problem: CUDA events around each call (median), and around 20
    back to back (mean)."""
    from npp_compare import cuda_ms, load_npp, npp_run

    shim = load_npp()
    call, _ = npp_run(shim, problem, shim.npp_border(0))
    if call() != 0:  # NPP's mirror refused: its replicate
        call, _ = npp_run(shim, problem, shim.npp_border(1))
    import cupy

    single = []
    for _ in range(20):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        call()
        end.record()
        end.synchronize()
        single.append(cupy.cuda.get_elapsed_time(start, end))
    return statistics.median(single), cuda_ms(call)


if __name__ == "__main__":
    sys.exit(main())
