#!/usr/bin/env python3
"""Which explicit-vector widths a device's compiler passes to its built-ins intact.

    python bench/vector_abi_scan.py --device 0 --widths 4,8,16 --draws 60

First one 16-lane narrowing conversion (`convert_ushort16(as_uint16(...))`, what 8- and
16-bit outputs of `x_vector = 16` kernels call) and its 8-lane form, run and checked; then
random problems of both families, each rendered with an `x_vector` of `--widths` (whatever
the device's own vector rule says) and built: how many builds draw the compiler's "changes
the ABI" warning (a 64-byte vector handed across a mismatched calling convention: pip's PoCL
3.0 on an AMD Zen 4, BENCHMARKS.md), at which built-ins, and how many stop the compiler
(a double8 conversion did there). Builds only (no kernel of the random draws runs), each in
a process of its own: that PoCL aborts a process that built such a program when it exits,
and caches such programs without their kernels (the cache is off here).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path

os.environ["POCL_KERNEL_CACHE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "checks"))

import numpy as np  # noqa: E402
import pyopencl as cl  # noqa: E402
from fuzz_kernels import draw_config, draw_problem  # noqa: E402

from autotune.devices import open_device  # noqa: E402
from autotune.families import get_family  # noqa: E402

PROBE = """__kernel void probe(__global const float *in, __global ushort *out) {
    vstore%(n)d(convert_ushort%(n)d(as_uint%(n)d(vload%(n)d(0, in) + 8388608.0f)), 0, out);
}"""
ABI = re.compile(r"\.cl:(\d+):(\d+).*?changes the ABI")


def probe(context: object, device: object, lanes: int) -> str:
    values = np.arange(lanes, dtype=np.float32) * 4099.0
    program = cl.Program(context, PROBE % {"n": lanes}).build()
    log = program.get_build_info(device, cl.program_build_info.LOG)
    queue = cl.CommandQueue(context)
    source = cl.Buffer(context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=values)
    result = np.zeros(lanes, np.uint16)
    target = cl.Buffer(context, cl.mem_flags.WRITE_ONLY, result.nbytes)
    program.probe(queue, (1,), (1,), source, target)
    cl.enqueue_copy(queue, result, target)
    queue.finish()
    right = np.array_equal(result, values.astype(np.uint16))
    return f"{'right' if right else 'WRONG'}{', ABI warning' if 'changes the ABI' in log else ''}"


def build(device_index: int, path: str) -> None:
    """Child: build the kernel in `path`; print the built-ins its ABI warnings point at."""
    warnings.simplefilter("ignore")
    _, device = open_device(device_index)
    kernel = json.loads(Path(path).read_text())
    program = cl.Program(cl.Context([device]), kernel["source"]).build(options=kernel["options"])
    log = program.get_build_info(device, cl.program_build_info.LOG)
    lines = kernel["source"].splitlines()
    names = []
    for line, column in ((int(a), int(b)) for a, b in ABI.findall(log)):
        name = re.match(r"\w+", lines[line - 1][column - 1 :]) if line <= len(lines) else None
        names.append(name.group(0) if name else "?")
    print(json.dumps(names), flush=True)
    os._exit(0)


def warnings_of(device_index: int, source: str, options: list[str]) -> list[str] | None:
    """The built-ins a build's ABI warnings point at; None where the build killed its process."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as kernel:
        json.dump({"source": source, "options": options}, kernel)
        kernel.flush()
        child = subprocess.run(
            [sys.executable, __file__, "--device", str(device_index), "--build", kernel.name],
            capture_output=True,
            text=True,
        )
    if child.returncode != 0 or not child.stdout.strip():
        return None
    return json.loads(child.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--widths", default="4,8,16")
    parser.add_argument("--draws", type=int, default=60, help="random problems per family and width")
    parser.add_argument("--build", help=argparse.SUPPRESS)  # the child's kernel file
    args = parser.parse_args()
    if args.build:
        build(args.device, args.build)
    warnings.simplefilter("ignore")  # the build logs are read here
    info, device = open_device(args.device)
    context = cl.Context([device])
    print(f"{info.name} / {info.platform_version} (widest_vector_bytes {info.widest_vector_bytes})")
    for lanes in (8, 16):
        print(f"convert_ushort{lanes}(as_uint{lanes}(...)): {probe(context, device, lanes)}", flush=True)
    unlimited = dataclasses.replace(info, widest_vector_bytes=128)  # every width, whatever the device
    print("| family | x_vector | kernels built | with an ABI warning | builds that died | at |")
    print("|---|---|---|---|---|---|")
    for family_name in ("conv2d", "separable"):
        family = get_family(family_name)
        for width in (int(w) for w in args.widths.split(",")):
            built, warned, died, where = 0, 0, 0, Counter()
            for seed in range(args.draws):
                rng = random.Random(seed)
                problem = draw_problem(family, rng)
                config = draw_config(family, problem, unlimited, rng)
                if config is None:
                    continue
                config = family.space.with_value(config, "x_vector", width, problem.key(), unlimited)
                if family_name == "separable" and config is not None and config["stream_rows"] == 0:
                    config = family.space.with_value(config, "stream_rows", 32, problem.key(), unlimited)
                if config is None or config["x_vector"] != width:
                    continue
                variant = family.render(config, problem)
                names = warnings_of(args.device, variant.source, list(variant.build_options))
                built += 1
                if names is None:
                    died += 1
                    continue
                warned += bool(names)
                where.update(names)
            names = ", ".join(name for name, _ in where.most_common(5))
            print(f"| {family_name} | {width} | {built} | {warned} | {died} | {names} |", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
