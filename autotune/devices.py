"""OpenCL device discovery with a stable numbering.

Devices are numbered 0..N-1 after sorting by (platform name, platform version, device
name, position in platform), so the numbers do not depend on the order in which the
ICD loader happens to read its vendor files. The same driver registered twice (pip's
PoCL and Debian's PoCL, say) shows up once: the first of the identical entries wins.
A PoCL CPU device that names the host CPU `generic` is numbered only if it compiles a
kernel: the PoCL in pyopencl's wheel (LLVM 14) names CPUs its LLVM does not know (AMD
Zen 5, say) so, and then cannot build anything; such a device is left out, and
`unusable_devices()` says why. The same PoCL takes an AMD Zen 4 for a CPU without AVX-512
and garbles 64-byte vectors there: such a device is numbered, with `widest_vector_bytes`
= 32, which keeps the search's explicit vectors narrower.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

from autotune.errors import AutotuneError, UsageError


@dataclass(frozen=True)
class DeviceInfo:
    index: int | None  # None: a device known from the database only (`stored`)
    platform: str
    platform_version: str
    name: str
    vendor: str
    driver_version: str
    type: str
    compute_units: int
    max_clock_mhz: int
    max_work_group_size: int
    max_work_item_sizes: tuple[int, ...]
    local_mem_size: int
    max_constant_buffer_size: int
    global_mem_size: int
    # Floats in the device's native vector (16 on an AVX-512 CPU, 1 on GPUs): CPU kernels
    # reach the SIMD units through explicit vectors that wide. Rows stored before it was
    # recorded read as 1.
    native_vector_width: int = 1
    # Whether kernels may read and write double (cl_khr_fp64, or core double support):
    # float64 pixels go to the kernel as they are only then. Older rows read as False.
    double_precision: bool = False
    # Bytes in the widest vector the device's compiler hands to its built-in functions
    # intact: 32 where 64-byte ones (float16, double8) come out garbled (`widest_vector_bytes`).
    # Older rows read as 128 (double16, OpenCL's widest): no limit.
    widest_vector_bytes: int = 128

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["max_work_item_sizes"] = list(self.max_work_item_sizes)
        return data

    @property
    def fingerprint(self) -> dict[str, str]:
        return {
            "name": self.name,
            "vendor": self.vendor,
            "driver": self.driver_version,
            "platform": self.platform,
        }

    @classmethod
    def stored(cls, row: Any) -> DeviceInfo | None:
        """A device as a database row records it (maybe another machine's): its
        fingerprint from the row, its limits from the row's info; None when the info
        is unreadable (a damaged row)."""
        try:
            info = json.loads(row.info)
            values = {
                f.name: info[f.name] if f.default is MISSING else info.get(f.name, f.default)
                for f in fields(cls)
            }
            values["max_work_item_sizes"] = tuple(int(s) for s in info["max_work_item_sizes"])
        except (ValueError, TypeError, KeyError):
            return None
        identity = {"platform": row.platform, "name": row.name, "vendor": row.vendor}
        return cls(**{**values, **identity, "driver_version": row.driver, "type": row.type, "index": None})

    @property
    def is_cpu(self) -> bool:
        return "CPU" in self.type.split("|")


def _opencl_devices() -> list[tuple[Any, Any]]:
    import pyopencl as cl

    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # no ICD at all: an empty list, not a crash
        if "PLATFORM_NOT_FOUND" in str(exc):
            return []
        raise AutotuneError(f"cannot list OpenCL platforms: {exc}") from exc
    found = []
    for platform in platforms:
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        for position, device in enumerate(devices):
            key = (platform.name, platform.version, device.name, position)
            found.append((key, platform, device))
    found.sort(key=lambda item: item[0])
    unique: list[tuple[Any, Any]] = []
    seen = set()
    for _, platform, device in found:
        identity = (
            platform.name,
            platform.version,
            device.name,
            device.driver_version,
            device.vendor,
            device.max_compute_units,
        )
        if identity in seen:
            continue
        seen.add(identity)
        if _build_failure(platform, device) is None:
            unique.append((platform, device))
    return unique


# Devices left out of the numbering: "platform version / device name: why".
_UNUSABLE: dict[str, str] = {}


def unusable_devices() -> list[str]:
    """The devices found but left out of the numbering, each with the reason."""
    _opencl_devices()
    return _left_out()


def _left_out() -> list[str]:
    return [f"{name}: {reason}" for name, reason in sorted(_UNUSABLE.items())]


def no_device_error() -> AutotuneError:
    """What to say when no device is numbered (after listing them): none found, or every
    one found left out, with why."""
    if _UNUSABLE:
        return AutotuneError("no usable OpenCL device: " + "; ".join(_left_out()))
    return AutotuneError("no OpenCL device found (install pocl-binary-distribution)")


# Built on each PoCL device that names the host CPU `generic`: numbered only if it builds.
PROBE_KERNEL = "__kernel void probe(__global int *x) { x[0] = 1; }"


def _suspect(platform: Any, device: Any) -> bool:
    """Whether the device's compiler may not know this CPU: PoCL reports `generic` then."""
    return "pocl" in platform.version.lower() and device.version.strip().endswith("-generic")


def _build_failure(platform: Any, device: Any) -> str | None:
    """Why a suspect device cannot compile (None when it can, and for every other device,
    which is not probed: a probe costs a build)."""
    if not _suspect(platform, device):
        return None
    reason = _probe_build(device)
    if reason is not None:
        _UNUSABLE[f"{platform.version.strip()} / {device.name.strip()}"] = reason
    return reason


@functools.lru_cache(maxsize=8)
def _probe_build(device: Any) -> str | None:
    """The compiler's first error on PROBE_KERNEL, once per device and process."""
    import pyopencl as cl

    try:
        cl.Program(cl.Context([device]), PROBE_KERNEL).build()
    except cl.Error as exc:
        lines = [line.strip() for line in str(exc).splitlines() if "error:" in line]
        reason = lines[0] if lines else "it cannot build a kernel"
        if "unknown target CPU" in reason:
            reason += " (its compiler does not know this CPU)"
        return reason + ": install a newer PoCL, e.g. Debian's pocl-opencl-icd"
    return None


# LLVM's names of x86 CPUs with AVX-512 (its -mcpu values), as a PoCL CPU device's
# version string ends ("HSTR: pthread-x86_64-unknown-linux-gnu-skylake-avx512").
# fmt: off
AVX512_CPUS = frozenset({
    "knl", "knm", "skx", "skylake-avx512", "cascadelake", "cooperlake", "cannonlake",
    "icelake-client", "icelake-server", "rocketlake", "tigerlake", "sapphirerapids",
    "emeraldrapids", "graniterapids", "graniterapids-d", "diamondrapids", "znver4", "znver5",
    "znver6", "x86-64-v4",
})
# fmt: on


def widest_vector_bytes(platform_version: str, device_version: str, native_vector_width: int) -> int:
    """128 (no limit), or 32 where PoCL builds kernels for a CPU without AVX-512 yet
    reports 16 float lanes.

    pip's PoCL 3.0 (LLVM 14) names an AMD Zen 4 `znver3` and builds kernels for that, with
    no AVX-512, but links them with its AVX-512 built-in library (chosen from the CPU's
    flags). A 16-wide vector then travels in memory on one side and in registers on the
    other: `convert_ushort16`, `vload_half16` and the like return garbage or crash, some
    of the time, a double8 to float8 conversion stops its code generator, and its kernel
    cache keeps such programs without their kernels. The version string says so without
    building anything (a probe kernel's build would leave the process to abort at exit)."""
    found = re.search(r"HSTR: \S*?x86_64-[^-\s]+-linux-gnu-(\S+)", device_version)
    if "pocl" not in platform_version.lower() or native_vector_width < 16 or found is None:
        return 128
    return 128 if found.group(1) in AVX512_CPUS else 32


def _device_type(bits: int) -> str:
    import pyopencl as cl

    kinds = [
        ("GPU", cl.device_type.GPU),
        ("CPU", cl.device_type.CPU),
        ("ACCELERATOR", cl.device_type.ACCELERATOR),
    ]
    names = [name for name, bit in kinds if bits & bit]
    return "|".join(names) or "CUSTOM"


def _double_precision(device: Any) -> bool:
    """Core double support (OpenCL 1.2+) or cl_khr_fp64; some 1.x drivers refuse the query."""
    import pyopencl as cl

    try:
        return bool(device.double_fp_config)
    except (cl.Error, AttributeError):
        return "cl_khr_fp64" in device.extensions.split()


def _info(index: int, platform: Any, device: Any) -> DeviceInfo:

    return DeviceInfo(
        index=index,
        platform=platform.name.strip(),
        platform_version=platform.version.strip(),
        name=device.name.strip(),
        vendor=device.vendor.strip(),
        driver_version=device.driver_version.strip(),
        type=_device_type(int(device.type)),
        compute_units=int(device.max_compute_units),
        max_clock_mhz=int(device.max_clock_frequency),
        max_work_group_size=int(device.max_work_group_size),
        max_work_item_sizes=tuple(int(s) for s in device.max_work_item_sizes),
        local_mem_size=int(device.local_mem_size),
        max_constant_buffer_size=int(device.max_constant_buffer_size),
        global_mem_size=int(device.global_mem_size),
        native_vector_width=max(1, int(device.native_vector_width_float)),
        double_precision=_double_precision(device),
        widest_vector_bytes=widest_vector_bytes(
            platform.version, device.version, int(device.native_vector_width_float)
        ),
    )


def list_devices() -> list[DeviceInfo]:
    return [_info(i, p, d) for i, (p, d) in enumerate(_opencl_devices())]


def open_device(index: int) -> tuple[DeviceInfo, Any]:
    """The DeviceInfo and pyopencl device for a stable index."""
    devices = _opencl_devices()
    if not devices:
        raise no_device_error()
    if type(index) is not int or not 0 <= index < len(devices):
        raise UsageError(
            f"unknown device {index!r}: {len(devices)} device(s), numbered 0..{len(devices) - 1}"
            " (see `autotune devices`)"
        )
    platform, device = devices[index]
    return _info(index, platform, device), device


def device_info(index: int) -> DeviceInfo:
    return open_device(index)[0]
