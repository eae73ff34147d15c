"""Does a measurement read slow when the GPU idled before it (as it does while a search
compiles its first batch)? Times one separable kernel (the `walk_prefetch` preset, F = 33,
rank 1, 4096x4096, taps in `__constant`) right after compiling, right after another
measurement, and after 5 and 20 s idle, with the default timing policy and a long one.

    python3 bench/measure_after_idle.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.evaluate import Evaluator  # noqa: E402
from autotune.families.separable import SEPARABLE, SeparableProblem  # noqa: E402
from autotune.outcomes import TimingPolicy  # noqa: E402

STEPS = (
    ("after compile", 0),
    ("right after", 0),
    ("after 5 s idle", 5),
    ("right after", 0),
    ("after 20 s idle", 20),
    ("right after", 0),
)


def main() -> None:
    preset = SEPARABLE.space.presets["walk_prefetch"].config
    problem = SeparableProblem(33, 1, 4096, 4096, "float32", seed=1)
    variant = SEPARABLE.render({**preset, "tap_space": "constant"}, problem)
    policies = {"default": TimingPolicy(), "long": TimingPolicy(max_runs=20000, min_time_s=0.5)}
    for name, policy in policies.items():
        with Evaluator(0, SEPARABLE, policy=policy) as evaluator:
            for label, idle_s in STEPS:
                time.sleep(idle_s)
                m = evaluator.measure(variant, problem)
                times = f"median {m.time_ms:.4f} min {m.min_ms:.4f} runs {m.runs}"
                print(f"{name:8s} {label:16s} {times}", flush=True)


if __name__ == "__main__":
    main()
