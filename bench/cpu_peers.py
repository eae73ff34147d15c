"""The CPU libraries a 'valid' float32 correlation is compared with, each as a call on
fixed arrays: torch's conv2d (oneDNN) and a Halide pipeline scheduled by its own
autoscheduler. Each is checked against SciPy once before it is timed."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

HALIDE_AUTOSCHEDULERS = ("Adams2019", "Mullapudi2016")


def torch_correlate(image: np.ndarray, filt: np.ndarray, threads: int) -> Callable[[], np.ndarray]:
    """torch.nn.functional.conv2d (a cross-correlation, 'valid') on `threads` threads."""
    import torch

    torch.set_num_threads(threads)
    batch = torch.from_numpy(np.array(image))[None, None]
    weights = torch.from_numpy(np.array(filt))[None, None]

    def call() -> np.ndarray:
        with torch.inference_mode():
            return torch.nn.functional.conv2d(batch, weights)[0, 0].numpy()

    return call


def halide_correlate(
    image: np.ndarray, filt: np.ndarray, threads: int, autoscheduler: str = "Adams2019"
) -> Callable[[], np.ndarray]:
    """out(x, y) = sum of taps(u, v) * image(x + u, y + v), scheduled by the named Halide
    autoscheduler for this size and `threads` cores, JIT-compiled for the host."""
    os.environ["HL_NUM_THREADS"] = str(threads)  # read when Halide's thread pool starts
    import halide as hl

    plugin = f"libautoschedule_{autoscheduler.lower()}.so"
    hl.load_plugin(os.path.join(os.path.dirname(hl.__file__), "lib64", plugin))
    height, width = image.shape
    rows, columns = filt.shape
    out_w, out_h = width - columns + 1, height - rows + 1
    pixels = hl.ImageParam(hl.Float(32), 2, "image")
    taps = hl.ImageParam(hl.Float(32), 2, "taps")
    x, y = hl.Var("x"), hl.Var("y")
    window = hl.RDom([(0, columns), (0, rows)])
    out = hl.Func("out")
    out[x, y] = 0.0
    out[x, y] += taps[window.x, window.y] * pixels[x + window.x, y + window.y]
    out.set_estimates([(0, out_w), (0, out_h)])
    pixels.set_estimates([(0, width), (0, height)])
    taps.set_estimates([(0, columns), (0, rows)])
    target = hl.get_host_target()
    pipeline = hl.Pipeline(out)
    pipeline.apply_autoscheduler(target, hl.AutoschedulerParams(autoscheduler, {"parallelism": str(threads)}))
    pipeline.compile_jit(target)
    # Halide buffers index x first: numpy's (rows, columns) arrays are (x, y) buffers as they lie.
    # (Halide wraps writable arrays only: a problem's seeded data is read-only.)
    image_buffer, taps_buffer = hl.Buffer(np.array(image)), hl.Buffer(np.array(filt))
    result = hl.Buffer(hl.Float(32), [out_w, out_h])

    def call() -> np.ndarray:
        pixels.set(image_buffer)
        taps.set(taps_buffer)
        pipeline.realize(result)
        return np.asarray(result)

    return call
