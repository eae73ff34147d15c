#!/usr/bin/env python3
"""Registers, spills and shared memory of chosen kernels on NVIDIA's OpenCL driver.

Builds each config with `-cl-nv-verbose` and prints the compiler's resource lines
(ptxas info), the first thing to look at when a tile shape loses on the GPU.

    python3 bench/kernel_resources.py --device 0 --filter-width 9,17,33 --config @configs.json
    python3 bench/kernel_resources.py --device 0 --family separable --rank 1,2 --filter-width 17,33 \
        --config @bench/configs/separable_stage_vectors.json
"""

from __future__ import annotations

import argparse
import sys

from bench_common import add_kernel_options, chosen_kernels

from autotune.devices import open_device


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_kernel_options(parser, "9,17,33")
    args = parser.parse_args()

    import pyopencl as cl

    info, device = open_device(args.device)
    context = cl.Context([device])
    print(f"{info.name} ({info.platform}, driver {info.driver_version})")
    for label, variant, _ in chosen_kernels(args, info):
        program = cl.Program(context, variant.source).build(options=["-cl-nv-verbose"])
        log = program.get_build_info(device, cl.program_build_info.LOG)
        lines = [
            line.strip()
            for line in log.splitlines()
            if "ptxas" in line and ("Used" in line or "spill" in line)
        ]
        print(f"{label}: " + " | ".join(lines or ["no ptxas lines in the build log"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
