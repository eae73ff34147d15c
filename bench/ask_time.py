"""How long a real search's `gp` asks take before any kernel runs: the first asks of a
search of the separable and conv2d spaces on a GPU with the H200's limits (start points,
repairs of invalid proposals, then model steps), each answered with a made-up time (a
hash of the config), so no GPU is needed. Prints each ask's seconds, their sum, and a
fingerprint of the points proposed: two trees that propose the same points print the
same fingerprint, so a change that should only be faster can be checked for that too.

    python bench/ask_time.py [--asks 30] [--cases separable:9:1,separable:33:2,conv2d:11]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from repair_rare_points import H200_LIMITS  # noqa: E402
from sampler_overhead import time_asks  # noqa: E402

from autotune.devices import device_info  # noqa: E402
from autotune.families import get_family  # noqa: E402
from autotune.search import Search  # noqa: E402


def made_up_time(config: dict) -> float:
    digest = hashlib.sha256(json.dumps(sorted(config.items()), default=str).encode()).digest()
    return 1.0 + int.from_bytes(digest[:4], "big") / 2**32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=30)
    parser.add_argument("--cases", default="separable:9:1,separable:33:2,conv2d:11,conv2d:3")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    device = dataclasses.replace(device_info(0), **H200_LIMITS)
    for case in args.cases.split(","):
        name, width, *rank = case.split(":")
        family = get_family(name)
        key = {"filter_width": int(width), "out_width": 4096, "out_height": 4096, "dtype": "float32"}
        if name == "separable":
            key["rank"] = int(rank[0]) if rank else 1
        problem = family.problem(key)

        def valid(config, problem=problem, family=family):
            return not family.violations(config, problem, device)

        def violations(config, problem=problem, family=family):
            return len(family.violations(config, problem, device))

        live = family.space.live_values(problem.key(), device)
        search = Search(family.space, "gp", args.seed, valid=valid, violations=violations, live_values=live)
        proposed = hashlib.sha256()

        def answer(config: dict, proposed=proposed) -> float:
            proposed.update(json.dumps(sorted(config.items()), default=str).encode())
            return made_up_time(config)

        seconds = time_asks(search, args.asks, answer, clock=time.perf_counter)
        first = sum(seconds[:10])
        print(
            f"{case}: {len(seconds)} asks, {sum(seconds):.2f} s (first 10: {first:.2f} s, "
            f"largest {max(seconds):.2f} s), proposals {proposed.hexdigest()[:12]}"
        )
        print("  " + " ".join(f"{s:.2f}" for s in seconds))


if __name__ == "__main__":
    main()
