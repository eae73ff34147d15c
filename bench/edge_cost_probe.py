#!/usr/bin/env python3
"""Where does 'same' output with edge work-groups (`border_groups`) spend the time it
takes beyond 'valid' output of the same size? A probe: the family's kernels, launched
three ways per config and width, the rounds interleaved.

- `same`: the 'same' kernel as a host launches it (edge rows and tiles);
- `same tiles`: the same kernel without the edge rows in its launch (it then takes every
  row as a tile row): the interior tiles alone, the edge outputs left unwritten;
- `valid`: the config without edge groups on the 'valid' problem of that output size.

`same - same tiles` is what the edge rows cost; `same tiles - valid` what the interior
tiles of a 'same' kernel cost beyond 'valid' ones (their reads start ANCHOR_X values
before an aligned column). `same` and `valid` are checked against the float64 reference
(within the problem's tolerance), `same tiles` against `same` inside the interior box.
Times are OpenCL profiling events, median of --repeats launches.

    python3 bench/edge_cost_probe.py --device 0 --filter-width 3,5,9 \
        --config @bench/configs/border_groups_offset_same.json --out DIR
    python3 bench/edge_cost_probe.py --device 0 --size 96x64 --filter-width 3 --config ...  # a CPU check
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autotune.devices import open_device  # noqa: E402
from autotune.families import get_family  # noqa: E402
from autotune.families.conv2d import NO_EDGE_ITEMS  # noqa: E402
from autotune.families.conv2d.geometry import interior_box  # noqa: E402
from autotune.report.ceilings import profiled_median_ms  # noqa: E402

KINDS = ("same", "same tiles", "valid")


def shape_of(config: dict) -> str:
    """Work-group of tiles, image_vector, and the edge work-items' outputs (`adj`: adjacent)."""
    adjacent = " adj" if config.get("adjacent_edge_outputs") else ""
    per_item = f"{config.get('edge_outputs_per_item', 1)}{adjacent}"
    shape = f"{config['local_x']}x{config['local_y']} of {config['work_x']}x{config['work_y']}"
    return f"{shape}, {config.get('image_vector', 1)}, {per_item}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--size", default="4096x4096", help="output WIDTHxHEIGHT")
    parser.add_argument("--filter-width", default="3,5,9")
    parser.add_argument("--config", required=True, help="JSON list of configs with border_groups, or @file")
    parser.add_argument("--pixels", default='{"dtype": "uint8", "out_dtype": "uint8", "border": "mirror"}')
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="write edge_cost.json and edge_cost.md here")
    args = parser.parse_args()
    text = args.config
    configs = json.loads(Path(text[1:]).read_text() if text.startswith("@") else text)
    pixels = json.loads(args.pixels)
    out_width, out_height = (int(n) for n in args.size.split("x"))
    _, device = open_device(args.device)
    context = cl.Context([device])
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    family = get_family("conv2d")
    results = []
    print(f"{device.name}, {out_width}x{out_height}, {json.dumps(pixels)}")
    for width in (int(w) for w in args.filter_width.split(",")):
        same = family.problem(
            {"filter_width": width, "out_width": out_width, "out_height": out_height, **pixels}
        )
        valid = family.problem(
            {"filter_width": width, "out_width": out_width, "out_height": out_height}
            | {key: value for key, value in pixels.items() if key != "border"}
        )
        # The reference and tolerance once per problem (float64 over the whole image).
        expected = {
            kind: (problem.reference(), problem.tolerance())
            for kind, problem in (("same", same), ("valid", valid))
        }
        launches = {}  # (config index, kind) -> (kernel, global, local, status, buffers)
        for index, config in enumerate(configs):
            for kind, problem in (("same", same), ("valid", valid)):
                chosen = config if kind == "same" else {**config, "border_groups": False, **NO_EDGE_ITEMS}
                variant = family.render(chosen, problem, values=problem.taps())
                buffers = {
                    name: cl.Buffer(
                        context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=array
                    )
                    for name, array in problem.inputs().items()
                }
                want, tolerance = expected[kind]
                output = np.empty(want.shape, problem.output_dtype)
                buffers["output"] = cl.Buffer(context, cl.mem_flags.READ_WRITE, output.nbytes)
                program = cl.Program(context, variant.source).build(options=list(variant.build_options))
                kernel = cl.Kernel(program, variant.kernel_name)
                kernel.set_args(*family.arguments(variant, problem, buffers))
                full = family.global_size(variant, problem)
                cl.enqueue_nd_range_kernel(queue, kernel, full, variant.local_size).wait()
                cl.enqueue_copy(queue, output, buffers["output"])
                error = float(np.abs(output.astype(np.float64) - want).max())
                status = "ok" if error <= tolerance else f"wrong: {error:.3g} off"
                launches[index, kind] = (
                    kernel,
                    full,
                    variant.local_size,
                    status,
                    buffers,
                )  # buffers kept alive
                if kind != "same":
                    continue
                tiles = variant.global_size(problem.launch_extent)
                cl.enqueue_fill_buffer(queue, buffers["output"], np.uint8(0), 0, output.nbytes).wait()
                cl.enqueue_nd_range_kernel(queue, kernel, tiles, variant.local_size).wait()
                inner = np.empty_like(output)
                cl.enqueue_copy(queue, inner, buffers["output"])
                values = out_width * same.channels  # the box is in values along x
                box = interior_box(
                    values, out_height, tuple(variant.work_per_item[:2]), same.filter_shape,
                    (same.anchor_column, same.anchor_row), same.channels,
                )  # fmt: skip
                rows = slice(box.y0, box.y0 + box.height)
                columns = slice(box.x0, box.x0 + box.width)
                inner, output = inner.reshape(out_height, values), output.reshape(out_height, values)
                inside = inner[rows, columns]
                agrees = inside.size > 0 and np.array_equal(inside, output[rows, columns])
                launches[index, "same tiles"] = (
                    kernel,
                    tiles,
                    variant.local_size,
                    "ok" if agrees else "wrong",
                    buffers,
                )
        times: dict[tuple[int, str], list[float]] = {
            key: [] for key, launch in launches.items() if launch[3] == "ok"
        }
        for _ in range(args.rounds):
            for key in times:
                kernel, global_size, local = launches[key][:3]
                times[key].append(
                    profiled_median_ms(
                        lambda k=kernel, g=global_size, loc=local: cl.enqueue_nd_range_kernel(
                            queue, k, g, loc
                        ),
                        args.repeats,
                    )
                )
        for index, config in enumerate(configs):
            row = {"F": width, "config": config}
            for kind in KINDS:
                key = (index, kind)
                row[kind] = statistics.median(times[key]) if key in times else launches[key][3]
            results.append(row)
            cells = [f"{row[k]:.4f}" if isinstance(row[k], float) else str(row[k]) for k in KINDS]
            print(f"F={width} {shape_of(config)}: " + ", ".join(cells))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "edge_cost.json").write_text(json.dumps(results, indent=1))
        lines = [
            f"{device.name}, {out_width}x{out_height}, {json.dumps(pixels)}; medians of {args.rounds} rounds",
            "",
            "| F | work-group of outputs, image_vector, outputs an edge item | same ms | same tiles ms "
            "| valid ms | edge rows (same - tiles) | tiles / valid |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in results:
            cells = [row[kind] for kind in KINDS]
            if all(isinstance(cell, float) for cell in cells):
                extra = f"{cells[0] - cells[1]:.4f} | {cells[1] / cells[2]:.3f}"
            else:
                extra = "- | -"
            shown = " | ".join(f"{c:.4f}" if isinstance(c, float) else str(c) for c in cells)
            lines.append(f"| {row['F']} | {shape_of(row['config'])} | {shown} | {extra} |")
        (args.out / "edge_cost.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
