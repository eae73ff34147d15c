#!/usr/bin/env python3
"""Where a pipeline's time goes: each launch of a several-launch variant timed by its own
profiling events, the gaps between one launch's end and the next one's start, and the
whole (first start to last end), on one problem per config.

    python3 bench/launch_gaps.py --device 0 --family separable --filter-width 9,17,33 --rank 1 \\
        --config @bench/configs/separable_two_passes_best.json --repeats 30

Prints a Markdown table: medians over `--repeats` runs queued back to back.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autotune.devices import open_device  # noqa: E402
from autotune.families import get_family  # noqa: E402
from autotune.families.conv2d.inputs import image_size, parse_filter_widths  # noqa: E402
from autotune.launcher import Launcher  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--family", default="separable")
    parser.add_argument("--filter-width", default="9,17,33")
    parser.add_argument("--rank", default="1")
    parser.add_argument("--image-size", default=None, help="output WxH")
    parser.add_argument("--config", action="append", default=[], help="JSON object or @file (list ok)")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    import pyopencl as cl

    family = get_family(args.family)
    info, device = open_device(args.device)
    context = cl.Context([device])
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    widths = parse_filter_widths(args.filter_width)
    size = image_size(args.image_size, info)
    configs = []
    for text in args.config:
        data = json.loads(Path(text[1:]).read_text() if text.startswith("@") else text)
        configs += data if isinstance(data, list) else [data]
    print(f"{info.name}, {size[0]}x{size[1]} output, medians of {args.repeats} runs queued back to back")
    print("| F | rank | config | launches ms | gaps ms | whole ms | max error |")
    print("|---|---|---|---|---|---|---|")
    mf = cl.mem_flags
    for width in widths:
        for rank in (int(r) for r in args.rank.split(",")):
            shape = dict(zip(family.problem_type.size_fields, size, strict=True))
            problem = family.problem_type(filter_width=width, rank=rank, **shape)
            buffers = {
                name: cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(a))
                for name, a in problem.inputs().items()
            }
            output = np.empty(problem.output_shape, problem.output_dtype)
            buffers["output"] = cl.Buffer(context, mf.READ_WRITE, size=output.nbytes)
            reference = problem.reference()
            for config in configs:
                variant = family.render(config, problem)
                launcher = Launcher(family, variant, cl.Program(context, variant.source).build())
                launcher.enqueue(queue, problem, buffers)[-1].wait()
                cl.enqueue_copy(queue, output, buffers["output"]).wait()
                error = float(np.abs(output - reference).max())
                runs = [launcher.enqueue(queue, problem, buffers) for _ in range(args.repeats)]
                runs[-1][-1].wait()
                steps = [
                    statistics.median((run[i].profile.end - run[i].profile.start) * 1e-6 for run in runs)
                    for i in range(len(runs[0]))
                ]
                gaps = [
                    statistics.median((run[i + 1].profile.start - run[i].profile.end) * 1e-6 for run in runs)
                    for i in range(len(runs[0]) - 1)
                ]
                whole = statistics.median((run[-1].profile.end - run[0].profile.start) * 1e-6 for run in runs)
                text = json.dumps(config, separators=(",", ":"))
                print(
                    f"| {width} | {rank} | {text} | {' + '.join(f'{t:.4f}' for t in steps)} "
                    f"| {', '.join(f'{g:.4f}' for g in gaps) or '-'} | {whole:.4f} | {error:.2g} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
