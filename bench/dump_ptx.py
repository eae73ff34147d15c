#!/usr/bin/env python3
"""Write the PTX NVIDIA's OpenCL driver makes of chosen kernels, and count its
instructions by kind: what a kernel issues besides its multiply-adds, without a profiler.

    python3 bench/dump_ptx.py --device 0 --family separable --rank 1 --filter-width 17,33 \
        --config @bench/configs/separable_stage_vectors.json --out DIR
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

from bench_common import read_configs

from autotune.devices import open_device
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import GPU_IMAGE, parse_filter_widths
from autotune.families.separable import SEPARABLE, SeparableProblem


def instruction_counts(ptx: str) -> collections.Counter:
    """Instructions of the PTX by opcode with its state space (`ld.shared`, `fma.rn.f32`)."""
    counts: collections.Counter = collections.Counter()
    for line in ptx.splitlines():
        line = line.strip()
        if not line or line.startswith(("//", ".", "{", "}", "$")) or line.endswith(":"):
            continue
        opcode = re.split(r"[\s;]", line.lstrip("@!%p0123456789 "), maxsplit=1)[0]
        parts = opcode.split(".")
        counts[".".join(parts[:2]) if parts[0] in ("ld", "st") else parts[0]] += 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--family", choices=["conv2d", "separable"], default="separable")
    parser.add_argument("--rank", default="1", help="ranks, for the separable family")
    parser.add_argument("--filter-width", default="17,33")
    parser.add_argument("--config", action="append", default=[], help="JSON object or @file (list ok)")
    parser.add_argument("--pixels", default="{}", help='problem fields, e.g. {"border": "mirror"}')
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import pyopencl as cl

    info, device = open_device(args.device)
    context = cl.Context([device])
    args.out.mkdir(parents=True, exist_ok=True)
    pixels = json.loads(args.pixels)
    ranks = [int(rank) for rank in args.rank.split(",")] if args.family == "separable" else [None]
    number = 0
    for width in parse_filter_widths(args.filter_width):
        for rank in ranks:
            for config in read_configs(args.config):
                if rank is None:
                    variant = CONV2D.render(config, Conv2DProblem(width, *GPU_IMAGE, **pixels))
                else:
                    completed = SEPARABLE.space.complete(config)
                    problem = SeparableProblem(width, rank, *GPU_IMAGE, **pixels)
                    reasons = SEPARABLE.space.violations(completed, problem.key(), info)
                    if reasons:
                        label = json.dumps(config, sort_keys=True)
                        print(f"F={width} rank {rank} {label}: invalid: {reasons[0]}", flush=True)
                        continue
                    variant = SEPARABLE.render(completed, problem)
                program = cl.Program(context, variant.source).build()
                ptx = program.get_info(cl.program_info.BINARIES)[0].decode(errors="replace")
                name = f"kernel_{number:02d}_f{width}" + (f"_r{rank}" if rank else "")
                (args.out / f"{name}.ptx").write_text(ptx)
                counts = instruction_counts(ptx)
                summary = ", ".join(f"{op} {n}" for op, n in counts.most_common(12))
                print(f"{name} {json.dumps(config, sort_keys=True)}: {summary}", flush=True)
                number += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
