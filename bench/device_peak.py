#!/usr/bin/env python3
"""What this OpenCL device can do at most, measured on it: FP32 multiply-adds and a copy.

Kernel results are shown as a share of these, not of a datasheet: a 2-core VM's CPU
runs at whatever clock and share of its host it is given. The same measurement as the
report's roofline ceilings (`autotune/report/ceilings.py`: a float4 copy of 64 MiB and
an FMA loop of the device's native float vector, at least float8), best of `--rounds`.

    python bench/device_peak.py --device 0 [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys

from autotune.report.ceilings import Ceilings, measure


def best_of(device_index: int, rounds: int) -> Ceilings:
    """The highest of `rounds` measurements: other load only ever lowers them."""
    taken = [measure(device_index) for _ in range(rounds)]
    return Ceilings(
        bandwidth_gbs=max(c.bandwidth_gbs or 0.0 for c in taken),
        peak_gflops=max(c.peak_gflops or 0.0 for c in taken),
        source=f"best of {rounds}: {taken[0].source}",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    peak = best_of(args.device, args.rounds)
    print(f"FP32 FMA peak {peak.peak_gflops:.0f} GFLOP/s, copy {peak.bandwidth_gbs:.1f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
