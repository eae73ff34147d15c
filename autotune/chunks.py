"""A NumPy call of a `Convolver` in chunks of rows, so that on a GPU the upload of one
chunk, the kernel of the one before and the download of the one before that overlap
(three in-order queues: uploads, kernels, downloads; events order each chunk's steps).

Each chunk is a problem of its own over a band of the image's rows, run by the same
compiled kernel with the same configuration, so every output is computed exactly as
without chunks:

- 'valid': output rows [o0, o1) read input rows [o0, o1 + rows - 1) (the halo: the
  filter's rows less one, uploaded with both chunks that need them);
- 'same': output rows [o0, o1) read image rows [o0 - top, o1 + bottom), clipped to
  the image; the band is run as a 'same' image of its own, whose outputs past the
  band's first and last `top`/`bottom` rows read only real rows, and only those are
  downloaded. At the image's own first and last rows the kernel reads the border as
  without chunks, as long as the band holds every row the border reflects or repeats:
  so each chunk has at least the filter's rows of output. 'wrap' reads the image's last
  rows above its first: chunks do not take it.

Unmeasured: only a GPU (copy engines beside the compute units) can show what the overlap
gains; `bench/overlap_chunks.py` measures it there. On a CPU device calls copy nothing
(autotune/host_memory.py), so there is nothing to overlap.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from autotune.host_memory import parallel_copy


@dataclasses.dataclass(frozen=True)
class Chunk:
    problem: Any  # the band as a problem of the convolver's family (out_height: the band's rows)
    first_in: int  # first image row uploaded
    rows_in: int
    first_out: int  # first output row of the image this chunk gives
    rows_out: int
    skip: int  # rows of the band's output before `first_out` (halo rows of 'same' bands)


def plan_chunks(
    problem: Any, padding: tuple[int, int] | None, rows: int, image_rows: int, chunks: int, border: str
) -> list[Chunk]:
    """`chunks` bands of about equal output rows. `padding`: the (top, bottom) border
    rows of 'same' output, None for 'valid'; `rows`: the filter's rows."""
    out_rows = problem.out_height
    most = max(1, out_rows // rows)
    if not 1 <= chunks <= most:
        raise ValueError(
            f"chunks must be from 1 to {most} (each chunk at least the filter's {rows} rows "
            f"of the {out_rows} output rows), got {chunks}"
        )
    if border == "wrap" and chunks > 1:
        raise ValueError("chunks do not take border='wrap' (its first rows read the image's last ones)")
    bounds = [round(k * out_rows / chunks) for k in range(chunks + 1)]
    plan = []
    for o0, o1 in zip(bounds, bounds[1:], strict=False):
        if padding is None:
            first, last = o0, o1 + rows - 1
            band_rows, skip = o1 - o0, 0
        else:
            first, last = max(0, o0 - padding[0]), min(image_rows, o1 + padding[1])
            band_rows, skip = last - first, o0 - first
        band = dataclasses.replace(problem, out_height=band_rows)
        plan.append(Chunk(band, first, last - first, o0, o1 - o0, skip))
    return plan


class ChunkedCalls:
    """Device buffers and queues for calls in chunks, made once per Convolver."""

    def __init__(self, context: Any, chunks: list[Chunk], in_row_bytes: int, out_row_bytes: int) -> None:
        import pyopencl as cl

        mf = cl.mem_flags
        self.chunks = chunks
        self.in_row_bytes, self.out_row_bytes = in_row_bytes, out_row_bytes
        self.inputs = [cl.Buffer(context, mf.READ_ONLY, size=c.rows_in * in_row_bytes) for c in chunks]
        self.outputs = [
            cl.Buffer(context, mf.WRITE_ONLY, size=c.problem.out_height * out_row_bytes) for c in chunks
        ]
        self.uploads = cl.CommandQueue(context)
        self.downloads = cl.CommandQueue(context)

    def run(
        self,
        host: np.ndarray,
        staged_image: np.ndarray,
        staged_result: np.ndarray,
        launch: Any,
        finish: Any,
    ) -> None:
        """Copy rows into the staging image as chunks need them, upload, launch
        (`launch(problem, input, output, wait_for)` returns the kernel's event) and
        download each chunk; `finish(first_row, rows)` takes each chunk's result rows
        from the staging result as they arrive."""
        import pyopencl as cl

        copied = 0  # image rows already in the staging array
        downloads = []
        for chunk, source, target in zip(self.chunks, self.inputs, self.outputs, strict=True):
            last = chunk.first_in + chunk.rows_in
            if last > copied:
                parallel_copy(staged_image[copied:last], host[copied:last])
                copied = last
            upload = cl.enqueue_copy(
                self.uploads, source, staged_image[chunk.first_in : last], is_blocking=False
            )
            self.uploads.flush()
            kernel = launch(chunk.problem, source, target, [upload])
            download = cl.enqueue_copy(
                self.downloads,
                staged_result[chunk.first_out : chunk.first_out + chunk.rows_out],
                target,
                src_offset=chunk.skip * self.out_row_bytes,
                is_blocking=False,
                wait_for=[kernel],
            )
            self.downloads.flush()
            downloads.append((download, chunk))
        for download, chunk in downloads:
            download.wait()
            finish(chunk.first_out, chunk.rows_out)
