#!/usr/bin/env python3
"""Launch chosen OpenCL kernels' PTX through CUDA, so NVIDIA's profiler can see them.

Nsight Compute (`ncu`) profiles CUDA launches. NVIDIA's OpenCL driver compiles a kernel to
PTX; this script takes that PTX, loads it with CuPy (the CUDA driver) and launches it on the
same data, sizes and arguments as the OpenCL launch (the launch offsets OpenCL passes in
environment registers made 0). It first checks that the two launches
write the same output and prints both medians, so a profile of the CUDA launch is a profile
of the kernel the tuner measured. Then run it under `ncu` with `--cuda-only` (the checked
run done, only the CUDA launches):

    python3 bench/profile_kernels.py --device 0 --family separable --rank 1 --filter-width 33 \
        --config @bench/configs/separable_sass_probe.json
    ncu --set full -c 1 python3 bench/profile_kernels.py --cuda-only --repeats 1 ... (the same options)
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import add_kernel_options, chosen_kernels
from dump_ptx import program_ptx

from autotune.devices import open_device
from autotune.families import get_family
from autotune.launcher import Launcher


def opencl_launch(
    cl: Any, context: Any, variant: Any, problem: Any, repeats: int
) -> tuple[np.ndarray, float]:
    """(output, median ms) of the kernel's OpenCL launches on the problem's data, each
    launch waited for on its own (so medians run above `time_configs.py`'s)."""
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    program = cl.Program(context, variant.source).build(options=list(variant.build_options))
    flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
    buffers = {
        name: cl.Buffer(context, flags, hostbuf=np.ascontiguousarray(array))
        for name, array in problem.inputs().items()
    }
    output = np.zeros(problem.output_shape, problem.output_dtype)
    buffers["output"] = cl.Buffer(context, cl.mem_flags.READ_WRITE, output.nbytes)
    launcher = Launcher(get_family(variant.family), variant, program)
    times = []
    for _ in range(repeats + 1):
        events = launcher.enqueue(queue, problem, buffers)
        queue.finish()
        times.append(sum(e.profile.end - e.profile.start for e in events) * 1e-6)
    cl.enqueue_copy(queue, output, buffers["output"])
    return output, statistics.median(times[1:] or times)


def ptx_for_cuda(ptx: str) -> str:
    """The PTX with the launch offsets NVIDIA's OpenCL runtime passes in environment
    registers (`%envreg0-2`: the work-group id's offset of a launch it split in parts,
    `%envreg3-5`: the global offset) made 0, as they are for one launch of the whole grid:
    CUDA leaves them undefined."""
    others = set(re.findall(r"%envreg(\d+)", ptx)) - {"0", "1", "2", "3", "4", "5"}
    if others:
        raise SystemExit(f"the PTX reads environment registers this script does not know: {sorted(others)}")
    return re.sub(r"%envreg[0-5]\b", "0", ptx)


def cuda_launch(ptx_file: Path, variant: Any, problem: Any, repeats: int) -> tuple[np.ndarray, float]:
    """(output, median ms) of the same PTX launched through CUDA on the same data."""
    import cupy

    module = cupy.RawModule(path=str(ptx_file))
    buffers = {name: cupy.asarray(np.ascontiguousarray(a)) for name, a in problem.inputs().items()}
    buffers["output"] = cupy.zeros(problem.output_shape, problem.output_dtype)
    family = get_family(variant.family)
    for name, nbytes in family.scratch(variant, problem).items():  # a pipeline's between-launch buffers
        buffers[name] = cupy.zeros(max(nbytes, 1), np.uint8)
    steps = family.steps(variant, problem, buffers)
    kernels = [module.get_function(step.kernel_name) for step in steps]
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeats + 1):
        start.record()
        for kernel, step in zip(kernels, steps, strict=True):
            grid = tuple(g // size for g, size in zip(step.global_size, step.local_size, strict=True))
            kernel(grid, step.local_size, step.arguments)
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return cupy.asnumpy(buffers["output"]), statistics.median(times[1:] or times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_kernel_options(parser, "33")
    parser.add_argument("--repeats", type=int, default=20, help="timed launches each way (median)")
    parser.add_argument("--cuda-only", action="store_true", help="only the CUDA launches (under a profiler)")
    parser.add_argument("--out", type=Path, default=Path("profile_ptx"), help="where the PTX files go")
    args = parser.parse_args()

    import pyopencl as cl

    info, device = open_device(args.device)
    context = cl.Context([device])
    args.out.mkdir(parents=True, exist_ok=True)
    mismatched = 0
    for number, (label, variant, problem) in enumerate(chosen_kernels(args, info)):
        ptx_file = args.out / f"kernel_{number:02d}.ptx"
        ptx_file.write_text(ptx_for_cuda(program_ptx(cl, context, variant)))
        if args.cuda_only:
            _, cuda_ms = cuda_launch(ptx_file, variant, problem, args.repeats)
            print(f"kernel_{number:02d} {label}: CUDA launch of its PTX {cuda_ms:.4f} ms", flush=True)
            continue
        opencl_out, opencl_ms = opencl_launch(cl, context, variant, problem, args.repeats)
        cuda_out, cuda_ms = cuda_launch(ptx_file, variant, problem, args.repeats)
        differ = int(np.count_nonzero(opencl_out != cuda_out))
        mismatched += differ > 0
        same = "same output" if not differ else f"OUTPUTS DIFFER at {differ} pixels"
        print(
            f"kernel_{number:02d} {label}: OpenCL {opencl_ms:.4f} ms, "
            f"CUDA launch of its PTX {cuda_ms:.4f} ms, {same}",
            flush=True,
        )
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
