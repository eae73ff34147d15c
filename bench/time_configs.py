#!/usr/bin/env python3
"""Time chosen configurations side by side with the seed presets, per filter width.

Usage:
    python bench/time_configs.py --device 0 --filter-width 3,9,17 \
        --config '{"work_x": 4, "work_y": 4}' --config @more.json [--presets] \
        [--pixels '{"dtype": "uint8", "out_dtype": "uint8"}' --pixels '{}' ...]
    python bench/time_configs.py --family separable --rank 1,2 --filter-width 17,33 --config ...

`--compilers N` builds the variants in N processes ahead of timing them (a GPU whose
driver takes seconds per kernel); each is still timed alone, in the order listed.

`--native-vector-width 8` lets a GPU (which reports 1) time `x_vector` configs, which the
device rule otherwise keeps off it.

Each --pixels names one problem kind (its fields beside the width and size); several are
timed side by side, kind after kind for every config, in one run.

`--winners FILE` (repeatable) adds, at each width, the winner a search reported there
(`autotune search --json` output): two searches' winners side by side on one machine.

`--rounds N` times the whole list N times over, config after config each round, and
reports each config's median of its N times (the lower middle one for an even N; min ms:
the fastest single launch of all its rounds): differences of a few percent between configs
are then not the drift of one moment of the machine. `--together` times each problem's configs
in turns of a few runs each within each round (a GPU's speed moves between levels a few percent
apart for seconds at a time; kernels timed in turn see the same levels).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from pathlib import Path

from autotune.compiler import CompilePool
from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families import KernelVariant, get_family
from autotune.families.conv2d.inputs import image_size, parse_filter_widths
from autotune.outcomes import Measurement


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--family", default="conv2d")
    parser.add_argument("--rank", default="1", help="ranks, for the separable family")
    parser.add_argument("--filter-width", default="3,9,17")
    parser.add_argument("--image-size", default=None, help="output WxH")
    parser.add_argument("--config", action="append", default=[], help="JSON object or @file (list ok)")
    parser.add_argument(
        "--pixels",
        action="append",
        default=None,
        help='problem fields, e.g. {"border": "mirror"} (repeatable)',
    )
    parser.add_argument("--presets", action="store_true", help="time the seed presets too")
    parser.add_argument(
        "--winners",
        action="append",
        default=[],
        help="a search's JSON output (autotune search --json): its winner at each width",
    )
    parser.add_argument(
        "--native-vector-width",
        type=int,
        default=None,
        help="take the device's native float vector as this wide (probes configs its rules keep out)",
    )
    parser.add_argument("--compilers", type=int, default=0, help="compile ahead in this many processes")
    parser.add_argument("--rounds", type=int, default=1, help="time the list this many times, interleaved")
    parser.add_argument(
        "--together",
        action="store_true",
        help="each round, time a problem's configs in turns of a few runs each (as the final re-time does)",
    )
    args = parser.parse_args()

    family = get_family(args.family)
    ranks = [int(r) for r in args.rank.split(",")]
    device = device_info(args.device)
    widths = parse_filter_widths(args.filter_width)
    size = image_size(args.image_size, device)
    configs: list[tuple[str, dict]] = []
    for text in args.config:
        data = json.loads(Path(text[1:]).read_text() if text.startswith("@") else text)
        for config in data if isinstance(data, list) else [data]:
            configs.append((json.dumps(config, separators=(",", ":")), config))
    with Evaluator(args.device, family) as evaluator:
        if args.native_vector_width is not None:
            evaluator.device = dataclasses.replace(
                evaluator.device, native_vector_width=args.native_vector_width
            )
        if args.presets:
            configs = [(name, p.config) for name, p in family.space.presets.items()] + configs
        print(f"{device.name}, {size[0]}x{size[1]} output")
        print("| F | pixels | config | status | median ms | min ms | GFLOP/s | GB/s | compile ms |")
        print("|---|---|---|---|---|---|---|---|---|")
        kinds = [json.loads(text) for text in args.pixels or ["{}"]]
        takes_rank = "rank" in {f.name for f in dataclasses.fields(family.problem_type)}
        cases = []
        winners = [_winners(Path(path)) for path in args.winners]
        for width in widths:
            for rank in ranks if takes_rank else [None]:
                at_width = [found[width] for found in winners if width in found]
                for label, config in configs + at_width:
                    for fields in kinds:
                        shape = dict(zip(family.problem_type.size_fields, size, strict=True))
                        extra = {} if rank is None else {"rank": rank}
                        problem = family.problem_type(filter_width=width, **shape, **extra, **fields)
                        cases.append((label, config, fields, problem))
        with contextlib.ExitStack() as stack:
            pool = stack.enter_context(CompilePool(args.device, args.compilers)) if args.compilers else None
            variants = [evaluator.render(config, problem) for _, config, _, problem in cases]
            # every build submitted before the first measurement: compiled ahead
            ahead = [pool.submit(v) if pool and isinstance(v, KernelVariant) else None for v in variants]
            times_by_case: list[list[Measurement]] = [[] for _ in cases]
            last = max(1, args.rounds) - 1
            if args.together:
                _rounds_together(evaluator, cases, ahead, times_by_case, last + 1)
                for times, case in zip(times_by_case, cases, strict=True):
                    label, _, fields, problem = case
                    _report(_median_of(times), problem, label, fields)
                return 0
            for round_index in range(last + 1):
                for times, variant, compiled, case in zip(times_by_case, variants, ahead, cases, strict=True):
                    label, _, fields, problem = case
                    if isinstance(variant, KernelVariant) and (not times or times[-1].ok):
                        times.append(evaluator.measure(variant, problem, compiled))
                    elif not times:
                        times.append(variant)  # not valid here: says why
                    if round_index == last:  # each row printed as soon as it is known
                        _report(_median_of(times), problem, label, fields)
    return 0


def _rounds_together(evaluator, cases, ahead, times_by_case, rounds: int) -> None:
    """Each round, the configs of each problem timed in turns of a few runs each
    (`Evaluator.measure_together`), one config later each round; a failed config is not
    timed again."""
    by_problem: dict = {}
    for i, (_, _, _, problem) in enumerate(cases):
        by_problem.setdefault(problem, []).append(i)
    for round_index in range(rounds):
        for problem, indices in by_problem.items():
            turn = indices[round_index % len(indices) :] + indices[: round_index % len(indices)]
            turn = [i for i in turn if not times_by_case[i] or times_by_case[i][-1].ok]
            configs = [cases[i][1] for i in turn]
            measured = evaluator.measure_together(configs, problem, [ahead[i] for i in turn])
            for i, m in zip(turn, measured, strict=True):
                times_by_case[i].append(m)


def _winners(path: Path) -> dict[int, tuple[str, dict]]:
    """Each width's winning config in a search's JSON output, labelled by the file."""
    results = json.loads(path.read_text())["data"]["results"]
    return {r["filter_width"]: (f"{path.name} winner", r["config"]) for r in results if r.get("config")}


def _median_of(times: list[Measurement]) -> Measurement:
    """One measurement standing for several rounds': the median time, the lowest as min."""
    if len(times) == 1 or not all(m.ok for m in times):
        return times[-1]
    ordered = sorted(times, key=lambda m: m.time_ms)
    median = ordered[(len(ordered) - 1) // 2]
    return dataclasses.replace(median, min_ms=min(m.min_ms for m in times))


def _report(m, problem, label: str, fields: dict) -> None:
    pixels = json.dumps(fields, separators=(",", ":"))
    rank = getattr(problem, "rank", None)
    width = problem.filter_width if rank is None else f"{problem.filter_width} r{rank}"
    if m.ok:
        gflops = problem.flops / (m.time_ms * 1e-3) / 1e9
        gbs = problem.min_bytes / (m.time_ms * 1e-3) / 1e9
        print(
            f"| {width} | {pixels} | {label} | ok | {m.time_ms:.4f} | {m.min_ms:.4f} "
            f"| {gflops:.0f} | {gbs:.0f} | {m.compile_ms:.0f} |",
            flush=True,
        )
    else:
        error = (m.error or "").splitlines()[0][:100] if m.error else ""
        print(f"| {width} | {pixels} | {label} | {m.status.value}: {error} | | | | | |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
