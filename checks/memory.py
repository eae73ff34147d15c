#!/usr/bin/env python3
"""Run every template path under Oclgrind and fail on any memory or race error.

    python checks/memory.py            # `make check-memory`

Needs Debian's `oclgrind` (apt-get install oclgrind). Each kernel runs on small,
awkward output sizes (not multiples of the tile, smaller than one work-group) with
Oclgrind's checks for invalid accesses, uninitialised values and data races switched
on; Oclgrind reports on stderr and lets the run go on, so this script reads that
output, kernel by kernel.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ICD_LIBRARY = "/usr/lib/oclgrind/liboclgrind-rt-icd.so"
PROBLEMS = [
    "Invalid read",
    "Invalid write",
    "Uninitialized",
    "Uninitialised",
    "Data race",
    "data race",
    "Work-group divergence",
    "Oclgrind - ",
    "wrong result",
]
MARKER = "@@autotune-kernel@@"
# Oclgrind 21.10 reports a store of a vector built from initialised scalars,
# `*(float2 *)p = (float2)(a, b)`, as "uninitialized" (a 3-line kernel shows it; the
# stored values are right, and vstore2 is not reported). vstore2 is no way out: NVIDIA
# compiles it to scalar stores, 4-14% slower on the H200 (bench/store_forms.py). So
# reports of exactly this kind are set aside; the result check still catches wrong values.
VECTOR_STORE_FALSE_POSITIVE = ("Uninitialized value written to global memory", "store <", " x float> ")


class NoValidConfig(Exception):
    """A knob value that no valid config can take."""


def cases() -> list[tuple[dict, int, tuple[int, int]]]:
    from autotune.families.conv2d import CONV2D

    space = CONV2D.space
    base = {"filter_mode": "define", "local_x": 4, "local_y": 4, "work_x": 2, "work_y": 2}
    configs = [dict(p.config, local_x=8, local_y=4) for p in space.presets.values()]
    # Every value of every knob, in the valid config nearest to the base (the space
    # finds what a value needs). Work-groups stay small: Oclgrind runs work-items one
    # by one, and the larger group shapes add time, not template paths.
    for name, knob in space.knobs.items():
        values = [v for v in knob.values if v <= 8] if name in ("local_x", "local_y") else list(knob.values)
        for value in values:
            config = space.with_value(base, name, value, {"filter_width": 5})
            if config is None:
                raise NoValidConfig(f"no valid config has {name}={value}")
            configs.append(config)
    # Combinations on purpose: the widest tiles with every column unrolled and float4
    # taps, full column unrolling without row unrolling, the __local tile with float4
    # taps, and vector image reads on every tile and row parity.
    configs.append(space.complete({**base, "work_x": 8, "work_y": 8, "unroll": "full", "vector": 4}))
    configs.append(space.complete({**base, "work_x": 4, "work_y": 8, "unroll": "full", "unroll_rows": False}))
    configs.append(space.complete({**base, "work_x": 4, "work_y": 8, "cache_local": True, "vector": 4}))
    for cache_local in (False, True):
        for image_vector in (2, 4):
            for work_y in (1, 2):
                config = {**base, "work_x": 4, "work_y": work_y, "image_vector": image_vector}
                configs.append(space.complete({**config, "cache_local": cache_local}))
    out = []
    for i, config in enumerate(configs):
        sizes = [(3, (7, 5)), (5 + i % 3, (13, 9)), (4, (1, 1))]
        if config["image_vector"] > 1:
            sizes.append((5, (12, 6)))  # pitches 16 and 12: the vector paths
            sizes.append((5, (10, 7)))  # pitch 14 (2 mod 4): float4 reads on alternate rows
        for filter_width, size in sizes:
            if not space.violations(config, {"filter_width": filter_width}):
                out.append((config, filter_width, size))
    return out


def child() -> int:
    import numpy as np
    import pyopencl as cl

    from autotune.families.conv2d import CONV2D, Conv2DProblem
    from autotune.families.conv2d.problem import correlate_valid

    platform = cl.get_platforms()[0]
    sys.stderr.write(f"platform: {platform.name}\n")
    context = cl.Context(platform.get_devices())
    queue = cl.CommandQueue(context)
    mf = cl.mem_flags
    for number, (config, filter_width, (out_w, out_h)) in enumerate(cases()):
        rng = np.random.default_rng(number)
        image = rng.uniform(-1, 1, (out_h + filter_width - 1, out_w + filter_width - 1)).astype(np.float32)
        filt = rng.uniform(-1, 1, (filter_width, filter_width)).astype(np.float32)
        problem = Conv2DProblem(filter_width, out_w, out_h)
        variant = CONV2D.render(config, problem, values=filt)
        if number == 0:
            # A planted out-of-bounds read first: proof that the checker sees one.
            variant = dataclasses.replace(
                variant,
                source=variant.source.replace(
                    "float acc_0_0 = 0.0f", "float acc_0_0 = input[in_width * (out_height + fw)]", 1
                ),
            )
        sys.stderr.write(f"{MARKER} {number} F={filter_width} out={out_w}x{out_h} {config}\n")
        sys.stderr.flush()
        kernel = cl.Kernel(cl.Program(context, variant.source).build(), variant.kernel_name)
        input_buf = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=image)
        filter_buf = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=filt)
        output = np.zeros((out_h, out_w), dtype=np.float32)
        output_buf = cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=output)
        buffers = {"input": input_buf, "filter": filter_buf, "output": output_buf}
        kernel(
            queue,
            CONV2D.global_size(variant, problem),
            variant.local_size,
            *CONV2D.arguments(variant, problem, buffers),
        )
        cl.enqueue_copy(queue, output, output_buf)
        queue.finish()
        error = float(np.abs(output - correlate_valid(image, filt)).max())
        if error > 1e-4:
            sys.stderr.write(f"error: wrong result, max error {error}\n")
        sys.stderr.flush()
    return 0


def _without_known_false_positives(section: str) -> str:
    """The section minus Oclgrind reports of the kind VECTOR_STORE_FALSE_POSITIVE names
    (a report: one line, then its indented detail lines)."""
    reports: list[list[str]] = []
    for line in section.splitlines():
        if reports and line[:1].isspace():
            reports[-1].append(line)
        else:
            reports.append([line])
    kept = ["\n".join(r) for r in reports]
    return "\n".join(r for r in kept if not all(marker in r for marker in VECTOR_STORE_FALSE_POSITIVE))


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))  # the autotune beside this script, as the child gets it
    try:
        cases()  # a knob value no valid config can take fails here, before any kernel runs
    except NoValidConfig as exc:
        print(f"checks/memory.py: {exc}", file=sys.stderr)
        return 1
    if not Path(ICD_LIBRARY).exists():
        print("checks/memory.py: Oclgrind is not installed (apt-get install oclgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as vendors:
        Path(vendors, "oclgrind.icd").write_text(ICD_LIBRARY + "\n")
        env = dict(
            os.environ,
            OCL_ICD_VENDORS=vendors,
            OCLGRIND_DATA_RACES="1",
            OCLGRIND_UNINITIALIZED="1",
            PYTHONPATH=str(root),
        )
        result = subprocess.run(
            [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True
        )
    if "platform: Oclgrind" not in result.stderr:
        print(result.stderr[-3000:], file=sys.stderr)
        print("checks/memory.py: the kernels did not run on Oclgrind", file=sys.stderr)
        return 1
    sections = result.stderr.split(MARKER)
    planted, sections = sections[1], sections[2:]
    if "Invalid read" not in planted:
        print(planted[:2000], file=sys.stderr)
        print("checks/memory.py: Oclgrind missed the planted out-of-bounds read", file=sys.stderr)
        return 1
    failures = [s.strip() for s in sections if any(p in _without_known_false_positives(s) for p in PROBLEMS)]
    checked = len(sections)
    if result.returncode != 0:
        print(result.stderr[-3000:], file=sys.stderr)
        print(f"checks/memory.py: the kernel runner failed (exit {result.returncode})", file=sys.stderr)
        return 1
    for failure in failures:
        print(failure[:2000], file=sys.stderr)
    print(
        f"{checked} kernels run under Oclgrind (after a planted invalid read it caught), "
        f"{len(failures)} with a reported problem"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(child() if "--child" in sys.argv else main())
