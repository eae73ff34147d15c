#!/usr/bin/env python3
"""Write the PTX NVIDIA's OpenCL driver makes of chosen kernels, and count its
instructions by kind: what a kernel issues besides its multiply-adds, without a profiler.
With `--sass ARCH` the PTX is also assembled by the CUDA toolkit's ptxas and the machine
code (SASS) counted, as `cuobjdump -sass` lists it.

    python3 bench/dump_ptx.py --device 0 --family separable --rank 1 --filter-width 17,33 \
        --config @bench/configs/separable_stage_vectors.json --out DIR [--sass sm_90]
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench_common import add_kernel_options, chosen_kernels

from autotune.devices import open_device
from autotune.families import KernelVariant


def program_ptx(cl: Any, context: Any, variant: KernelVariant) -> str:
    """The PTX NVIDIA's OpenCL driver makes of the kernel's program (its binary there)."""
    program = cl.Program(context, variant.source).build(options=list(variant.build_options))
    return program.get_info(cl.program_info.BINARIES)[0].decode(errors="replace").rstrip("\x00")


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


def sass_counts(ptx_file: Path, arch: str) -> collections.Counter:
    """SASS instructions of the assembled PTX by opcode (`FFMA`, `LDS`, `STG`)."""
    cubin = ptx_file.with_suffix(".cubin")
    subprocess.run(["ptxas", f"-arch={arch}", str(ptx_file), "-o", str(cubin)], check=True)
    listing = subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True, text=True)
    opcodes = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_]*)", listing.stdout)
    return collections.Counter(opcodes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_kernel_options(parser, "17,33")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sass", metavar="ARCH", help="also assemble for ARCH (sm_90) and count the SASS")
    args = parser.parse_args()

    import pyopencl as cl

    info, device = open_device(args.device)
    context = cl.Context([device])
    args.out.mkdir(parents=True, exist_ok=True)
    for number, (label, variant, _) in enumerate(chosen_kernels(args, info)):
        ptx = program_ptx(cl, context, variant)
        ptx_file = args.out / f"kernel_{number:02d}.ptx"
        ptx_file.write_text(ptx)
        counts = instruction_counts(ptx)
        summary = ", ".join(f"{op} {n}" for op, n in counts.most_common(12))
        print(f"kernel_{number:02d} {label}: PTX {sum(counts.values())}: {summary}", flush=True)
        if args.sass:
            sass = sass_counts(ptx_file, args.sass)
            summary = ", ".join(f"{op} {n}" for op, n in sass.most_common(16))
            print(f"kernel_{number:02d} SASS {sum(sass.values())}: {summary}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
