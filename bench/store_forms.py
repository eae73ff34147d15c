#!/usr/bin/env python3
"""Aligned float2 stores written two ways: a pointer cast or vstore2, side by side.

Usage:
    python bench/store_forms.py --device 0 --db sqlite:///tuning.db [--filter-width 3,5,9,17]
    python bench/store_forms.py --device 0 --config '{"image_vector": 2, "work_x": 2}'

Takes each width's best config from the database, or one --config for every width
(it must have image_vector=2), renders it, rewrites its
`*(__global float2 *)p = (float2)(a, b)` stores as `vstore2`, and for both prints how
many vector and scalar global stores the device's binary holds (PTX on NVIDIA) and the
median time, in two interleaved rounds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys

from bench_common import tuned_configs

from autotune.devices import open_device
from autotune.families.conv2d import CONV2D, Conv2DProblem
from autotune.families.conv2d.inputs import parse_filter_widths, parse_image_size
from autotune.outcomes import TimingPolicy
from autotune.store import Store
from autotune.worker import Worker

CAST_STORE = re.compile(r"\*\(__global float2 \*\)\((output \+ [^;]*?)\) = \(float2\)\(([^;]*)\);")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--db", help="database URL: each width's best config")
    source.add_argument("--config", help="JSON object: this config for every width")
    parser.add_argument("--filter-width", default="3,5,9,17")
    parser.add_argument("--image-size", default="4096x4096")
    args = parser.parse_args()
    width, height = parse_image_size(args.image_size)
    return run(args.device, args.db, args.config, parse_filter_widths(args.filter_width), width, height)


def run(
    device_index: int, db: str | None, config: str | None, widths: list[int], width: int, height: int
) -> int:
    import pyopencl as cl

    device, cl_device = open_device(device_index)
    if config is not None:
        tuned = dict.fromkeys(widths, json.loads(config))
    else:
        tuned = {w: best for w, (best, _) in tuned_configs(Store(db), device, (width, height)).items()}
    context = cl.Context([cl_device])
    forms = {}
    for filter_width in widths:
        if filter_width not in tuned:
            print(f"F={filter_width}: not tuned on this device at {width}x{height}; skipped", file=sys.stderr)
            continue
        cast = CONV2D.render(tuned[filter_width], Conv2DProblem(filter_width, width, height))
        source = CAST_STORE.sub(r"vstore2((float2)(\2), 0, \1);", cast.source)
        if source == cast.source:
            print(f"F={filter_width}: the best config writes no float2 stores; skipped", file=sys.stderr)
            continue
        forms[filter_width] = {"cast": cast, "vstore2": dataclasses.replace(cast, source=source)}
        for name, variant in forms[filter_width].items():
            program = cl.Program(context, variant.source).build(options=list(variant.build_options))
            binary = program.get_info(cl.program_info.BINARIES)[0]
            text = binary.decode(errors="replace")
            print(
                f"F={filter_width} {name}: vector stores {text.count('st.global.v2.f32')}, "
                f"scalar stores {text.count('st.global.f32')}"
            )
    times: dict[tuple[int, str], list[float]] = {}
    policy = TimingPolicy(min_runs=50, min_time_s=0.3)
    with Worker(device_index) as worker:
        for _ in range(2):
            for filter_width, variants in forms.items():
                for name, variant in variants.items():
                    m = worker.measure(variant, Conv2DProblem(filter_width, width, height), policy)
                    times.setdefault((filter_width, name), []).append(m.time_ms if m.ok else float("nan"))
    print("| F | cast ms | vstore2 ms | vstore2 / cast |")
    print("|---|---|---|---|")
    for filter_width in forms:
        cast, vstore = min(times[(filter_width, "cast")]), min(times[(filter_width, "vstore2")])
        print(f"| {filter_width} | {cast:.4f} | {vstore:.4f} | {vstore / cast:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
