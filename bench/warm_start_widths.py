#!/usr/bin/env python3
"""One search at one width, warm-started from the best configs of N other widths.

Compares how many tuned widths the warm start should draw from: run it once per N on
copies of the same database (which holds the other widths but not this one).

    python3 bench/warm_start_widths.py --db sqlite:///copy.db --filter-width 17 --widths 3 [--trials 80]
"""

from __future__ import annotations

import argparse
import sys

from autotune import tuner
from autotune.cli import main as cli_main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--filter-width", default="17")
    parser.add_argument("--widths", type=int, required=True, help="other widths to warm-start from")
    parser.add_argument("--trials", type=int, default=80)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args()
    tuner.WARM_START_WIDTHS = args.widths
    return cli_main(
        ["search", "--device", str(args.device), "--filter-width", args.filter_width,
         "--trials", str(args.trials), "--db", args.db, "--fresh"]
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
