#!/usr/bin/env python3
"""Can a column-streaming separable kernel beat the fused tile kernels? A probe, not part
of the family. Each work-item owns XV adjacent output columns and walks down a strip of
S output rows, so the vertical halo (F-1 rows) is paid once per strip. For every input
row it computes the row-pass values of its columns from a window of XV+F-1 inputs, read
either straight from global memory (float4 loads through L1, next row prefetched into
registers) or from a ring of rows the work-group stages in __local memory (one barrier
per row, next row prefetched into registers). The column pass is either 'acc' (F running
output accumulators per column: each row-pass value times each column tap; the output
that received its last row is stored) or 'ring' (the last F row-pass values kept per
column and rank; one column dot product per row). The row loop is unrolled by F so that
every private index is static. Rank r: r row/column tap pairs summed into one output.

Every variant is checked against a float64 NumPy reference (row then column pass over
the whole image) before its time counts; compile failures, launch failures, register
spills (NVIDIA's `-cl-nv-verbose`) and wrong results are recorded as failed variants.
Times are OpenCL profiling events, median of --repeats launches after a warm-up, next to
a buffer-to-buffer copy of the output's bytes (read + write, about the kernel's own
traffic) timed the same way. Square 'valid' output, float32, taps compiled in as literals.

    python3 bench/separable_column_stream_probe.py --device 0 --cases 17r1,33r1,33r2 --out results_dir
    python3 bench/separable_column_stream_probe.py --device 0 --grid narrow --only 0,1 --cases 33r1,33r2
    python3 bench/separable_column_stream_probe.py --device 0 --size 256 --grid small   # CPU check

The F=33 variants take 10-25 s each to compile on NVIDIA's driver (far longer when many
build at once), so keep the grid short there (`--grid narrow`, `--only`) and mind `--seconds`.

Writes column_stream.json (every variant) and column_stream.md (best per case) to --out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyopencl as cl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autotune.devices import open_device  # noqa: E402
from autotune.report.ceilings import profiled_median_ms  # noqa: E402

Launch = Callable[[], cl.Event]

CASES = {"17r1": (17, 1), "33r1": (33, 1), "33r2": (33, 2), "17r2": (17, 2)}

# (form, stage, XV, S, LX) per grid; 'small' is what a CPU device can check in minutes.
GRIDS = {
    "small": [
        ("acc", "local", 4, 64, 64),
        ("acc", "global", 4, 64, 64),
        ("ring", "local", 4, 64, 64),
        ("ring", "global", 2, 64, 64),
        ("acc", "local", 8, 128, 32),
        ("acc", "global", 1, 128, 64),
        ("acc", "local", 2, 64, 128),
    ],
    "gpu": [
        *itertools.product(["acc"], ["local", "global"], [4], [64, 128, 256], [64, 128]),
        *itertools.product(["acc"], ["local", "global"], [2, 8], [128], [64]),
        *itertools.product(["ring"], ["local", "global"], [4], [128], [64]),
    ],
    # F=33: XV=4 holds 132+ accumulators and spills or sits at 255 registers; XV=2 does not.
    "narrow": [
        ("acc", "global", 2, 128, 64),
        ("acc", "local", 2, 128, 64),
        ("acc", "global", 2, 64, 64),
        ("acc", "global", 2, 256, 64),
    ],
}


@dataclass(frozen=True)
class Variant:
    form: str  # 'acc': F running accumulators; 'ring': last F row-pass values
    stage: str  # 'global': windows through L1; 'local': rows staged in __local
    xv: int  # output columns per work-item
    strip: int  # output rows per work-item (S)
    lx: int  # work-items per work-group (all across x)

    @property
    def label(self) -> str:
        return f"{self.form}/{self.stage} XV={self.xv} S={self.strip} LX={self.lx}"


def literal(value: float) -> str:
    return float(value).hex() + "f"


def window_loads(target: str, base: str, count: int, xv: int, space: str) -> list[str]:
    """Statements that fill target[0..count) from `base` (a float pointer expression),
    with the widest vector loads the alignment of XV allows (base is XV-aligned)."""
    width = 4 if xv >= 4 else xv
    lines = []
    for q in range(-(-count // width)):
        if width == 1:
            lines.append(f"{target}[{q}] = {base}[{q}];")
            continue
        vector = f"float{width}"
        lines.append(f"{{ const {vector} u = *(({space} const {vector} *)({base}) + {q});")
        for c, name in enumerate("xyzw"[:width]):
            if q * width + c < count:
                lines.append(f"  {target}[{q * width + c}] = u.{name};")
        lines.append("}")
    return lines


def kernel_source(variant: Variant, row_taps: np.ndarray, column_taps: np.ndarray) -> str:
    """OpenCL C for one variant; taps are (rank, F) arrays, compiled in as literals."""
    rank, width = row_taps.shape
    xv, strip, lx = variant.xv, variant.strip, variant.lx
    rows = strip + width - 1  # input rows one strip walks
    span = xv + width - 1  # window of one work-item
    tile = lx * xv + width - 1  # one staged row of the work-group
    tile_pad = -(-(tile + 4) // 4) * 4
    staged = variant.stage == "local"
    out: list[str] = []
    emit = out.append
    emit(f"__kernel __attribute__((reqd_work_group_size({lx}, 1, 1)))")
    emit("void column_stream(__global const float *restrict input, __global float *restrict output,")
    emit("                   const int in_width, const int out_width)")
    emit("{")
    emit("    const int lid = get_local_id(0);")
    emit(f"    const int x0 = get_group_id(0) * {lx * xv};")
    emit(f"    const int xt = x0 + lid * {xv};")
    emit(f"    const int y0 = get_group_id(1) * {strip};")
    emit(f"    float w[{-(-span // 4) * 4}];")
    if staged:
        loads = -(-(tile // 4) // lx)  # float4 loads per work-item per staged row
        emit(f"    __local float4 ring4[4 * {tile_pad // 4}];")
        emit("    __local float *ring = (__local float *)ring4;")
        emit(f"    float4 pre[{loads}];")
        emit("    __global const float4 *src =")
        emit("        (__global const float4 *)(input + (size_t)y0 * in_width + x0);")
        emit("    const int pitch4 = in_width / 4;")

        def fetch(row: str) -> None:
            for q in range(loads):
                guard = f"if (lid + {q * lx} < {tile // 4}) " if (q + 1) * lx > tile // 4 else ""
                emit(f"    {guard}pre[{q}] = src[(size_t)({row}) * pitch4 + lid + {q * lx}];")

        def deposit(slot: str) -> None:
            for q in range(loads):
                guard = f"if (lid + {q * lx} < {tile // 4}) " if (q + 1) * lx > tile // 4 else ""
                emit(f"    {guard}ring4[({slot}) * {tile_pad // 4} + lid + {q * lx}] = pre[{q}];")

        fetch("0")
        deposit("0")
        fetch("1")
    else:
        emit(f"    float wn[{-(-span // 4) * 4}];")
        emit("    __global const float *src = input + (size_t)y0 * in_width + xt;")
        for line in window_loads("wn", "src", span, xv, "__global"):
            emit("    " + line)
    if variant.form == "acc":
        emit(f"    float acc[{width}][{xv}];")
        for j, x in itertools.product(range(width), range(xv)):
            emit(f"    acc[{j}][{x}] = 0.0f;")
    else:
        emit(f"    float hist[{rank}][{width}][{xv}];")
        for k, j, x in itertools.product(range(rank), range(width), range(xv)):
            emit(f"    hist[{k}][{j}][{x}] = 0.0f;")
    emit(f"    float rp[{rank}][{xv}];")
    emit(f"    __global float *dst = output + (size_t)y0 * out_width + xt - {width - 1} * out_width;")
    emit(f"    for (int base = 0; base < {rows}; base += {width}) {{")
    remainder = rows % width
    for p in range(width):
        if remainder and p == remainder:
            emit(f"    if (base + {p} >= {rows}) break;")
        emit(f"    {{ const int i = base + {p};")
        if staged:
            deposit("(i + 1) & 3")
            fetch(f"min(i + 2, {rows - 1})")
            emit("    barrier(CLK_LOCAL_MEM_FENCE);")
            for line in window_loads("w", f"(ring + (i & 3) * {tile_pad} + lid * {xv})", span, xv, "__local"):
                emit("    " + line)
        else:
            for s in range(span):
                emit(f"    w[{s}] = wn[{s}];")
            emit(f"    {{ __global const float *next = src + (size_t)min(i + 1, {rows - 1}) * in_width;")
            for line in window_loads("wn", "next", span, xv, "__global"):
                emit("    " + line)
            emit("    }")
        # Row pass: two partial sums per value to halve the dependent chain.
        for k in range(rank):
            for x in range(xv):
                halves = []
                for h in range(2):
                    terms = [f"{literal(row_taps[k, t])} * w[{x + t}]" for t in range(h, width, 2)]
                    chain = terms[0]
                    for term in terms[1:]:
                        chain = f"fma({term.split(' * ')[0]}, {term.split(' * ')[1]}, {chain})"
                    halves.append(chain)
                emit(f"    rp[{k}][{x}] = {halves[0]} + {halves[1]};")
        if variant.form == "acc":
            # Output row o = i - t gets tap t; its slot is o mod F = (p - t) mod F.
            for x in range(xv):
                for t in range(width):
                    slot = (p - t) % width
                    terms = [f"{literal(column_taps[k, t])} * rp[{k}][{x}]" for k in range(rank)]
                    if t == 0:
                        emit(f"    acc[{slot}][{x}] = {' + '.join(terms)};")
                    else:
                        for term in terms:
                            emit(f"    acc[{slot}][{x}] += {term};")
            done = (p + 1) % width
            values = [f"acc[{done}][{x}]" for x in range(xv)]
        else:
            for k in range(rank):
                for x in range(xv):
                    emit(f"    hist[{k}][{p}][{x}] = rp[{k}][{x}];")
            values = []
            for x in range(xv):
                parts = []
                for part in range(4):
                    terms = [
                        f"{literal(column_taps[k, t])} * hist[{k}][{(p + 1 + t) % width}][{x}]"
                        for t in range(part, width, 4)
                        for k in range(rank)
                    ]
                    if terms:
                        parts.append("(" + " + ".join(terms) + ")")
                emit(f"    const float o{x} = {' + '.join(parts)};")
                values.append(f"o{x}")
        emit(f"    if (i >= {width - 1}) {{")
        emit("        __global float *d = dst + (size_t)i * out_width;")
        if xv == 1:
            emit(f"        d[0] = {values[0]};")
        else:
            for q in range(0, xv, 4):
                n = min(4, xv)
                vector = ", ".join(values[q : q + n])
                emit(f"        *((__global float{n} *)d + {q // n}) = (float{n})({vector});")
        emit("    }")
        emit("    }")
    emit("    }")
    emit("}")
    return "#pragma OPENCL FP_CONTRACT ON\n" + "\n".join(out) + "\n"


def reference(image: np.ndarray, row_taps: np.ndarray, column_taps: np.ndarray) -> np.ndarray:
    """'valid' correlation with sum_k outer(column_taps[k], row_taps[k]) in float64."""
    rank, width = row_taps.shape
    height, columns = (n - width + 1 for n in image.shape)
    image64 = image.astype(np.float64)
    total = np.zeros((height, columns))
    for k in range(rank):
        rows = np.zeros((image.shape[0], columns))
        for t in range(width):
            rows += float(row_taps[k, t]) * image64[:, t : t + columns]
        for t in range(width):
            total += float(column_taps[k, t]) * rows[t : t + height]
    return total


def build(context: cl.Context, device: cl.Device, source: str, nvidia: bool) -> tuple[cl.Program, dict]:
    started = time.perf_counter()
    options = ["-cl-nv-verbose"] if nvidia else []
    program = cl.Program(context, source).build(options=options)
    log = program.get_build_info(device, cl.program_build_info.LOG)
    info: dict = {"compile_s": round(time.perf_counter() - started, 2)}
    used = re.search(r"Used (\d+) registers", log)
    spill = re.search(r"(\d+) bytes spill stores", log)
    info["registers"] = int(used.group(1)) if used else None
    info["spill_bytes"] = int(spill.group(1)) if spill else None
    return program, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--size", type=int, default=4096, help="output width and height")
    parser.add_argument("--cases", default="17r1,33r1,33r2", help=f"comma list of {', '.join(CASES)}")
    parser.add_argument("--grid", default="gpu", choices=sorted(GRIDS))
    parser.add_argument("--only", default="", help="comma list of variant indices in the grid")
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--seconds", type=float, default=400.0, help="no compile or timing starts after this")
    parser.add_argument("--jobs", type=int, default=8, help="parallel compiles (1 on CPU devices)")
    parser.add_argument("--out", default=".", help="folder for column_stream.json / .md")
    args = parser.parse_args()

    info, device = open_device(args.device)
    nvidia = "NVIDIA" in info.platform
    context = cl.Context([device])
    queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    size, flags = args.size, cl.mem_flags
    grid = [Variant(*v) for v in GRIDS[args.grid]]
    if args.only:
        grid = [grid[int(i)] for i in args.only.split(",")]
    print(f"{info.name} ({info.platform}, driver {info.driver_version}), {size}x{size} output", flush=True)

    copy_src = cl.Buffer(context, flags.READ_WRITE, size * size * 4)
    copy_dst = cl.Buffer(context, flags.READ_WRITE, size * size * 4)
    cl.enqueue_fill_buffer(queue, copy_src, np.float32(1), 0, size * size * 4).wait()
    copy_ms = profiled_median_ms(lambda: cl.enqueue_copy(queue, copy_dst, copy_src), args.repeats)
    print(f"copy of {size * size * 4 / 1e6:.1f} MB buffer to buffer: {copy_ms:.4f} ms", flush=True)

    results: list[dict] = []
    summary = {"device": info.name, "driver": info.driver_version, "size": size, "copy_ms": copy_ms}

    def save() -> None:
        (out_dir / "column_stream.json").write_text(json.dumps({**summary, "variants": results}, indent=1))

    jobs = args.jobs if nvidia else 1
    pool = ThreadPoolExecutor(max_workers=jobs)
    started = time.perf_counter()

    def compile_one(source: str) -> tuple[cl.Program | None, dict]:
        if time.perf_counter() - started > args.seconds:
            return None, {"status": "skipped (time cap)"}
        try:
            return build(context, device, source, nvidia)
        except Exception as failure:  # a failed variant, not a failed probe
            return None, {"status": "compile failed", "error": str(failure)[-400:]}

    # Every case's variants go to the compiler at once; cases are then checked and timed in order.
    problems = []
    for case in args.cases.split(","):
        width, rank = CASES[case]
        assert width % 4 == 1 and size % 4 == 0, "float4 rows: size + F - 1 must be a multiple of 4"
        rng = np.random.default_rng(width * 10 + rank)
        row_taps, column_taps = (rng.uniform(-1, 1, (rank, width)).astype(np.float32) for _ in range(2))
        usable = [
            v
            for v in grid
            if size % (v.lx * v.xv) == 0 and size % v.strip == 0 and v.lx <= info.max_work_group_size
        ]
        builds = [pool.submit(compile_one, kernel_source(v, row_taps, column_taps)) for v in usable]
        problems.append((case, rng, row_taps, column_taps, usable, builds))

    for case, rng, row_taps, column_taps, usable, builds in problems:
        width, rank = CASES[case]
        in_size = size + width - 1
        image = rng.uniform(-1, 1, (in_size, in_size)).astype(np.float32)
        expected = reference(image, row_taps, column_taps)
        full = sum(np.outer(column_taps[k], row_taps[k]).astype(np.float64) for k in range(rank))
        tolerance = 1e-4 * float(np.abs(full).sum())
        image_buffer = cl.Buffer(context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=image)
        out_buffer = cl.Buffer(context, flags.READ_WRITE, size * size * 4)
        for variant, future in zip(usable, builds, strict=True):
            program, built = future.result()
            row = {"case": case, "F": width, "rank": rank, **asdict(variant), **built}
            results.append(row)
            if program is None:
                print(f"  {case} {variant.label}: {row['status']}", flush=True)
                save()
                continue
            if row.get("spill_bytes"):
                row["status"] = "register spill"
                print(f"  {case} {variant.label}: spill {row['spill_bytes']} B", flush=True)
                save()
                continue
            if time.perf_counter() - started > args.seconds:
                row["status"] = "skipped (time cap)"
                continue
            kernel = program.column_stream
            global_size = (size // variant.xv, size // variant.strip)
            arguments = (image_buffer, out_buffer, np.int32(in_size), np.int32(size))
            try:
                cl.enqueue_fill_buffer(queue, out_buffer, np.float32(np.nan), 0, size * size * 4)
                kernel(queue, global_size, (variant.lx, 1), *arguments).wait()
                got = np.empty((size, size), np.float32)
                cl.enqueue_copy(queue, got, out_buffer).wait()
                error = float(np.nanmax(np.abs(got - expected))) if np.isfinite(got).all() else np.inf
                row["max_error"] = error
                if not error <= tolerance:
                    row["status"] = "wrong"
                    print(f"  {case} {variant.label}: wrong (max error {error:.3g})", flush=True)
                    save()
                    continue
                ms = profiled_median_ms(
                    lambda kernel=kernel, g=global_size, v=variant, a=arguments: kernel(
                        queue, g, (v.lx, 1), *a
                    ),
                    args.repeats,
                )
            except cl.Error as error:
                row["status"] = f"launch failed: {error}"[:200]
                save()
                continue
            row.update(status="ok", ms=ms, copy_ratio=ms / copy_ms)
            print(
                f"  {case} {variant.label}: {ms:.4f} ms ({ms / copy_ms:.2f}x copy), "
                f"{row.get('registers')} registers, compile {row['compile_s']} s",
                flush=True,
            )
            save()

    pool.shutdown(cancel_futures=True)

    lines = [
        f"{info.name}, driver {info.driver_version}, {size}x{size} float32 'valid' output; "
        f"copy {copy_ms:.4f} ms",
        "",
        "| F | rank | best ms | / copy | form | stage | XV | S | LX | registers | variants ok / tried |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in args.cases.split(","):
        rows = [r for r in results if r["case"] == case]
        ok = [r for r in rows if r.get("status") == "ok"]
        if not ok:
            lines.append(f"| {CASES[case][0]} | {CASES[case][1]} | none | | | | | | | | 0 / {len(rows)} |")
            continue
        b = min(ok, key=lambda r: r["ms"])
        lines.append(
            f"| {b['F']} | {b['rank']} | {b['ms']:.4f} | {b['copy_ratio']:.2f} | {b['form']} | {b['stage']} "
            f"| {b['xv']} | {b['strip']} | {b['lx']} | {b['registers']} | {len(ok)} / {len(rows)} |"
        )
    text = "\n".join(lines) + "\n"
    (out_dir / "column_stream.md").write_text(text)
    save()
    print(text)


if __name__ == "__main__":
    main()
