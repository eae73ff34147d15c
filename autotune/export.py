"""Write a kernel as a host program needs it: the .cl source and a JSON manifest."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from autotune import __version__
from autotune.codegen import KernelVariant
from autotune.devices import DeviceInfo

ABI = [
    "__global const float *input",
    "FILTER_SPACE const float *filter",
    "__global float *output",
    "const int in_width",
    "const int out_width",
    "const int out_height",
    "const int filter_width",
]


def manifest(
    variant: KernelVariant,
    source_name: str,
    device: DeviceInfo | None,
    image_size: tuple[int, int] | None = None,
    time_ms: float | None = None,
) -> dict[str, Any]:
    gflops = None
    if time_ms and image_size:
        flops = 2 * variant.filter_width**2 * image_size[0] * image_size[1]
        gflops = flops / (time_ms * 1e-3) / 1e9
    return {
        "kernel_name": variant.kernel_name,
        "source": source_name,
        "build_options": list(variant.build_options),
        "local_size": list(variant.local_size),
        "work_per_item": list(variant.work_per_item),
        "filter_width": variant.filter_width,
        "config": variant.config,
        "device": device.fingerprint if device else None,
        "image_size": list(image_size) if image_size else None,
        "time_ms": time_ms,
        "gflops": gflops,
        "arguments": ABI,
        "launch": "global[d] = roundup(ceil(out[d] / work_per_item[d]), local_size[d]), d = x, y",
        "generator": f"autotune {__version__}",
    }


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_kernel(
    variant: KernelVariant,
    out_dir: str | Path,
    device: DeviceInfo | None,
    image_size: tuple[int, int] | None = None,
    time_ms: float | None = None,
) -> tuple[Path, Path]:
    """convolve_f<F>.cl and convolve_f<F>.json in out_dir (created if needed)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"convolve_f{variant.filter_width}"
    source_path = out_dir / f"{stem}.cl"
    manifest_path = out_dir / f"{stem}.json"
    data = manifest(variant, source_path.name, device, image_size, time_ms)
    _write_atomic(source_path, variant.source)
    _write_atomic(manifest_path, json.dumps(data, indent=2) + "\n")
    return source_path, manifest_path
