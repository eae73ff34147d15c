#!/usr/bin/env python3
"""Check that kernels render byte for byte as at an earlier commit.

A knob added later must leave every earlier kernel as it was while it sits at its
default. This samples valid configs of the earlier commit's space, renders each there and
here, and compares the sources without their config comment line. Separable family
(seeded: about half tiled walks staged in vectors, a quarter streams, where the recent
knobs live, and a quarter anything valid) for a spread of filter widths, ranks, borders
and pixel types; direct family (`--family conv2d`): anything valid, with one, three and
four interleaved channels, pixel types and borders.

Usage:
    python bench/render_unchanged.py --base cda86e7 [--family separable] [--samples 500] [--seed 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run in the earlier tree (its autotune first on the path): sample, render, print JSON.
SAMPLE_AND_RENDER = r"""
import json, random, re, sys
import numpy as np
from autotune.families.separable.render import generate
from autotune.space import SearchSpace

samples, seed = int(sys.argv[1]), int(sys.argv[2])
space = SearchSpace.shipped("separable.toml")
rng = random.Random(seed)
rows = []
region = rng.random()  # which part of the space this sample is drawn from, kept until one is valid
while len(rows) < samples:
    config = {name: rng.choice(knob.values) for name, knob in space.knobs.items()}
    if region < 0.5:  # a tiled walk staged in vectors
        config.update(cache_input=True, row_loads=4, stage_vectors=True, passes=1, stream_rows=0, x_vector=1)
        config.update(column_vector=1, tiles_down=rng.choice([2, 4, 8, 16]))
    elif region < 0.75:  # a stream
        x_vector = rng.choice([4, 8, 16])
        config.update(stream_rows=rng.choice([16, 64]), x_vector=x_vector, passes=1, cache_input=False)
        config.update(work_x=min(64, x_vector * rng.choice([1, 2, 4])), row_columns="strided", row_window=0)
        config.update(work_y=1, tiles_down=1, row_loads=1, carry_rows=False, prefetch=False)
        config.update(stage_vectors=False)
        config.update(column_vector=1, local_x=rng.choice([1, 2]), local_y=rng.choice([1, 2]))
    config["output_conversion"] = "builtin"
    width, rank = rng.choice([3, 4, 5, 9, 17, 33]), rng.choice([1, 2, 3])
    border = rng.choice(["none", "none", "mirror", "constant", "wrap"])
    dtype = rng.choice(["float32", "uint8", "float16"])
    shape = {"filter_width": width, "rank": rank, "border": border, "dtype": dtype, "out_dtype": dtype}
    config = space.complete(config)
    if space.violations(config, shape):
        continue
    region = rng.random()
    taps = (np.ones((rank, width)), np.ones((rank, width)))
    source = generate(config, width, rank, space, taps, dtype=dtype, out_dtype=dtype, border=border,
                      anchor=width // 2).source
    rows.append([config, width, rank, border, dtype, re.sub(r" \* config:.*\n", "", source)])
json.dump(rows, sys.stdout)
"""


SAMPLE_AND_RENDER_CONV2D = r"""
import json, random, re, sys
import numpy as np
from autotune.families.conv2d import CONV2D, Conv2DProblem

samples, seed = int(sys.argv[1]), int(sys.argv[2])
KINDS = [{}, {"dtype": "uint8", "out_dtype": "uint8"}, {"channels": 3},
         {"dtype": "uint8", "out_dtype": "uint8", "border": "mirror", "channels": 3},
         {"dtype": "uint16", "out_dtype": "float32", "border": "wrap", "channels": 4}]
rng = random.Random(seed)
rows = []
while len(rows) < samples:
    config = {name: rng.choice(knob.values) for name, knob in CONV2D.space.knobs.items()}
    config["local_x"], config["local_y"] = min(config["local_x"], 16), min(config["local_y"], 16)
    width, kind = rng.choice([1, 3, 4, 5, 9]), rng.choice(KINDS)
    problem = Conv2DProblem(width, 37, 23, **kind)
    if CONV2D.violations(config, problem):
        continue
    source = CONV2D.render(config, problem, values=np.ones((width, width), np.float32)).source
    rows.append([config, width, kind, re.sub(r" \* config:.*\n", "", source)])
json.dump(rows, sys.stdout)
"""


def render_here(family: str, row: list) -> str:
    """The source this tree renders for a row the earlier tree rendered."""
    import re

    import numpy as np

    if family == "conv2d":
        from autotune.families.conv2d import CONV2D, Conv2DProblem

        config, width, kind, _ = row
        problem = Conv2DProblem(width, 37, 23, **kind)
        source = CONV2D.render(config, problem, values=np.ones((width, width), np.float32)).source
    else:
        from autotune.families.separable.render import generate
        from autotune.space import SearchSpace

        config, width, rank, border, dtype, _ = row
        taps = (np.ones((rank, width)), np.ones((rank, width)))
        space = SearchSpace.shipped("separable.toml")
        source = generate(
            config, width, rank, space, taps, dtype=dtype, out_dtype=dtype, border=border, anchor=width // 2
        ).source
    return re.sub(r" \* config:.*\n", "", source)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the earlier commit")
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--family", choices=["separable", "conv2d"], default="separable")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sampler = SAMPLE_AND_RENDER_CONV2D if args.family == "conv2d" else SAMPLE_AND_RENDER

    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch, "base")
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), args.base], check=True
        )
        try:
            child = subprocess.run(
                [sys.executable, "-c", sampler, str(args.samples), str(args.seed)],
                env=dict(os.environ, PYTHONPATH=str(tree)),
                cwd=tree,
                capture_output=True,
                text=True,
                check=True,
            )
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)
    rows = json.loads(child.stdout)
    differ = [row[:-1] for row in rows if render_here(args.family, row) != row[-1]]
    if args.family == "conv2d":
        kinds = sum(1 for row in rows if row[2].get("channels", 1) > 1)
        print(f"{len(rows)} configs of {args.base} ({kinds} of interleaved channels):", end=" ")
    else:
        walks = sum(1 for row in rows if row[0]["tiles_down"] > 1)
        streams = sum(1 for row in rows if row[0]["stream_rows"] > 0)
        print(f"{len(rows)} configs of {args.base} ({walks} walks, {streams} streams):", end=" ")
    print(f"{len(differ)} render differently")
    for row in differ[:5]:
        print(f"  {json.dumps(row)}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
