#!/usr/bin/env python3
"""How far apart are two measurements of the same kernel, and what around the measuring worker
moves them? Times a list of configs round after round (each round starts one config later),
under several conditions of the host, with the search's own worker and timing policy:

- `quiet`: nothing else runs;
- `compiling`: a pool of compile processes builds other variants all the while, as a search
  compiles ahead while the device times;
- `host-busy`: the parent process multiplies matrices on every core all the while, as a
  search's sampler fits its model while the device times;
- `both`;
- `together`: quiet, each round one measurement of all the configs in turns of a few runs each
  (`Evaluator.measure_together`, the final re-time's way).

    python3 bench/measure_repeatability.py --device 0 --filter-width 9,11 --rounds 5 \\
        --config @bench/configs/repeatability_f9_f11.json --compilers 15 --json DIR/repeat.json

Prints, per width, each config's medians round by round under each condition, their spread
(largest over smallest, minus 1), the spread of its time over the round's fastest (what ranks
kernels), and per condition the mean spreads and the mean offset from `quiet`; `--json` keeps
every launch's time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_common import read_configs  # noqa: E402

from autotune.compiler import CompilePool  # noqa: E402
from autotune.devices import device_info  # noqa: E402
from autotune.evaluate import Evaluator  # noqa: E402
from autotune.families import KernelVariant, get_family  # noqa: E402
from autotune.families.conv2d.inputs import image_size, parse_filter_widths  # noqa: E402

CONDITIONS = ("quiet", "compiling", "host-busy", "both", "together")


SHAPE = ("local_x", "local_y", "work_x", "work_y")


def _label(config: dict, first: dict) -> str:
    """The work shape, and the knobs where the config differs from the list's first."""
    local_x, local_y, work_x, work_y = (config.get(k) for k in SHAPE)
    extra = [f"{k}={v}" for k, v in config.items() if k not in SHAPE and first.get(k) != v]
    return f"{local_x}x{local_y} of {work_x}x{work_y}" + (" " + " ".join(extra) if extra else "")


@contextlib.contextmanager
def _compiling(pool: CompilePool, evaluator: Evaluator, problem_type, size, seed: int) -> Iterator[None]:
    """Keep every compile process busy with random valid variants of other widths."""
    family = evaluator.family
    rng = random.Random(seed)
    stop = threading.Event()

    def variants() -> Iterator[KernelVariant]:
        while not stop.is_set():
            config = {name: rng.choice(knob.values) for name, knob in family.space.knobs.items()}
            width = rng.choice((3, 5, 7, 13, 15, 19, 21, 25))
            shape = dict(zip(problem_type.size_fields, size, strict=True))
            variant = evaluator.render(config, problem_type(filter_width=width, **shape))
            if isinstance(variant, KernelVariant):
                yield variant

    def feed() -> None:
        pending = []
        for variant in variants():
            pending.append(pool.submit(variant))
            while len(pending) >= pool.size and not stop.is_set():
                pending = [f for f in pending if not f.done()]
                time.sleep(0.01)
        for future in pending:  # none left compiling into the next condition
            future.result()

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def _host_busy(threads: int) -> Iterator[None]:
    """Matrix products on `threads` threads (NumPy releases the GIL inside them)."""
    stop = threading.Event()

    def spin() -> None:
        a = np.random.default_rng(0).random((256, 256))
        while not stop.is_set():
            a = np.tanh(a @ a.T)

    workers = [threading.Thread(target=spin, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    try:
        yield
    finally:
        stop.set()
        for worker in workers:
            worker.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--family", default="conv2d")
    parser.add_argument("--filter-width", default="9")
    parser.add_argument("--image-size", default=None, help="output WxH")
    parser.add_argument("--config", action="append", default=[], help="JSON object or @file (list ok)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compilers", type=int, default=15, help="compile processes of `compiling`")
    parser.add_argument("--host-threads", type=int, default=16, help="threads of `host-busy`")
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--json", type=Path, default=None, help="write every launch's time here")
    args = parser.parse_args()

    family = get_family(args.family)
    device = device_info(args.device)
    size = image_size(args.image_size, device)
    conditions = [c for c in args.conditions.split(",") if c]
    unknown = set(conditions) - set(CONDITIONS)
    if unknown:
        parser.error(f"unknown condition(s) {sorted(unknown)}; choose from {', '.join(CONDITIONS)}")
    configs = read_configs(args.config)
    record: dict = {"device": device.name, "size": size, "rounds": args.rounds, "widths": {}}
    print(f"{device.name}, {size[0]}x{size[1]} output, {args.rounds} rounds a condition")
    with Evaluator(args.device, family) as evaluator, CompilePool(args.device, args.compilers) as pool:
        for width in parse_filter_widths(args.filter_width):
            shape = dict(zip(family.problem_type.size_fields, size, strict=True))
            problem = family.problem_type(filter_width=width, **shape)
            variants = [evaluator.render(config, problem) for config in configs]
            kept = [(c, v) for c, v in zip(configs, variants, strict=True) if isinstance(v, KernelVariant)]
            binaries = [pool.submit(v) for _, v in kept]
            for future in binaries:
                future.result()
            runs: dict[str, dict[str, list[dict]]] = {_label(c, configs[0]): {} for c, _ in kept}
            if len(runs) < len(kept):
                parser.error("two configs have the same label")
            for condition in conditions:
                around = contextlib.ExitStack()
                with around:
                    if condition in ("compiling", "both"):
                        around.enter_context(_compiling(pool, evaluator, family.problem_type, size, width))
                    if condition in ("host-busy", "both"):
                        around.enter_context(_host_busy(args.host_threads))
                    for r in range(args.rounds):
                        order = list(range(len(kept)))
                        order = order[r % len(order) :] + order[: r % len(order)]
                        if condition == "together":
                            measured = evaluator.measure_together(
                                [kept[i][0] for i in order], problem, [binaries[i] for i in order]
                            )
                        else:
                            measured = [evaluator.measure(kept[i][1], problem, binaries[i]) for i in order]
                        for position, (i, m) in enumerate(zip(order, measured, strict=True)):
                            entry = {"round": r, "position": position, "status": m.status.value}
                            if m.ok:
                                entry |= {"median": m.time_ms, "min": m.min_ms, "times": m.times_ms}
                            runs[_label(kept[i][0], configs[0])].setdefault(condition, []).append(entry)
            record["widths"][str(width)] = runs
            _report(width, runs, conditions)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record))
    return 0


