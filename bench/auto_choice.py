#!/usr/bin/env python3
"""Is `algorithm="auto"` ever slower than the faster of the two forms it chooses from?
For each named filter: a `Convolver` with `algorithm="direct"`, `"separable"` and
`"auto"` on one NumPy image ('valid' output of --image-size), wall ms per call in
interleaved rounds, which form `auto` chose and its reason, in one run. With
`--device-arrays` the calls take and fill pyopencl arrays (100 calls queued, then one
wait, per call): what the choice is worth where the host's copies do not hide it.

    python bench/auto_choice.py --device 0 --filter gaussian:9,gaussian:17,gaussian:33 \
        --image-size 2048x2048 --db URL [--specialise] [--device-arrays] [--rounds 5] [--repeats 5]

Both forms must have been tuned in the database for that device, width and rank
(`autotune search` and `autotune search --family separable`); a form never measured
there is not guessed at, so `auto` then runs the direct form and says so.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import interleaved_medians  # noqa: E402

import autotune  # noqa: E402
from autotune.devices import device_info  # noqa: E402
from autotune.families.conv2d.inputs import parse_image_size  # noqa: E402
from autotune.filters import named_filter  # noqa: E402

FORMS = ("direct", "separable", "auto")
CHAIN = 100  # device-array calls queued per timed sample


def chained(convolver: autotune.Convolver, image: np.ndarray) -> Callable[[], None]:
    """CHAIN calls on device arrays without waiting, then one wait."""
    import pyopencl.array as cl_array

    on_device = cl_array.to_device(convolver.queue, image)
    out = convolver(on_device)

    def call() -> None:
        for _ in range(CHAIN):
            convolver(on_device, out=out, wait=False)
        convolver.queue.finish()

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument(
        "--filter", default="gaussian:9,gaussian:17,gaussian:33", help="comma list of named filters"
    )
    parser.add_argument("--image-size", default="2048x2048", help="output size WxH")
    parser.add_argument("--db", required=True)
    parser.add_argument("--specialise", action="store_true", help="kernels with the taps compiled in")
    parser.add_argument("--device-arrays", action="store_true", help="time calls on pyopencl arrays")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    out_width, out_height = parse_image_size(args.image_size)
    rng = np.random.default_rng(0)
    rows = []
    for name in args.filter.split(","):
        filt = named_filter(name).astype(np.float32)
        height, width = filt.shape
        image = rng.uniform(0, 1, (out_height + height - 1, out_width + width - 1)).astype(np.float32)
        convolvers = {
            form: autotune.Convolver(
                image.shape, filt, device=args.device, db=args.db, algorithm=form, specialise=args.specialise
            )
            for form in FORMS
        }
        results = {form: convolver(image) for form, convolver in convolvers.items()}
        for form in FORMS[1:]:
            np.testing.assert_allclose(results[form], results["direct"], rtol=0, atol=1e-4)
        calls = {form: (lambda c=c, image=image: c(image)) for form, c in convolvers.items()}
        if args.device_arrays:
            calls = {form: chained(c, image) for form, c in convolvers.items()}
        times = interleaved_medians(calls, args.rounds, args.repeats)
        if args.device_arrays:
            times = {form: ms / CHAIN for form, ms in times.items()}
        faster = min(times["direct"], times["separable"])
        auto = convolvers["auto"].plan
        rows.append((name, times, auto.algorithm, auto.reason, times["auto"] / faster))
        print(f"{name} done", file=sys.stderr)
    info = device_info(args.device)
    print(
        f'`algorithm="auto"` against both forms, {datetime.date.today()}, {info.name} ({info.platform}), '
        f"{out_width}x{out_height} output, float32, "
        f"{'pyopencl arrays (100 calls queued, one wait)' if args.device_arrays else 'NumPy in and out'}, "
        "wall ms per call, median of "
        f"{args.rounds} interleaved rounds of {args.repeats} calls"
        f"{', taps compiled in' if args.specialise else ''}.\n"
    )
    print("| filter | direct ms | separable ms | auto ms | auto chose | auto / faster form | reason |")
    print("|---|---|---|---|---|---|---|")
    for name, times, chosen, reason, ratio in rows:
        print(
            f"| {name} | {times['direct']:.3f} | {times['separable']:.3f} | {times['auto']:.3f} | {chosen} "
            f"| {ratio:.2f} | {reason} |"
        )


if __name__ == "__main__":
    main()
