"""What one `autotune export` writes, for one device of this machine or for many
devices known from the database only (`--device-name`, `--all-devices`): the kernels
of each, their .cl and manifests (in a folder per device when there are several), one
C header with a table of every device, and T4 results. The files are returned, not
written: the caller writes the set all or nothing."""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.devices import DeviceInfo
from autotune.errors import UsageError
from autotune.export import Exported, choose, kernel_files, t4_results
from autotune.families import KernelFamily
from autotune.families.c_header import (
    DEFAULT_ENTRY,
    HeaderKernel,
    c_header,
    header_name,
    holds_in_header,
)
from autotune.lookup import fields_text
from autotune.store import Store


@dataclass(frozen=True)
class DeviceExport:
    """One device's part of an export: its kernels, and the folder of their files."""

    device: DeviceInfo
    folder: Path
    chosen: list[Exported]


@dataclass(frozen=True)
class ExportRequest:
    """What to export, as the command line asks it."""

    kinds: list[dict[str, Any]] | None  # None: every kind tuned (with `fields`, those with them)
    size: tuple[int, ...] | None
    values: dict[str, Any]  # per kind label: the filter a literal kernel is compiled for
    formats: list[str]
    asked_header: bool  # --format named header (else the header holds what it can)
    prefix: str = "autotune"
    guard: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # with kinds None: only kinds with these


def matches(name: str, pattern: str) -> bool:
    """A device name against --device-name: a shell pattern (`*H200*`), or else a
    part of the name; case does not matter."""
    name, pattern = name.lower(), pattern.lower()
    return fnmatch.fnmatchcase(name, pattern) if any(c in pattern for c in "*?[") else pattern in name


def stored_devices(store: Store, family: KernelFamily, pattern: str | None) -> list[DeviceInfo]:
    """Devices with tuned kernels of this family in the database whose name matches
    `pattern` (None: all), this machine's or not."""
    tuned = {device.id for _, device, _ in store.best(family=family.name)}
    found = []
    for row in store.devices():
        if row.id in tuned and (pattern is None or matches(row.name, pattern)):
            info = DeviceInfo.stored(row)
            if info is not None:
                found.append(info)
    if not found:
        which = f"matching {pattern!r}" if pattern is not None else "at all"
        known = sorted({d.name for d in store.devices()})
        raise UsageError(
            f"no device {which} has tuned {family.name} kernels in the database"
            + (f" (devices: {', '.join(known)})" if known else "")
        )
    return found


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def device_folders(devices: list[DeviceInfo]) -> list[str]:
    """A folder name per device: its name as a slug, with its driver (then its
    position) added where two devices would share one."""
    names = [_slug(d.name) for d in devices]
    names = [
        f"{n}-{_slug(d.driver_version)}" if names.count(n) > 1 else n
        for n, d in zip(names, devices, strict=True)
    ]
    return [f"{n}-{i}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def plan(
    store: Store,
    family: KernelFamily,
    devices: list[DeviceInfo],
    request: ExportRequest,
    out: Path,
    per_device_folders: bool,
) -> tuple[list[tuple[Path, str]], list[DeviceExport]]:
    """Every file of the export, as (path, text), and what each device exports."""
    several = per_device_folders
    folders = device_folders(devices) if several else ["."] * len(devices)
    parts = []
    for device, folder in zip(devices, folders, strict=True):
        chosen = choose(
            store,
            family,
            device,
            request.kinds,
            request.size,
            request.values,
            only_tuned=several,
            fields=request.fields,
        )
        parts.append(DeviceExport(device, out / folder, chosen))
    exported = {family.describe_kind(e.problem.kind()) for part in parts for e in part.chosen}
    wanted = [family.describe_kind(k) for k in request.kinds] if request.kinds is not None else []
    missing = [label for label in [*wanted, *request.values] if label not in exported]
    if missing:
        raise UsageError(
            f"no tuned kernel for {missing[0]} on the devices asked; run `autotune search` first"
        )
    if not exported:  # every kind of no device has the fields asked
        asked = fields_text(request.fields)
        which = f"no tuned kernel with {asked}" if asked else "no tuned kernel"
        raise UsageError(f"{which} on the devices asked; run `autotune search` first")
    files: list[tuple[Path, str]] = []
    for part in parts:
        for e in part.chosen:
            source, manifest_file = kernel_files(
                family, e.variant, part.folder, part.device, e.problem, e.time_ms
            )
            files += [f for f, form in ((source, "cl"), (manifest_file, "json")) if form in request.formats]
    if "header" in request.formats:
        header = _header(family, parts, request)
        if header is not None:
            files.append((out / header_name(request.prefix), header))
    if "t4" in request.formats:
        for part in parts:
            files.append((part.folder / "autotune_t4.json", _t4(store, family, part)))
    return files, parts


def _header(family: KernelFamily, parts: list[DeviceExport], request: ExportRequest) -> str | None:
    """The C header of every device's kernels it holds (all of them, when asked for by
    name: then one it cannot hold is an error), with a default entry per width; None
    when it would hold nothing."""
    layout = family.header_layout
    kernels: list[HeaderKernel] = []
    defaults: dict[tuple, HeaderKernel] = {}
    for position, part in enumerate(parts):
        for e in part.chosen:
            holds = holds_in_header(e.variant, layout)
            if not request.asked_header and not holds:
                continue
            kernels.append(HeaderKernel(position, e.variant, e.time_ms))
            kind = (
                *(e.variant.render_key[field] for field in layout.key_fields),
                *(field.value(e.variant) for field in layout.kind_fields if field.in_kind),
            )
            if holds and kind not in defaults and family.space.fallback is not None:
                generic = family.render(family.fallback(e.problem, None), e.problem)
                defaults[kind] = HeaderKernel(DEFAULT_ENTRY, generic, None)
    if not kernels:
        return None
    devices = [part.device.fingerprint for part in parts]
    return c_header(
        devices, kernels + list(defaults.values()), family.header_layout, request.prefix, request.guard
    )


def _t4(store: Store, family: KernelFamily, part: DeviceExport) -> str:
    problem_ids = {e.problem_id for e in part.chosen}
    row = store.device_row(part.device.fingerprint)
    trials = [t for t in store.trials(device_id=row.id if row else -1) if t.problem_id in problem_ids]
    return json.dumps(t4_results(trials, store.problems(), family), indent=1) + "\n"
