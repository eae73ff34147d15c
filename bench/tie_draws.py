#!/usr/bin/env python3
"""Which knob pairs `gp` takes as tied by the rules (`diagonal_moves`, `tied_ratios`), and what
finding them costs, with the draws of before (4,000, a count of 5) and of now
(`samplers.TIE_DRAWS`, `TIE_EXPECTED`): the conv2d space at each width and the separable
space at F = 9 with a GPU's limits (the H200's, no GPU needed; the rules as a search checks
them), and each replayed landscape (a point is valid when the landscape has it).

    python bench/tie_draws.py [--landscapes ../shared/landscapes/*.json.gz]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from repair_rare_points import H200_LIMITS  # noqa: E402

from autotune import samplers  # noqa: E402
from autotune.devices import device_info  # noqa: E402
from autotune.families.conv2d import CONV2D, Conv2DProblem  # noqa: E402
from autotune.families.separable import SEPARABLE, SeparableProblem  # noqa: E402
from autotune.replay import load  # noqa: E402
from autotune.search import Search  # noqa: E402

SETTINGS = ((4_000, 5.0), (samplers.TIE_DRAWS, samplers.TIE_EXPECTED))


def tied(search: Search) -> list[tuple[set[tuple[str, str]], float]]:
    """Per setting: the tied pairs by knob name, and the seconds finding them took."""
    sampler = search.gp
    assert sampler is not None
    sampler.prepare(search.distributions)
    found = []
    for draws, expected in SETTINGS:
        samplers.TIE_DRAWS, samplers.TIE_EXPECTED = draws, expected
        start = time.process_time()
        pairs = sampler._find_tied_pairs()
        spent = time.process_time() - start
        found.append(({(sampler.names[a], sampler.names[b]) for a, b in pairs}, spent))
    samplers.TIE_DRAWS, samplers.TIE_EXPECTED = SETTINGS[-1]
    return found


def row(label: str, found: list[tuple[set[tuple[str, str]], float]]) -> str:
    (before, before_s), (now, now_s) = found
    pairs = ", ".join("-".join(p) for p in sorted(before & now)) or "none"
    gone = ", ".join("-".join(p) for p in sorted(before - now)) or "-"
    new = ", ".join("-".join(p) for p in sorted(now - before)) or "-"
    return f"| {label} | {pairs} | {gone} | {new} | {before_s:.2f} / {now_s:.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--landscapes", nargs="*", default=sorted(glob.glob("../shared/landscapes/*.json.gz"))
    )
    args = parser.parse_args()
    (old_draws, old_count), (draws, count) = SETTINGS
    print(f"tied pairs with {old_draws} draws (count {old_count:g}) and {draws} (count {count:g})\n")
    print("| space | tied in both | only before | only now | seconds (CPU) before / now |")
    print("|---|---|---|---|---|")
    device = dataclasses.replace(device_info(0), **H200_LIMITS)
    cases = [
        (CONV2D, Conv2DProblem(width, 4096, 4096), f"conv2d F = {width}")
        for width in (3, 5, 7, 9, 11, 17, 33)
    ]
    cases.append((SEPARABLE, SeparableProblem(9, 1, 4096, 4096, "float32"), "separable F = 9, rank 1"))
    for family, problem, label in cases:
        space, key = family.space, problem.key()
        search = Search(
            space,
            "gp",
            0,
            valid=lambda config, space=space, key=key: not space.violations(config, key, device),
            live_values=space.live_values(key, device),
        )
        print(row(f"{label} (H200 limits)", tied(search)), flush=True)
    for path in args.landscapes:
        landscape = load(path)
        search = Search(
            landscape.space, "gp", 0, valid=lambda c, landscape=landscape: landscape.look_up(c)[0]
        )
        print(row(landscape.name, tied(search)), flush=True)


if __name__ == "__main__":
    main()
