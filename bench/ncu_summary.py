#!/usr/bin/env python3
"""Summarise Nsight Compute output of `bench/profile_kernels.py` runs: the metrics that say
what bounds a kernel, per kernel, and where a kernel's warps spend their time, by the parts
of the kernel between its barriers.

    ncu --set full --clock-control none -c 4 python3 bench/profile_kernels.py --cuda-only ... > details.txt
    ncu --set full --clock-control none -c 1 --page source --print-source sass --csv \
        python3 bench/profile_kernels.py --cuda-only ... > source.csv
    python3 bench/ncu_summary.py --details details.txt --source source.csv [--outputs 16777216]

With `--outputs N` (the outputs one launch writes), each source file's instruction mix is
also given per output: what a kernel issues beside its multiply-adds.
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import re
import sys
from pathlib import Path

# Details-page metrics by the name ncu prints (the first occurrence in a kernel's section).
METRICS = [
    "Duration",
    "Registers Per Thread",
    "Grid Size",
    "Block Size",
    "Waves Per SM",
    "Achieved Occupancy",
    "Active Warps Per Scheduler",
    "No Eligible",
    "Issue Slots Busy",
    "Executed Ipc Active",
    "Executed Instructions",
    "Warp Cycles Per Issued Instruction",
    "DRAM Throughput",
    "L1/TEX Hit Rate",
    "L2 Hit Rate",
    "Memory Throughput",
]
STALLS = [
    "Stall Short Scoreboard",
    "Stall Long Scoreboard",
    "Stall Wait",
    "Stall Barrier",
    "Stall Not Selected",
]


def details(text: str) -> list[dict[str, str]]:
    """Per profiled kernel: its launch line and the first value of each metric."""
    kernels: list[dict[str, str]] = []
    for line in text.splitlines():
        if re.match(r"^  \S.*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line):
            kernels.append({"launch": line.strip().split(", Context")[0]})
            continue
        if not kernels:
            continue
        for name in METRICS + STALLS:
            match = re.match(rf"^    {re.escape(name)}\s+(\S+)?\s+([\d.,]+)$", line)
            if match and name not in kernels[-1]:
                unit = match.group(1) or ""
                kernels[-1][name] = f"{match.group(2)} {unit}".strip()
    return kernels


def source_tables(text: str) -> list[list[dict[str, str]]]:
    """The SASS rows of an `ncu --page source --csv` output, one table per kernel profiled
    (what precedes them is the profiled script's own output)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith('"Address"')]
    if not starts:
        raise SystemExit("no source table in the file (was it written by ncu --page source --csv?)")
    tables = []
    for start, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        table = [line for line in lines[start:end] if not line.startswith('"Kernel Name"')]
        tables.append(list(csv.DictReader(io.StringIO("\n".join(table)))))
    return tables


def number(value: str) -> float:
    """A metric's value ("1,234" reads 1234); 0 where ncu wrote none."""
    try:
        return float(value.replace(",", ""))
    except ValueError:
        return 0.0


def opcode_of(row: dict[str, str]) -> str:
    """The opcode with its modifiers (`I2FP.F32.U32`), past a predicate."""
    words = row["Source"].split()
    return (words[1] if words and words[0].startswith("@") else words[0]) if words else ""


def mix(rows: list[dict[str, str]]) -> collections.Counter:
    """Warp instructions executed by opcode, modifiers kept."""
    counts: collections.Counter = collections.Counter()
    for row in rows:
        counts[opcode_of(row)] += number(row["Instructions Executed"])
    return counts


def regions(rows: list[dict[str, str]]) -> list[dict[str, float | str]]:
    """Per part of the kernel between barriers (in program order): warp samples (the
    share of sampled warp time), instructions executed, and the main opcodes."""
    parts: list[collections.Counter] = [collections.Counter()]
    for row in rows:
        opcode = opcode_of(row).split(".")[0]
        part = parts[-1]
        part["samples"] += number(row["# Samples"])
        part["instructions"] += number(row["Instructions Executed"])
        part["op " + opcode] += number(row["Instructions Executed"])
        for stall in ("stall_short_sb", "stall_long_sb", "stall_wait", "stall_barrier", "stall_selected"):
            part[stall] += number(row.get(stall, "0"))
        if opcode == "BAR":
            parts.append(collections.Counter())
    total_samples = sum(p["samples"] for p in parts) or 1.0
    total_instructions = sum(p["instructions"] for p in parts) or 1.0
    summary: list[dict[str, float | str]] = []
    for part in parts:
        ops = [(k[3:], v) for k, v in part.items() if k.startswith("op ") and v]
        ops.sort(key=lambda kv: -kv[1])
        summary.append(
            {
                "samples": part["samples"] / total_samples,
                "instructions": part["instructions"] / total_instructions,
                "selected": part["stall_selected"] / total_samples,
                "short_sb": part["stall_short_sb"] / total_samples,
                "barrier": part["stall_barrier"] / total_samples,
                "opcodes": ", ".join(f"{op} {count / 1e6:.2f}M" for op, count in ops[:6]),
            }
        )
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", type=Path, action="append", default=[], help="ncu details page text")
    parser.add_argument("--source", type=Path, action="append", default=[], help="ncu --page source CSV")
    parser.add_argument("--outputs", type=int, default=0, help="outputs a launch writes: the mix per output")
    args = parser.parse_args()
    for path in args.details:
        print(f"## {path.name}\n")
        kernels = details(path.read_text(errors="replace"))
        names = METRICS + STALLS
        print("| metric | " + " | ".join(f"kernel {n}" for n in range(len(kernels))) + " |")
        print("|---|" + "---|" * len(kernels))
        print("| launch | " + " | ".join(k["launch"] for k in kernels) + " |")
        for name in names:
            print(f"| {name} | " + " | ".join(k.get(name, "-") for k in kernels) + " |")
        print()
    for path in args.source:
        for kernel, rows in enumerate(source_tables(path.read_text(errors="replace"))):
            print_source(path.name, kernel, rows, args.outputs)
    return 0


def print_source(name: str, kernel: int, rows: list[dict[str, str]], outputs: int) -> None:
    """One kernel's parts between barriers and, given its outputs, its mix per output."""
    print(f"## {name}, kernel {kernel}: parts between barriers\n")
    print("| part | warp samples | instructions | issuing | short scoreboard | barrier | main opcodes |")
    print("|---|---|---|---|---|---|---|")
    for index, part in enumerate(regions(rows)):
        print(
            f"| {index} | {part['samples']:.3f} | {part['instructions']:.3f} | {part['selected']:.3f} "
            f"| {part['short_sb']:.3f} | {part['barrier']:.3f} | {part['opcodes']} |"
        )
    print()
    if outputs:
        counts = mix(rows)
        total = sum(counts.values()) * 32 / outputs
        print(f"Instructions per output (threads): {total:.1f}\n")
        print("| opcode | per output |\n|---|---|")
        for opcode, count in counts.most_common(12):
            print(f"| {opcode} | {count * 32 / outputs:.2f} |")
        print()


if __name__ == "__main__":
    sys.exit(main())
