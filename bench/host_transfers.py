#!/usr/bin/env python3
"""How to move a NumPy image to an OpenCL device and back fastest: the ways a call can
do it, side by side in interleaved rounds, with no kernel between (what a round trip
costs beside the kernel), and CuPy's round trip where CuPy is installed.

    python3 bench/host_transfers.py --device 0 [--image-size 4096x4096] [--rounds 5] [--repeats 5]

Ways: `new buffers` (a buffer made from the array with COPY_HOST_PTR and a fresh one for
the result, per call: what `convolve()` did), `kept buffers` (device buffers made once,
the array copied in and out with enqueue_copy from pageable memory), `pinned staging`
(page-locked ALLOC_HOST_PTR buffers made once, the array copied into them on the host,
then to the device: what a Convolver does). Each result is a new NumPy array, as a call
returns.
"""

from __future__ import annotations

import argparse
import datetime
import sys

import numpy as np
import pyopencl as cl
from bench_common import interleaved_medians

from autotune.families.conv2d.inputs import parse_image_size
from autotune.host_memory import copy_threads, page_locked, parallel_copy
from autotune.runtime import _context


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--image-size", default="4096x4096")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="host copy threads (0: copy_threads())")
    parser.add_argument("--bands", type=int, default=4, help="bands of rows for the overlapped way")
    args = parser.parse_args()
    width, height = parse_image_size(args.image_size)
    info, context, queue = _context(args.device)
    mf = cl.mem_flags
    image = np.random.default_rng(0).random((height, width), dtype=np.float32)
    nbytes = image.nbytes

    def new_buffers() -> np.ndarray:
        source = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=image)
        target = cl.Buffer(context, mf.READ_WRITE, size=nbytes)
        cl.enqueue_copy(queue, target, source)
        out = np.empty_like(image)
        cl.enqueue_copy(queue, out, target)
        queue.finish()
        return out

    kept_in = cl.Buffer(context, mf.READ_WRITE, size=nbytes)
    kept_out = cl.Buffer(context, mf.READ_WRITE, size=nbytes)

    def kept_buffers() -> np.ndarray:
        cl.enqueue_copy(queue, kept_in, image, is_blocking=False)
        cl.enqueue_copy(queue, kept_out, kept_in)
        out = np.empty_like(image)
        cl.enqueue_copy(queue, out, kept_out, is_blocking=True)
        return out

    staged_in, staged_out = (
        page_locked(context, queue, nbytes)[1].view(image.dtype).reshape(image.shape) for _ in range(2)
    )

    def pinned_staging() -> np.ndarray:
        np.copyto(staged_in, image)
        cl.enqueue_copy(queue, kept_in, staged_in, is_blocking=False)
        cl.enqueue_copy(queue, kept_out, kept_in)
        cl.enqueue_copy(queue, staged_out, kept_out, is_blocking=True)
        return staged_out.copy()

    threads = args.threads or copy_threads()

    def pinned_dma_only() -> np.ndarray:
        cl.enqueue_copy(queue, kept_in, staged_in, is_blocking=False)
        cl.enqueue_copy(queue, kept_out, kept_in)
        cl.enqueue_copy(queue, staged_out, kept_out, is_blocking=True)
        return staged_out

    def host_copies_only() -> np.ndarray:
        np.copyto(staged_in, image)
        return staged_in.copy()

    def pinned_threaded(out: np.ndarray | None = None) -> np.ndarray:
        parallel_copy(staged_in, image, threads)
        cl.enqueue_copy(queue, kept_in, staged_in, is_blocking=False)
        cl.enqueue_copy(queue, kept_out, kept_in)
        cl.enqueue_copy(queue, staged_out, kept_out, is_blocking=True)
        out = np.empty_like(image) if out is None else out
        parallel_copy(out, staged_out, threads)
        return out

    kept_result = np.empty_like(image)
    row_bytes = image.strides[0]
    bounds = [round(k * height / args.bands) for k in range(args.bands + 1)]
    bands = list(zip(bounds, bounds[1:], strict=False))

    def pinned_threaded_bands() -> np.ndarray:
        for first, last in bands:  # a band's upload runs while the next band is copied
            parallel_copy(staged_in[first:last], image[first:last], threads)
            cl.enqueue_copy(
                queue, kept_in, staged_in[first:last], dst_offset=first * row_bytes, is_blocking=False
            )
            queue.flush()
        cl.enqueue_copy(queue, kept_out, kept_in)
        downloads = [
            cl.enqueue_copy(
                queue, staged_out[first:last], kept_out, src_offset=first * row_bytes, is_blocking=False
            )
            for first, last in bands
        ]
        queue.flush()
        out = np.empty_like(image)
        # Each band copied out while the next arrives.
        for (first, last), download in zip(bands, downloads, strict=True):
            download.wait()
            parallel_copy(out[first:last], staged_out[first:last], threads)
        return out

    def pinned_dma_bands() -> np.ndarray:
        """The transfers alone, band by band from and to parts of the page-locked arrays."""
        for first, last in bands:
            cl.enqueue_copy(
                queue, kept_in, staged_in[first:last], dst_offset=first * row_bytes, is_blocking=False
            )
        cl.enqueue_copy(queue, kept_out, kept_in)
        for first, last in bands:
            cl.enqueue_copy(
                queue, staged_out[first:last], kept_out, src_offset=first * row_bytes, is_blocking=False
            )
        queue.finish()
        return staged_out

    def host_threaded_only() -> np.ndarray:
        parallel_copy(staged_in, image, threads)
        out = np.empty_like(image)
        parallel_copy(out, staged_in, threads)
        return out

    ways = {
        "new buffers": new_buffers,
        "kept buffers": kept_buffers,
        "pinned staging": pinned_staging,
        "pinned, DMA only (no host copies)": pinned_dma_only,
        f"pinned, DMA only, in {args.bands} bands": pinned_dma_bands,
        "host copies only, one thread": host_copies_only,
        f"host copies only, {threads} threads": host_threaded_only,
        f"pinned staging, {threads} threads": pinned_threaded,
        f"pinned staging, {threads} threads, into a kept result": lambda: pinned_threaded(kept_result),
        f"pinned staging, {threads} threads, {args.bands} bands": pinned_threaded_bands,
    }
    try:
        import cupy

        def cupy_round_trip() -> np.ndarray:
            on_device = cupy.asarray(image)
            result = on_device.copy()
            return cupy.asnumpy(result)

        ways["CuPy asarray/asnumpy"] = cupy_round_trip
    except ImportError:
        pass
    for way in ways.values():
        np.testing.assert_array_equal(way(), image)
    medians = interleaved_medians(ways, args.rounds, args.repeats)
    print(
        f"Host round trips, {datetime.date.today()}, {info.name} ({info.platform}), {width}x{height} float32 "
        f"({nbytes / 2**20:.0f} MiB each way), device-to-device copy between; wall ms, median of "
        f"{args.repeats} per round, median of {args.rounds} interleaved rounds.\n"
    )
    print("| way | ms | GB/s both ways |")
    print("|---|---|---|")
    for name, ms in medians.items():
        print(f"| {name} | {ms:.2f} | {2 * nbytes / (ms * 1e-3) / 1e9:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