def _fastest_by_round(runs: dict[str, dict[str, list[dict]]], condition: str) -> dict[int, float]:
    fastest: dict[int, float] = {}
    for by_condition in runs.values():
        for e in by_condition.get(condition, []):
            if "median" in e:
                fastest[e["round"]] = min(fastest.get(e["round"], e["median"]), e["median"])
    return fastest


def _report(width: int, runs: dict[str, dict[str, list[dict]]], conditions: list[str]) -> None:
    print(
        f"\nF = {width}: each config's median ms round by round; spread = largest / smallest - 1, "
        "of the medians and of each median over its round's fastest\n"
    )
    print("| config | condition | medians, round by round | spread | spread over the fastest | median |")
    print("|---|---|---|---|---|---|")
    spreads: dict[str, list[float]] = {c: [] for c in conditions}
    relative: dict[str, list[float]] = {c: [] for c in conditions}
    offsets: dict[str, list[float]] = {c: [] for c in conditions}
    fastest = {c: _fastest_by_round(runs, c) for c in conditions}
    for label, by_condition in runs.items():
        quiet_runs = [e["median"] for e in by_condition.get("quiet", []) if "median" in e]
        quiet = statistics.median(quiet_runs) if quiet_runs else None
        for condition in conditions:
            entries = [e for e in by_condition.get(condition, []) if "median" in e]
            if not entries:
                print(f"| {label} | {condition} | failed | | | |")
                continue
            medians = [e["median"] for e in entries]
            ratios = [e["median"] / fastest[condition][e["round"]] for e in entries]
            spread = max(medians) / min(medians) - 1
            spread_relative = max(ratios) / min(ratios) - 1
            middle = statistics.median(medians)
            spreads[condition].append(spread)
            relative[condition].append(spread_relative)
            if quiet is not None:
                offsets[condition].append(middle / quiet - 1)
            shown = " ".join(f"{t:.4f}" for t in medians)
            cells = f"{shown} | {spread:.1%} | {spread_relative:.1%} | {middle:.4f}"
            print(f"| {label} | {condition} | {cells} |")
    print("\n| condition | mean spread | largest | mean over the fastest | largest | offset from quiet |")
    print("|---|---|---|---|---|---|")
    for condition in conditions:
        if spreads[condition]:
            mean_offset = statistics.fmean(offsets[condition]) if offsets[condition] else float("nan")
            print(
                f"| {condition} | {statistics.fmean(spreads[condition]):.2%} | {max(spreads[condition]):.2%} "
                f"| {statistics.fmean(relative[condition]):.2%} | {max(relative[condition]):.2%} "
                f"| {mean_offset:+.2%} |"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
