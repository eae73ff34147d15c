#!/usr/bin/env python3
"""Where does a uint8 -> uint8 'valid' filter of small width spend its time on a GPU? A
probe, not part of the family: a ladder of hand-written kernels beside the family's own.

The questions, each answered by one rung:
- `copy`: each work-item reads an output-sized tile of the input (uint loads from the
  row's 4-byte boundary, no halo) and writes it out: the floor for this launch shape (not
  checked).
- `bytes/builtin/builtin`: the family's way: one uchar load and one `convert_float` per
  input value, `convert_uchar4_sat_rte` per 4 outputs.
- `words/...`: aligned uint loads, the row's misalignment (a 'valid' input row is
  F - 1 bytes longer than the output row, so rows start at any byte) removed by one
  funnel shift per word; then each byte converted either by `convert_float` (`builtin`,
  a conversion instruction) or by its bits (`bits`: the byte ORed into the mantissa of
  2^23 and 2^23 subtracted: an integer op and an add, no conversion instruction).
- output `bits`: clamp to [0, 255] with fmin/fmax, add 2^23 (rounds half to even, as
  `_rte`), keep the low byte; four bytes packed into one uint store.
- `walk`: a work-item walks 4 or 16 tiles down, keeping the F - 1 rows that tiles share
  converted in registers (fewer loads and conversions); `prefetch` loads the next step's
  bytes before this step's arithmetic.
- `texture`: the input read through an image view of the same buffer (`image1d_buffer_t`,
  RGBA texels of UNORM_INT8: four bytes a fetch), so the texture unit turns bytes into
  floats (b / 255) and no conversion instruction is issued; the taps are scaled by 255
  (`unorm/builtin`), or left as they are and the outputs written through an image view
  of the output (`unorm/image`: the unit rounds and saturates them as well). Rows start
  at any byte; the probe's rows start at a byte known when it is written (the pitch and
  the tile's height make it so), so each value's texel and lane are fixed.
- `family`: the family's own kernels for four hand-picked shapes.

On NVIDIA GPUs conversion instructions issue at a fraction of the FMA rate, so a kernel
whose arithmetic is 9 multiply-adds an output can be bound by its conversions; the
ladder shows whether it is. Every filtering variant's output is compared with a float64
reference rounded the same way (at most 1 level off on at most 0.01% of outputs: float32
against float64 at half-way values) before its time counts.
Times are OpenCL profiling events, median of --repeats launches, the rounds interleaved.

    python3 bench/uint8_conversion_probe.py --device 0 --filter-width 3,5 --out DIR [--only copy,walk]
    python3 bench/uint8_conversion_probe.py --device 0 --size 256x128 --filter-width 3   # a CPU check
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyopencl as cl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autotune.devices import open_device  # noqa: E402
from autotune.families import get_family  # noqa: E402
from autotune.report.ceilings import profiled_median_ms  # noqa: E402

TWO_23 = "8388608.0f"
SLACK = 64  # bytes past the input a word load of the last tile may touch


def byte_of(word: str, index: int) -> str:
    """The expression of byte `index` (0-3) of a uint, as a uint."""
    return f"(({word} >> {8 * index}) & 0xFFu)" if index else f"({word} & 0xFFu)"


def float_of_byte(word: str, index: int, conversion: str) -> str:
    if conversion == "builtin":
        return f"convert_float(as_uchar4({word}).s{index})"
    return f"(as_float({byte_of(word, index)} | 0x4B000000u) - {TWO_23})"


INPUT_BUFFER = "__global const uchar *restrict input"
OUTPUT_BUFFER = "__global uchar *restrict output"


def kernel_head(
    work_x: int, rows: int, input_decl: str = INPUT_BUFFER, output_decl: str = OUTPUT_BUFFER
) -> list[str]:
    """The probe kernel's signature and the corner of its tile (`work_x` x `rows`); tiles
    past the output's edge return (the probe's sizes have none)."""
    return [
        f"__kernel void probe({input_decl}, {output_decl},",
        "                    const int in_width, const int out_width, const int out_height)",
        "{",
        f"    const int x0 = get_global_id(0) * {work_x};",
        f"    const int y0 = get_global_id(1) * {rows};",
        f"    if (x0 + {work_x} > out_width || y0 + {rows} > out_height) return;",
    ]


def accumulate_row(
    row: int, work_x: int, work_y: int, taps: np.ndarray, value: Callable[[int], str]
) -> list[str]:
    """The multiply-adds input row `row` of a tile adds to each output row it reaches;
    `value(k)` names the row's k-th converted input."""
    lines = []
    for out_row in range(work_y):
        tap_row = row - out_row
        if not 0 <= tap_row < taps.shape[0]:
            continue
        for tap in range(taps.shape[1]):
            weight = float(taps[tap_row, tap]).hex()
            for i in range(work_x):
                lines.append(
                    f"        acc_{out_row}_{i} = fma({weight}f, {value(i + tap)}, acc_{out_row}_{i});"
                )
    return lines


