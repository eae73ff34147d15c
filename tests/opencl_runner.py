"""Run a kernel the way a third-party host would: plain pyopencl, the manifest's
launch rule, no code from the autotune package."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl

_KERNEL = re.compile(r"__kernel\b[^{;]*?\bvoid\s+(\w+)\s*\(([^)]*)\)")


def kernel_signatures(source: str) -> dict[str, list[str]]:
    """Each `__kernel void NAME(...)` of an OpenCL source, by name: its parameters as
    declared, whitespace collapsed; what a host reads to set the kernel's arguments."""
    return {
        name: [" ".join(parameter.split()) for parameter in parameters.split(",")]
        for name, parameters in _KERNEL.findall(source)
    }


_context: cl.Context | None = None
_queue: cl.CommandQueue | None = None


def _opencl() -> tuple[cl.Context, cl.CommandQueue]:
    global _context, _queue
    if _context is None:
        _context = next(c for c in map(_context_if_it_builds, _pocl_devices()) if c is not None)
        _queue = cl.CommandQueue(_context)
    assert _queue is not None
    return _context, _queue


def _pocl_devices() -> list[Any]:
    return [d for p in cl.get_platforms() if "Portable" in p.name for d in p.get_devices()]


def _context_if_it_builds(device: Any) -> cl.Context | None:
    """A context on the device, or None where its compiler cannot build (pip's PoCL on a CPU
    its LLVM does not know)."""
    context = cl.Context([device])
    try:
        cl.Program(context, "__kernel void k(__global int *x) { x[0] = 1; }").build()
    except cl.Error:
        return None
    return context


def run_kernel(
    source: str,
    kernel_name: str,
    build_options: Sequence[str],
    local_size: Sequence[int],
    work_per_item: Sequence[int],
    image: np.ndarray,
    filt: np.ndarray,
) -> np.ndarray:
    context, queue = _opencl()
    image = np.ascontiguousarray(image, dtype=np.float32)
    filt = np.ascontiguousarray(filt, dtype=np.float32)
    f = filt.shape[0]
    out_h, out_w = image.shape[0] - f + 1, image.shape[1] - f + 1
    mf = cl.mem_flags
    program = cl.Program(context, source).build(options=list(build_options))
    kernel = cl.Kernel(program, kernel_name)
    input_buf = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=image)
    filter_buf = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=filt)
    output = np.full((out_h, out_w), np.nan, dtype=np.float32)
    output_buf = cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=output)
    global_size = []
    for out, work, local in zip((out_w, out_h), work_per_item, local_size, strict=True):
        items = -(-out // work)
        global_size.append(-(-items // local) * local)
    kernel(
        queue,
        tuple(global_size),
        tuple(local_size),
        input_buf,
        filter_buf,
        output_buf,
        np.int32(image.shape[1]),
        np.int32(out_w),
        np.int32(out_h),
        np.int32(f),
    )
    cl.enqueue_copy(queue, output, output_buf)
    queue.finish()
    return output


def scipy_valid(image: np.ndarray, filt: np.ndarray) -> np.ndarray:
    """'valid' correlation through scipy.ndimage, an implementation independent of ours."""
    from scipy import ndimage

    f = filt.shape[0]
    full = ndimage.correlate(image.astype(np.float64), filt.astype(np.float64), mode="constant")
    c = f // 2
    return full[c : c + image.shape[0] - f + 1, c : c + image.shape[1] - f + 1]


def run_pixels_kernel(
    variant: Any,
    image: np.ndarray,
    filt: np.ndarray,
    out_dtype: np.dtype,
    *,
    same: bool = False,
    border_value: float = 0.0,
    manifest: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """Run a kernel of any pixel types, 'valid' or 'same' with a border, on an (H, W)
    or (H, W, C) interleaved image, through the ABI the export manifest documents
    (widths counted in values: pixels x channels); unwritten outputs keep a byte
    pattern (NaN in float types). `manifest`: the kernel's export manifest, which says how a
    `border_groups` kernel's launch grows."""
    context, queue = _opencl()
    image = np.ascontiguousarray(image)
    channels = image.shape[2] if image.ndim == 3 else 1
    filt = np.ascontiguousarray(filt, dtype=np.float32)
    rows, f = filt.shape
    out_h, out_w = image.shape[:2] if same else (image.shape[0] - rows + 1, image.shape[1] - f + 1)
    out_w *= channels
    mf = cl.mem_flags
    program = cl.Program(context, variant.source).build(options=list(variant.build_options))
    kernel = cl.Kernel(program, variant.kernel_name)
    output = np.frombuffer(np.full(out_h * out_w * np.dtype(out_dtype).itemsize, 0xFF, np.uint8), out_dtype)
    output = output.reshape(out_h, out_w).copy()
    buffers = [
        cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=image),
        cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=filt),
        cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=output),
    ]
    scalars = [np.int32(n) for n in (image.shape[1] * channels, out_w, out_h, f)]
    if same:
        scalars.append(np.float32(border_value))
    global_size = []
    for out, work, local in zip((out_w, out_h), variant.work_per_item, variant.local_size, strict=True):
        items = -(-out // work)
        global_size.append(-(-items // local) * local)
    if variant.config.get("border_groups"):
        assert manifest is not None, "a border_groups kernel launches by its manifest"
        global_size[1] += _border_group_rows(manifest, variant, filt.shape, out_w, out_h, global_size[0])
    kernel(queue, tuple(global_size), tuple(variant.local_size), *buffers, *scalars)
    cl.enqueue_copy(queue, output, buffers[2])
    queue.finish()
    return output.reshape(out_h, out_w // channels, channels) if channels > 1 else output


class ManifestKernel:
    """An exported kernel as a host knows it: its .cl and the manifest beside it, with the
    attributes `run_pixels_kernel` launches by."""

    def __init__(self, manifest_path: Path) -> None:
        self.manifest = json.loads(manifest_path.read_text())
        self.source = (manifest_path.parent / self.manifest["source"]).read_text()
        self.kernel_name = self.manifest["kernel_name"]
        self.build_options = self.manifest["build_options"]
        self.local_size = tuple(self.manifest["local_size"])
        self.work_per_item = tuple(self.manifest["work_per_item"])
        self.config = self.manifest["config"]


def _border_group_rows(
    manifest: Mapping[str, Any], variant: Any, filter_shape, row_values: int, rows: int, global_x: int
) -> int:
    """The launch rows a `border_groups` kernel adds, worked out as the manifest's
    `border_groups` entry says (not with the package's own function)."""
    filter_rows, filter_width = filter_shape
    anchor_x, anchor_y, channels = manifest["anchor"], manifest["anchor_y"], manifest["channels"]
    step = manifest["tile_values"]
    work_y = variant.work_per_item[1]
    box_x = min(math.ceil(anchor_x * channels / step) * step, row_values)
    box_y = min(math.ceil(anchor_y / work_y) * work_y, rows)
    box_w = max(max(row_values - (filter_width - 1 - anchor_x) * channels, 0) // step * step - box_x, 0)
    box_h = max(max(rows - (filter_rows - 1 - anchor_y), 0) // work_y * work_y - box_y, 0)
    edge_outputs = row_values * rows - box_w * box_h
    local_y = variant.local_size[1]
    return math.ceil(edge_outputs / (global_x * local_y * manifest["edge_outputs_per_item"])) * local_y
