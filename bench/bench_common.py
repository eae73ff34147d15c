"""What the bench scripts share: reading `--config` arguments, choosing kernels to build
by family, width and rank, the roofline options and bound, the best stored convolution
configs of a device, the registers and spills NVIDIA's compiler reports for a kernel, and
wall times taken in interleaved rounds."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from autotune.families import KernelVariant
from autotune.families.conv2d import CONV2D

Key = TypeVar("Key")


def read_configs(texts: list[str]) -> list[dict]:
    """Each text is a JSON object or list of objects, or @file holding one."""
    configs: list[dict] = []
    for text in texts:
        data = json.loads(Path(text[1:]).read_text() if text.startswith("@") else text)
        configs += data if isinstance(data, list) else [data]
    return configs


def add_kernel_options(parser: Any, filter_widths: str) -> None:
    """The options that choose kernels to build: family, ranks, widths, configs, pixels."""
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--family", choices=["conv2d", "separable"], default="conv2d")
    parser.add_argument("--rank", default="1", help="ranks, for the separable family")
    parser.add_argument("--filter-width", default=filter_widths)
    parser.add_argument("--config", action="append", default=[], help="JSON object or @file (list ok)")
    parser.add_argument("--pixels", default="{}", help='problem fields, e.g. {"border": "mirror"}')


def chosen_kernels(args: Any, device_info: Any) -> Iterator[tuple[str, KernelVariant, Any]]:
    """(label, kernel, problem) for each width, rank and config the options name, on a
    4096x4096 output; a separable config the device cannot run is printed with its reason
    instead."""
    from autotune.families.conv2d import Conv2DProblem
    from autotune.families.conv2d.inputs import GPU_IMAGE, parse_filter_widths
    from autotune.families.separable import SEPARABLE, SeparableProblem

    pixels = json.loads(args.pixels)
    ranks = [int(rank) for rank in args.rank.split(",")] if args.family == "separable" else [None]
    for width in parse_filter_widths(args.filter_width):
        for rank in ranks:
            for config in read_configs(args.config):
                if rank is None:
                    problem = Conv2DProblem(width, *GPU_IMAGE, **pixels)
                    variant = CONV2D.render(config, problem)
                    c = variant.config
                    label = (
                        f"F={width} work {c['work_x']}x{c['work_y']} local {c['local_x']}x{c['local_y']} "
                        f"unroll {c['unroll']} vector {c['vector']}"
                    )
                    yield label, variant, problem
                    continue
                label = f"F={width} rank {rank} " + json.dumps(config, sort_keys=True, separators=(",", ":"))
                problem = SeparableProblem(width, rank, *GPU_IMAGE, **pixels)
                completed = SEPARABLE.space.complete(config)
                reasons = SEPARABLE.space.violations(completed, problem.key(), device_info)
                if reasons:
                    print(f"{label}: invalid: {reasons[0]}", flush=True)
                    continue
                yield label, SEPARABLE.render(completed, problem), problem


def tuned_configs(store: Any, device: Any, size: tuple[int, int]) -> dict[int, tuple[dict, str]]:
    """filter width -> (best config, driver it was tuned with) for float32 convolutions of
    this output size on the same device model and platform (any driver version). Configs
    written for another space than today's are left out (said on stderr)."""
    tuned: dict[int, tuple[dict, str]] = {}
    for best, stored_on, problem in store.best(family=CONV2D.name):
        fields = problem.fields
        if (fields["out_width"], fields["out_height"]) != tuple(size) or fields.get("dtype") != "float32":
            continue
        if fields.get("border", "none") != "none" or fields.get("out_dtype", "float32") != "float32":
            continue
        if (stored_on.platform, stored_on.name) != (device.platform, device.name):
            continue
        config = CONV2D.read_config(best.config)
        if config is None:
            print(
                f"F={fields['filter_width']}: stored config is from another space; skipped: {best.config}",
                file=sys.stderr,
            )
            continue
        tuned[fields["filter_width"]] = (config, stored_on.driver)
    return tuned


def nvidia_resources(cl: Any, context: Any, device: Any, variant: KernelVariant) -> tuple[str, str]:
    """(registers, spill store bytes) from `-cl-nv-verbose`; "?" where the build log says
    nothing (another driver, or a build the driver answered from its cache)."""
    program = cl.Program(context, variant.source).build(options=[*variant.build_options, "-cl-nv-verbose"])
    log = program.get_build_info(device, cl.program_build_info.LOG)
    used = next((line for line in log.splitlines() if "Used" in line), "")
    spill = next((line for line in log.splitlines() if "spill stores" in line), "")
    registers = used.split("Used")[1].split("registers")[0].strip() if "Used" in used else "?"
    stores = spill.split("bytes stack frame,")[-1].split("bytes spill stores")[0].strip() if spill else "?"
    return registers, stores


def add_roofline_options(parser: Any) -> None:
    """--bandwidth and --peak: the ceilings a kernel's time is weighed against (the H200's,
    measured there, by default)."""
    parser.add_argument("--bandwidth", type=float, default=4.25e12, help="copy bandwidth, bytes/s")
    parser.add_argument("--peak", type=float, default=63e12, help="FP32 FMA peak, flop/s")


def roofline_ms(problem: Any, args: Any) -> float:
    """The least time the problem can take: max(bytes / bandwidth, flops / peak), in ms."""
    return max(problem.min_bytes / args.bandwidth, problem.flops / args.peak) * 1e3


class TreeWorkers:
    """One process per source tree, each running `script --worker ...` with that tree on
    PYTHONPATH and answering one JSON line per request line: a change timed beside the
    code before it in one run, the trees taking turns so both see the same load."""

    def __init__(self, script: str, trees: dict[str, Path], arguments: list[str]) -> None:
        self.processes: dict[str, subprocess.Popen] = {}
        for name, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=str(tree))
            command = [sys.executable, str(Path(script).resolve()), "--worker", *arguments]
            self.processes[name] = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
            )
        self.revisions = {name: tree_revision(tree) for name, tree in trees.items()}

    def ask(self, name: str, request: dict[str, Any]) -> dict[str, Any]:
        process = self.processes[name]
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        line = process.stdout.readline()
        if not line:
            raise SystemExit(f"the {name} worker ended (its error is above)")
        return json.loads(line)

    def close(self) -> None:
        for process in self.processes.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait()


def tree_revision(tree: Path) -> str:
    """The tree's commit, or its folder's name for files without git."""
    result = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return result.stdout.strip() or tree.name


def interleaved_medians(
    calls: Mapping[Key, Callable[[], object]], rounds: int, repeats: int
) -> dict[Key, float]:
    """Wall ms of each call: the median of `repeats` calls in a round, then the median of
    `rounds` rounds that take the calls in turn, so a load that comes and goes falls on
    all of them alike."""
    per_round: dict[Key, list[float]] = {key: [] for key in calls}
    for _ in range(rounds):
        for key, call in calls.items():
            samples = []
            for _ in range(repeats):
                start = time.perf_counter()
                call()
                samples.append((time.perf_counter() - start) * 1e3)
            per_round[key].append(statistics.median(samples))
    return {key: statistics.median(times) for key, times in per_round.items()}