def kernel_source(
    filter_width: int, work_x: int, work_y: int, loads: str, conv_in: str, conv_out: str, taps: np.ndarray
) -> str:
    """One kernel of the ladder; every index is static (Python unrolls)."""
    span = work_x + filter_width - 1  # input bytes of a row a work-item uses
    words = (span + 3) // 4 + 1  # aligned words that cover them wherever the row starts
    lines = [
        *kernel_head(work_x, work_y),
    ]
    for j, i in itertools.product(range(work_y), range(work_x)):
        lines.append(f"    float acc_{j}_{i} = 0.0f;")
    for row in range(work_y + filter_width - 1):
        lines.append("    {")
        lines.append(f"        const int start = (y0 + {row}) * in_width + x0;")
        if loads == "bytes":
            for k in range(span):
                lines.append(f"        const float in_{k} = convert_float(input[start + {k}]);")
        else:
            lines.append("        __global const uint *base = (__global const uint *)(input + (start & ~3));")
            lines.append("        const uint shift = (uint)(start & 3) * 8u;")
            for w in range(words):
                lines.append(f"        const uint w_{w} = base[{w}];")
            for w in range((span + 3) // 4):
                # funnel shift: the aligned word starting at byte `start + 4w`
                lines.append(f"        const uint v_{w} = (uint)(upsample(w_{w + 1}, w_{w}) >> shift);")
            for k in range(span):
                lines.append(f"        const float in_{k} = {float_of_byte(f'v_{k // 4}', k % 4, conv_in)};")
        lines += accumulate_row(row, work_x, work_y, taps, lambda k: f"in_{k}")
        lines.append("    }")
    for j in range(work_y):
        lines.append(f"    __global uint *out_{j} = (__global uint *)(output + (y0 + {j}) * out_width + x0);")
        for q in range(work_x // 4):
            values = [f"acc_{j}_{4 * q + e}" for e in range(4)]
            if conv_out == "builtin":
                lines.append(
                    f"    out_{j}[{q}] = as_uint(convert_uchar4_sat_rte((float4)({', '.join(values)})));"
                )
            else:
                parts = []
                for e, value in enumerate(values):
                    bits = f"(as_uint(fmin(fmax({value}, 0.0f), 255.0f) + {TWO_23}) & 0xFFu)"
                    parts.append(f"({bits} << {8 * e})" if e else bits)
                lines.append(f"    out_{j}[{q}] = {' | '.join(parts)};")
    lines.append("}")
    return "\n".join(lines)


def walk_source(
    filter_width: int, work_x: int, work_y: int, steps: int, prefetch: bool, taps: np.ndarray
) -> str:
    """A work-item walks `steps` tiles down its column of tiles, keeping the last F - 1
    input rows (converted) in registers, so each step reads and converts `work_y` rows
    instead of `work_y + F - 1`. With `prefetch`, the next step's raw bytes are loaded
    before this step's arithmetic."""
    assert work_y >= filter_width - 1
    span, held = work_x + filter_width - 1, filter_width - 1
    lines = [
        *kernel_head(work_x, work_y * steps),
        "    __global const uchar *column = input + y0 * in_width + x0;",
    ]
    for h, k in itertools.product(range(held), range(span)):
        lines.append(f"    float held_{h}_{k} = convert_float(column[{h} * in_width + {k}]);")
    if prefetch:
        for n, k in itertools.product(range(work_y), range(span)):
            lines.append(f"    uchar raw_{n}_{k} = column[{held + n} * in_width + {k}];")
    lines.append(f"    for (int step = 0; step < {steps}; ++step) {{")
    lines.append(f"        __global const uchar *rows = column + step * {work_y} * in_width;")
    for j, i in itertools.product(range(work_y), range(work_x)):
        lines.append(f"        float acc_{j}_{i} = 0.0f;")
    for n, k in itertools.product(range(work_y), range(span)):
        source = f"raw_{n}_{k}" if prefetch else f"rows[{held + n} * in_width + {k}]"
        lines.append(f"        const float new_{n}_{k} = convert_float({source});")
    if prefetch:
        lines.append(f"        if (step + 1 < {steps}) {{")
        for n, k in itertools.product(range(work_y), range(span)):
            lines.append(f"            raw_{n}_{k} = rows[{work_y + held + n} * in_width + {k}];")
        lines.append("        }")
    for row in range(work_y + held):
        value = (
            (lambda k, row=row: f"held_{row}_{k}")
            if row < held
            else (lambda k, row=row: f"new_{row - held}_{k}")
        )
        lines += accumulate_row(row, work_x, work_y, taps, value)
    for j in range(work_y):
        lines.append(
            f"        __global uint *out_{j} = "
            f"(__global uint *)(output + (y0 + step * {work_y} + {j}) * out_width + x0);"
        )
        for q in range(work_x // 4):
            values = ", ".join(f"acc_{j}_{4 * q + e}" for e in range(4))
            lines.append(f"        out_{j}[{q}] = as_uint(convert_uchar4_sat_rte((float4)({values})));")
    for h, k in itertools.product(range(held), range(span)):
        lines.append(f"        held_{h}_{k} = new_{work_y - held + h}_{k};")
    lines.append("    }")
    lines.append("}")
    return "\n".join(lines)


def texture_source(
    filter_width: int, work_x: int, work_y: int, in_width: int, conv_out: str, taps: np.ndarray
) -> str:
    """A tile read through RGBA UNORM_INT8 texels of the input (the texture unit converts);
    each row's first byte is at a lane fixed by the row (`in_width * work_y` is a multiple
    of 4). `conv_out`: "builtin" (taps scaled by 255, `convert_uchar4_sat_rte`) or "image"
    (taps as they are, `write_imagef` to a texel view of the output)."""
    assert (in_width * work_y) % 4 == 0 and work_x % 4 == 0
    span = work_x + filter_width - 1
    scaled = taps if conv_out == "image" else (taps.astype(np.float64) * 255).astype(np.float32)
    output_decl = "__write_only image1d_buffer_t output" if conv_out == "image" else OUTPUT_BUFFER
    lines = [*kernel_head(work_x, work_y, "__read_only image1d_buffer_t input", output_decl)]
    for j, i in itertools.product(range(work_y), range(work_x)):
        lines.append(f"    float acc_{j}_{i} = 0.0f;")
    for row in range(work_y + filter_width - 1):
        lane = (row * in_width) % 4  # the row's first byte within its texel
        lines.append("    {")
        lines.append(f"        const int texel = ((y0 + {row}) * in_width + x0 - {lane}) >> 2;")
        for t in range((lane + span + 3) // 4):
            lines.append(f"        const float4 t_{t} = read_imagef(input, texel + {t});")
        lines += accumulate_row(
            row, work_x, work_y, scaled, lambda k, lane=lane: f"t_{(lane + k) // 4}.s{(lane + k) % 4}"
        )
        lines.append("    }")
    for j in range(work_y):
        for q in range(work_x // 4):
            values = ", ".join(f"acc_{j}_{4 * q + e}" for e in range(4))
            if conv_out == "image":
                lines.append(
                    f"    write_imagef(output, ((y0 + {j}) * out_width + x0) / 4 + {q}, (float4)({values}));"
                )
            else:
                lines.append(
                    f"    *(__global uchar4 *)(output + (y0 + {j}) * out_width + x0 + {4 * q}) = "
                    f"convert_uchar4_sat_rte((float4)({values}));"
                )
    lines.append("}")
    return "\n".join(lines)


def copy_source(work_x: int, work_y: int) -> str:
    """Reads the uint words of a work-item's output tile from the input and writes them."""
    lines = [
        *kernel_head(work_x, work_y),
    ]
    for j in range(work_y):
        lines.append(
            f"    __global const uint *in_{j} = "
            f"(__global const uint *)(input + (((y0 + {j}) * in_width + x0) & ~3));"
        )
        lines.append(f"    __global uint *out_{j} = (__global uint *)(output + (y0 + {j}) * out_width + x0);")
        for q in range(work_x // 4):
            lines.append(f"    out_{j}[{q}] = in_{j}[{q}];")
    lines.append("}")
    return "\n".join(lines)


def reference(image: np.ndarray, taps: np.ndarray, out_shape: tuple[int, int]) -> np.ndarray:
    height, width = out_shape
    total = np.zeros(out_shape, dtype=np.float64)
    for r, c in itertools.product(range(taps.shape[0]), range(taps.shape[1])):
        total += float(taps[r, c]) * image[r : r + height, c : c + width]
    return np.clip(np.rint(total), 0, 255)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--size", default="4096x4096", help="output WIDTHxHEIGHT ('valid')")
    parser.add_argument("--filter-width", default="3,5")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="label prefixes to run, comma-separated (copy,walk,...)")
    parser.add_argument("--out", type=Path, default=None, help="write probe.json and probe.md here")
    args = parser.parse_args()
    out_width, out_height = (int(n) for n in args.size.split("x"))
    if out_width % 16 or out_height % 128:
        parser.error(
            "--size: the probe's kernels have no edge path; give a width divisible by 16, height by 128"
        )
    _, device = open_device(args.device)
    context = cl.Context([device])
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    family = get_family("conv2d")
    rng = np.random.default_rng(0)
    shapes = [(4, 4), (8, 4), (4, 8), (8, 8), (16, 4), (16, 2)]
    locals_for = {4: (64, 4), 8: (32, 8), 16: (32, 8)}
    ladder = [
        ("bytes", "builtin", "builtin"),
        ("words", "builtin", "builtin"),
        ("words", "bits", "builtin"),
        ("words", "builtin", "bits"),
        ("words", "bits", "bits"),
        ("bytes", "builtin", "bits"),
    ]
    family_configs = json.loads(
        (Path(__file__).parent / "configs" / "border_groups_valid_shapes.json").read_text()
    )
    results = []
    print(f"{device.name}, {out_width}x{out_height} 'valid' uint8 -> uint8")
    for width in (int(w) for w in args.filter_width.split(",")):
        in_width, in_height = out_width + width - 1, out_height + width - 1
        image = rng.integers(0, 256, size=(in_height, in_width), dtype=np.uint8)
        taps = (rng.random((width, width)) / (width * width / 2)).astype(np.float32)
        want = reference(image.astype(np.float64), taps, (out_height, out_width))
        source = cl.Buffer(context, cl.mem_flags.READ_ONLY, image.nbytes + SLACK)
        cl.enqueue_copy(queue, source, image)
        output = cl.Buffer(context, cl.mem_flags.READ_WRITE, out_width * out_height)
        filter_buffer = cl.Buffer(context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=taps)
        rgba_bytes = cl.ImageFormat(cl.channel_order.RGBA, cl.channel_type.UNORM_INT8)
        source_texels = cl.create_image(
            context, cl.mem_flags.READ_ONLY, rgba_bytes, shape=((image.nbytes + SLACK) // 4,), buffer=source
        )
        output_texels = cl.create_image(
            context, cl.mem_flags.WRITE_ONLY, rgba_bytes, shape=(out_width * out_height // 4,), buffer=output
        )
        cases = []  # (label, kernel, global, local, arguments, check)
        sizes = (np.int32(in_width), np.int32(out_width), np.int32(out_height))
        for work_x, work_y in shapes:
            local = (locals_for[work_x][0], 256 // locals_for[work_x][0])
            grid = (-(-out_width // work_x), -(-out_height // work_y))
            global_size = tuple(-(-n // size) * size for n, size in zip(grid, local, strict=True))
            label = f"copy {work_x}x{work_y}"
            cases.append(
                (label, copy_source(work_x, work_y), global_size, local, (source, output, *sizes), False)
            )
            for loads, conv_in, conv_out in ladder:
                label = f"{loads}/{conv_in}/{conv_out} {work_x}x{work_y}"
                text = kernel_source(width, work_x, work_y, loads, conv_in, conv_out, taps)
                cases.append((label, text, global_size, local, (source, output, *sizes), True))
            if (in_width * work_y) % 4 == 0:
                for conv_out, target in (("builtin", output), ("image", output_texels)):
                    label = f"texture/unorm/{conv_out} {work_x}x{work_y}"
                    text = texture_source(width, work_x, work_y, in_width, conv_out, taps)
                    arguments = (source_texels, target, *sizes)
                    cases.append((label, text, global_size, local, arguments, True))
        for (work_x, work_y), steps, prefetch in itertools.product(
            [(8, 4), (4, 4), (8, 8), (16, 4), (8, 2)], (4, 16), (False, True)
        ):
            if work_y < width - 1:
                continue
            local = (locals_for[work_x][0], 256 // locals_for[work_x][0])
            grid = (out_width // work_x, -(-out_height // (work_y * steps)))
            global_size = tuple(-(-n // size) * size for n, size in zip(grid, local, strict=True))
            label = f"walk {steps}{' prefetch' if prefetch else ''} {work_x}x{work_y}"
            text = walk_source(width, work_x, work_y, steps, prefetch, taps)
            cases.append((label, text, global_size, local, (source, output, *sizes), True))
        problem = family.problem_type(
            filter_width=width, out_width=out_width, out_height=out_height, dtype="uint8", out_dtype="uint8"
        )
        for config in family_configs:
            variant = family.render(config, problem, values=taps)
            global_size = family.global_size(variant, problem)
            arguments = (source, filter_buffer, output, *sizes, np.int32(width))
            label = f"family {config['local_x']}x{config['local_y']} of {config['work_x']}x{config['work_y']}"
            cases.append(
                (
                    label,
                    variant.source,
                    global_size,
                    variant.local_size,
                    arguments,
                    True,
                    variant.kernel_name,
                    variant.build_options,
                )
            )
        built = {}
        prefixes = tuple(filter(None, args.only.split(",")))
        for case in (c for c in cases if not prefixes or c[0].startswith(prefixes)):
            label, text, global_size, local, arguments, check = case[:6]
            name = case[6] if len(case) > 6 else "probe"
            options = list(case[7]) if len(case) > 7 else []
            try:
                kernel = cl.Kernel(cl.Program(context, text).build(options=options), name)
                kernel.set_args(*arguments)
            except cl.Error as error:
                results.append({"F": width, "variant": label, "status": f"build: {str(error)[:200]}"})
                continue
            cl.enqueue_fill_buffer(queue, output, np.uint8(0), 0, out_width * out_height).wait()
            cl.enqueue_nd_range_kernel(queue, kernel, global_size, local).wait()
            if check:
                got = np.empty((out_height, out_width), dtype=np.uint8)
                cl.enqueue_copy(queue, got, output)
                off = np.abs(got.astype(np.int32) - want.astype(np.int32))
                if off.max() > 1 or np.count_nonzero(off) > 1e-4 * off.size:
                    results.append(
                        {"F": width, "variant": label, "status": f"wrong: {np.count_nonzero(off)} off"}
                    )
                    continue
            built[label] = (kernel, global_size, local)
        times: dict[str, list[float]] = {label: [] for label in built}
        for _ in range(args.rounds):
            for label, (kernel, global_size, local) in built.items():
                launch = functools.partial(cl.enqueue_nd_range_kernel, queue, kernel, global_size, local)
                times[label].append(profiled_median_ms(launch, args.repeats))
        for label, samples in times.items():
            results.append({"F": width, "variant": label, "status": "ok", "ms": statistics.median(samples)})
        for row in sorted((r for r in results if r["F"] == width), key=lambda r: r.get("ms", 1e9)):
            shown = f"{row['ms']:.4f}" if "ms" in row else row["status"]
            print(f"| {width} | {row['variant']} | {shown} |", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "probe.json").write_text(json.dumps(results, indent=1))
        table = ["| F | variant | ms |", "|---|---|---|"]
        for row in sorted(results, key=lambda r: (r["F"], r.get("ms", 1e9))):
            table.append(
                f"| {row['F']} | {row['variant']} | {row['ms']:.4f} |"
                if "ms" in row
                else f"| {row['F']} | {row['variant']} | {row['status']} |"
            )
        (args.out / "probe.md").write_text("\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
