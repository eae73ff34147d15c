"""How rare valid points of the separable space are on a GPU with the H200's limits, and
how often a repair from a CPU-only point finds none without the fallback to the
neighbours of known points (`repair_point`'s last step), and with one known point; and what
a repair costs (CPU seconds, median and largest) and how many knobs its point is from the start.

    python bench/repair_rare_points.py [--seeds 40]

The H200's limits are those `autotune devices` reports there (48 KB of `__local` memory,
work-groups of 1024, one float lane); no GPU is needed.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.devices import device_info  # noqa: E402
from autotune.families.separable import SEPARABLE, SeparableProblem  # noqa: E402
from autotune.search import Search, knobs_apart, repair_point  # noqa: E402

H200_LIMITS = {
    "type": "GPU",
    "local_mem_size": 49152,
    "max_work_group_size": 1024,
    "max_work_item_sizes": (1024, 1024, 64),
    "native_vector_width": 1,
    "max_constant_buffer_size": 65536,
}
# A point the gp sampler proposed in a real H200 search at F = 33, rank 2 (the streaming form).
FAR = {"row_columns": "transposed", "local_x": 16, "work_x": 64, "work_y": 2, "row_window": 8}
FAR |= {"stream_rows": 256, "column_vector": 4, "x_vector": 8}
# The CPU streaming preset's layout (what a CPU's winner lends a GPU search).
CPU_LAYOUT = {"stream_rows": 256, "x_vector": 16, "work_x": 64, "local_x": 1, "local_y": 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=40)
    args = parser.parse_args()
    device = dataclasses.replace(device_info(0), **H200_LIMITS)
    space = SEPARABLE.space
    for (width, rank), (name, far) in itertools.product(
        ((9, 1), (33, 1), (33, 2)), (("a gp proposal", FAR), ("the CPU layout", CPU_LAYOUT))
    ):
        problem = SeparableProblem(width, rank, 4096, 4096, "float32")

        def valid(config, problem=problem):
            return not SEPARABLE.violations(config, problem, device)

        def violations(config, problem=problem):
            return len(SEPARABLE.violations(config, problem, device))

        draws = random.Random(0)
        hits = sum(valid({k: draws.choice(v.values) for k, v in space.knobs.items()}) for _ in range(20000))
        missed = with_known_missed = 0
        seconds, apart = [], []
        for seed in range(args.seeds):
            search = Search(space, "gp", seed, valid=valid, violations=violations)
            point = search._point(search.encode(space.complete(far)))
            # Nothing known: the repair's steps and draws alone (what it was before the fallback).
            started = time.process_time()
            alone = repair_point(
                point, search.sizes, search._usable, search.random, search._point_violations, lambda: []
            )
            seconds.append(time.process_time() - started)
            if alone is not None:
                apart.append(knobs_apart(alone, point))
            if alone is None:
                missed += 1
                again = Search(space, "gp", seed, valid=valid, violations=violations)
                again.in_flight.add(again._point(again.encode(space.presets["tiled"].config)))
                with_known_missed += again._repair(point) is None
        print(
            f"F = {width}, rank {rank}, from {name}: valid {hits} of 20000 random points; steps and draws "
            f"found nothing in {missed} of {args.seeds} repairs; with one known valid point, "
            f"{with_known_missed}; {statistics.median(seconds):.2f} / {max(seconds):.2f} s a repair; "
            f"{statistics.median(apart) if apart else '-'} knobs from the start (median), "
            f"{max(apart, default='-')} at most",
            flush=True,
        )


if __name__ == "__main__":
    main()
