"""The roofline's two ceilings for a device: memory bandwidth and arithmetic peak.

The database keeps no such figures, and a vendor's data sheet is not what the kernels
see through this driver. So, in order: figures given on the command line; else, when
the device is on this machine, measured now with two small kernels timed by OpenCL
profiling events (a float4 copy of a buffer larger than CPU caches, and an FMA loop
with independent chains of the device's native float vector, at least float8, the
fastest of a few work-group sizes); else none, and the page says so. The page names
the source of each figure.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

COPY_FLOATS = 1 << 24  # 64 MiB each way: past the last-level cache of CPUs
FMA_ITERATIONS = 256  # per work-item on GPUs; CPUs take fewer, longer work-items
FMA_CHAINS = 8  # independent vector chains per work-item: hides FMA latency
FMA_LOCAL_SIZES = (None, 1, 64, 256)  # the fastest counts: drivers differ in what suits them
REPEATS = 5

_DECLARE = "\n".join(f"    VECTOR a{c} = (VECTOR)(seed + {c});" for c in range(FMA_CHAINS))
# Contracted a * m + k, not fma(): PoCL 3.0 calls its vector fma() out of line.
_STEP = " ".join(f"a{c} = a{c} * m + k;" for c in range(FMA_CHAINS))
_SUM = " + ".join(f"a{c}" for c in range(FMA_CHAINS))
SOURCE = f"""
#pragma OPENCL FP_CONTRACT ON
__kernel void copy4(__global const float4 *restrict src, __global float4 *restrict dst)
{{
    const size_t i = get_global_id(0);
    dst[i] = src[i];
}}
__kernel void fma_loop(__global VECTOR *out, const float seed, const int steps)
{{
{_DECLARE}
    const VECTOR m = (VECTOR)(0.999f), k = (VECTOR)(0.001f);
    for (int i = 0; i < steps; ++i) {{ {_STEP} }}
    out[get_global_id(0)] = {_SUM};
}}
"""


@dataclass(frozen=True)
class Ceilings:
    bandwidth_gbs: float | None
    peak_gflops: float | None
    source: str  # where the figures came from, in words

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def given(bandwidth_gbs: float | None, peak_gflops: float | None) -> Ceilings | None:
    """Figures from the command line; None when neither was given."""
    if bandwidth_gbs is None and peak_gflops is None:
        return None
    return Ceilings(bandwidth_gbs, peak_gflops, "given on the command line (--bandwidth, --peak-gflops)")


def local_indices() -> dict[str, int]:
    """This machine's device index by device fingerprint (as JSON); none if OpenCL cannot
    list its devices."""
    import json

    from autotune.devices import list_devices
    from autotune.errors import AutotuneError

    try:
        return {json.dumps(d.fingerprint, sort_keys=True): d.index for d in list_devices()}
    except AutotuneError:
        return {}


def profiled_median_ms(launch: Any, repeats: int = REPEATS) -> float:
    """Median of `repeats` launches by the device's profiling clock, after a warm-up:
    `launch()` enqueues once on a profiling queue and returns the event."""
    launch().wait()  # warm-up
    runs = []
    for _ in range(repeats):
        event = launch()
        event.wait()
        runs.append((event.profile.end - event.profile.start) * 1e-6)
    return statistics.median(runs)


def measure(device_index: int) -> Ceilings:
    """Copy bandwidth and FMA peak of one device of this machine, measured now."""
    import numpy as np
    import pyopencl as cl

    from autotune.devices import open_device

    info, device = open_device(device_index)
    lanes = max(8, info.native_vector_width)  # float16 on AVX-512: float8 fills half of each register
    context = cl.Context([device])
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    program = cl.Program(context, SOURCE).build(options=[f"-DVECTOR=float{lanes}"])
    copy, fma = cl.Kernel(program, "copy4"), cl.Kernel(program, "fma_loop")
    src = cl.Buffer(context, cl.mem_flags.READ_ONLY, COPY_FLOATS * 4)
    dst = cl.Buffer(context, cl.mem_flags.WRITE_ONLY, COPY_FLOATS * 4)
    cl.enqueue_fill_buffer(queue, src, np.float32(1), 0, COPY_FLOATS * 4)
    copy_ms = profiled_median_ms(lambda: copy(queue, (COPY_FLOATS // 4,), None, src, dst))
    # The same multiply-adds either way: on CPUs few long work-items, else PoCL's cost per
    # work-item, not the FMA units, sets the figure.
    per_core = 16 if info.is_cpu else 4096
    items = device.max_compute_units * per_core
    steps = np.int32(FMA_ITERATIONS * 4096 // per_core)
    out = cl.Buffer(context, cl.mem_flags.WRITE_ONLY, items * 4 * lanes)
    fma_ms = min(
        profiled_median_ms(
            lambda local=local: fma(queue, (items,), local and (local,), out, np.float32(1), steps)
        )
        for local in FMA_LOCAL_SIZES
        if local is None or local <= min(device.max_work_group_size, items)
    )
    flops = items * int(steps) * FMA_CHAINS * lanes * 2
    return Ceilings(
        bandwidth_gbs=2 * COPY_FLOATS * 4 / (copy_ms * 1e-3) / 1e9,
        peak_gflops=flops / (fma_ms * 1e-3) / 1e9,
        source=(
            f"measured now on device {device_index} of this machine: a float4 copy of "
            f"{COPY_FLOATS * 4 >> 20} MiB ({copy_ms:.3f} ms) and a float{lanes} FMA loop "
            f"({fma_ms:.3f} ms), medians of {REPEATS} runs timed by OpenCL profiling events; "
            "a measured peak is a lower bound of the device's true one"
        ),
    )


def ceilings_for(index: int | None, given_figures: Ceilings | None, allow_measure: bool) -> Ceilings:
    """The ceilings a device's roofline is drawn under (`index`: the device's on this
    machine, None if it is not here), and where they came from."""
    if given_figures is not None:
        return given_figures
    if not allow_measure:
        return Ceilings(None, None, "not measured (--no-measure); give --bandwidth and --peak-gflops")
    if index is None:
        return Ceilings(
            None, None, "not available: the device is not on this machine (give --bandwidth, --peak-gflops)"
        )
    try:
        return measure(index)
    except Exception as exc:  # a driver failing the measurement must not fail the page
        return Ceilings(None, None, f"could not be measured on this machine: {type(exc).__name__}: {exc}")
