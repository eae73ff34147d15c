#!/usr/bin/env python3
"""Write the PTX NVIDIA's OpenCL driver makes of chosen kernels, and count its
instructions by kind: what a kernel issues besides its multiply-adds, without a profiler.

    python3 bench/dump_ptx.py --device 0 --family separable --rank 1 --filter-width 17,33 \
        --config @bench/configs/separable_stage_vectors.json --out DIR
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

from bench_common import add_kernel_options, chosen_kernels

from autotune.devices import open_device


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
    add_kernel_options(parser, "17,33")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import pyopencl as cl

    info, device = open_device(args.device)
    context = cl.Context([device])
    args.out.mkdir(parents=True, exist_ok=True)
    for number, (label, variant) in enumerate(chosen_kernels(args, info)):
        ptx = cl.Program(context, variant.source).build().get_info(cl.program_info.BINARIES)[0]
        ptx = ptx.decode(errors="replace")
        (args.out / f"kernel_{number:02d}.ptx").write_text(ptx)
        counts = instruction_counts(ptx)
        summary = ", ".join(f"{op} {n}" for op, n in counts.most_common(12))
        print(f"kernel_{number:02d} {label}: {summary}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
