#!/usr/bin/env python3
"""Random problems and random valid configs of a kernel family, each verified by the
measuring worker against the family's float64 reference (the check every search trial
gets), on awkward sizes: a config that verifies at the size a search tuned it for may
still be wrong at another, and `convolve()` runs tuned configs at every size.

    python checks/fuzz_kernels.py --seeds 0-199 [--device 0] [--family conv2d|separable] [--json OUT]

Prints one line for each draw that did not verify (wrong result, launch error, crash, or a
compile error of a config the rules accept) with the problem and config to reproduce it,
then counts by status. Exits 1 if any draw gave a wrong result or crashed. Not part of the
test suite (a few hundred draws take minutes on PoCL); the suite keeps seeded samples.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from typing import Any

from autotune.evaluate import Evaluator
from autotune.families import get_family
from autotune.families.image import PIXEL_TYPES
from autotune.outcomes import Status, TimingPolicy

ONCE = TimingPolicy(min_runs=1, min_time_s=0.0, max_runs=1, max_time_s=0.5)
SIZES = (1, 2, 3, 5, 7, 13, 17, 31, 64, 67, 130, 257)
WIDTHS = (1, 2, 3, 4, 5, 6, 7, 9, 11, 16, 17, 25, 33)
BORDERS = ("none", "constant", "replicate", "reflect", "mirror", "wrap")
BAD = (Status.WRONG_RESULT, Status.CRASHED, Status.LAUNCH_ERROR, Status.TIMEOUT)


def seeds(text: str) -> range:
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


def draw_problem(family: Any, rng: random.Random) -> Any:
    """A problem with its optional fields drawn, drawn again until the family takes it."""
    while True:
        dtype = rng.choice(list(PIXEL_TYPES))
        border = rng.choice(BORDERS)
        width = rng.choice(WIDTHS)
        key: dict[str, Any] = {
            "filter_width": width,
            "out_width": rng.choice(SIZES),
            "out_height": rng.choice(SIZES),
            "dtype": dtype,
            "out_dtype": rng.choice([dtype, "float32"]),
            "border": border,
        }
        if border != "none":
            key["anchor"] = rng.choice([-1, -1, rng.randrange(width)])
        if family.name == "conv2d":
            key["channels"] = rng.choice([1, 1, 2, 3, 4])
            key["frames"] = rng.choice([1, 1, 1, 2, 3])
            height = rng.choice([0, 0, 1, 2, 3, 5, 8])
            key["filter_height"] = height
            if border != "none" and height:
                key["anchor_y"] = rng.choice([-1, rng.randrange(height)])
        else:
            key["rank"] = rng.choice([1, 1, 2, 3])
        try:
            return family.problem(key, seed=rng.randrange(1000))
        except Exception:  # noqa: BLE001 - a combination the family refuses: draw again
            continue


def draw_config(family: Any, problem: Any, device: Any, rng: random.Random) -> dict | None:
    """Uniform over the live values until one is valid; where the rules leave few valid
    points (the separable family's), a random walk of one-knob moves from a valid preset."""
    live = family.space.live_values(problem.key(), device)
    for _ in range(300):
        config = {name: rng.choice(values) for name, values in live.items()}
        if not family.violations(config, problem, device):
            return config
    presets = family.presets_for(problem, device)
    if not presets:
        return None
    config = dict(rng.choice(presets))
    for _ in range(60):
        name = rng.choice(list(live))
        moved = {**config, name: rng.choice(live[name])}
        if not family.violations(moved, problem, device):
            config = moved
    return config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-99")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--family", default="conv2d")
    parser.add_argument("--json", help="write every draw's problem, config and status here")
    args = parser.parse_args()
    family = get_family(args.family)
    counts: Counter[str] = Counter()
    draws = []
    with Evaluator(args.device, family, policy=ONCE, timeout_s=60) as evaluator:
        for seed in seeds(args.seeds):
            rng = random.Random(seed)
            problem = draw_problem(family, rng)
            config = draw_config(family, problem, evaluator.device, rng)
            if config is None:
                counts["no valid config drawn"] += 1
                continue
            m = evaluator.evaluate(config, problem)
            counts[m.status.value] += 1
            draws.append({"seed": seed, "problem": problem.key(), "config": config, "status": m.status.value})
            if m.status in BAD or m.status == Status.COMPILE_ERROR:
                error = (m.error or "").strip().splitlines()
                print(
                    f"seed {seed}: {m.status.value}: {json.dumps(problem.key())} {json.dumps(config)}"
                    f" :: {error[-1][:300] if error else ''}",
                    flush=True,
                )
    print("counts:", dict(counts))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(draws, f, indent=1)
    return 1 if counts[Status.WRONG_RESULT.value] or counts[Status.CRASHED.value] else 0


if __name__ == "__main__":
    sys.exit(main())
