"""A family's C header: a table of the devices kernels were tuned on, and per device and
kind (filter width; and rank for separable kernels) the kernel's source, build options
and launch geometry, with a default entry per kind for devices not in the table, and a
lookup by (platform, device name, kind) at run time, the way CLBlast ships per-device
parameters. Every name carries a prefix and the include guard is unique to the export,
so headers of different exports can be included side by side. What differs between
families (the kind's fields, the arguments) is the family's `HeaderLayout`."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from autotune.errors import UsageError
from autotune.families.base import KernelVariant

C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DEFAULT_ENTRY = -1  # a kernel's device index meaning: any device not in the table


@dataclass(frozen=True)
class KindField:
    """A field of every header entry past its key: part of the kind a host looks kernels
    up by (`in_kind`), or something the host launches the kernel by."""

    name: str
    c_type: str  # "int" or "const char *"
    comment: str
    value: Callable[[KernelVariant], int | str]
    default: str = ""  # C expression of the kind's value in `<prefix>_default_kind(key...)`
    in_kind: bool = True


@dataclass(frozen=True)
class HeaderLayout:
    """What a family's header entries are looked up by and what its kernels take."""

    kernels: str  # what the header holds, for its opening comment
    key_fields: tuple[str, ...]  # int fields of an entry's kind, looked up in this order
    arguments: tuple[str, ...]  # comment lines: the kernel's arguments
    defines: tuple[str, ...] = ()  # lines a host can test (#ifdef) to tell families apart
    # Entries may be two launches (a second kernel of the same program, run after the
    # first): each entry says so, with the second kernel's name and geometry.
    second_launch: tuple[str, ...] = ()  # comment lines: what the second launch takes
    # With kind fields the header holds kernels of every kind: a host fills a
    # `<prefix>_kind` and looks it up; `find_kernel_for(key...)` asks for the default kind.
    kind_fields: tuple[KindField, ...] = ()
    launch_helper: tuple[str, ...] = ()  # C lines (`{p}`: the prefix) after the lookups


@dataclass(frozen=True)
class HeaderKernel:
    """One kernel of the header: for the device at `device` in the device table (or
    DEFAULT_ENTRY), with the time it was measured at there (None: never tuned)."""

    device: int
    variant: KernelVariant
    time_ms: float | None


def _c_string(text: str) -> str:
    """Text as a C string literal, one source line per line."""
    lines = text.splitlines(keepends=True) or [""]
    out = []
    for line in lines:
        escaped = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        out.append(f'    "{escaped}"')
    return "\n".join(out)


def _c_text(text: str) -> str:
    """One short text (a device name) as a C string literal on one line."""
    return _c_string(text.replace("\n", " ")).strip()


def _comment(text: str) -> str:
    """One line of the header's opening comment: text that cannot end the comment."""
    return " *   " + " ".join(text.replace("*/", "* /").split())


def check_c_name(name: str, what: str) -> str:
    """`name` if it is a C identifier, else bad usage (it goes into C source)."""
    if not C_NAME.fullmatch(name):
        raise UsageError(
            f"{what} must be a C identifier (letters, digits, _; not first a digit), got {name!r}"
        )
    return name


def holds_in_header(variant: KernelVariant, layout: HeaderLayout | None = None) -> bool:
    """Whether the header holds this kernel: any, in a layout with kind fields; else
    float32 'valid' ones of one frame and a square filter (looked up by width)."""
    if layout is not None and layout.kind_fields:
        return True
    return not ({"border", "batch", "filter_height"} & set(variant.render_key))


def header_name(prefix: str) -> str:
    return f"{prefix}_kernels.h"


def c_header(
    devices: list[dict[str, str]],
    kernels: list[HeaderKernel],
    layout: HeaderLayout,
    prefix: str = "autotune",
    guard: str | None = None,
) -> str:
    """A self-contained C header. `devices` are fingerprints (platform, vendor, name,
    driver); `guard` defaults to one derived from the contents, unique to this export."""
    for kernel in kernels:
        if len(kernel.variant.launches) > (2 if layout.second_launch else 1):
            raise UsageError(
                f"--format header holds kernels of one launch{' or two' if layout.second_launch else ''}"
            )
        if not holds_in_header(kernel.variant, layout):
            raise UsageError(
                "--format header holds float32 'valid' kernels of square filters (looked up by width); "
                "export kernels of other pixel types, a border, a batch or rows x F filters "
                "with --format cl,json"
            )
    p = check_c_name(prefix, "--c-prefix")
    body = _body(devices, kernels, p, layout)
    if guard is None:
        guard = f"{p.upper()}_KERNELS_H_{hashlib.sha256(body.encode()).hexdigest()[:16].upper()}"
    check_c_name(guard, "--include-guard")
    return "\n".join([f"#ifndef {guard}", f"#define {guard}", "", body, f"#endif /* {guard} */", ""])


def _body(devices: list[dict[str, str]], kernels: list[HeaderKernel], p: str, layout: HeaderLayout) -> str:
    kind_parameters = ", ".join(f"int {field}" for field in layout.key_fields)
    kind_arguments = ", ".join(layout.key_fields)
    kind_words = ", ".join(field.replace("_", " ") for field in layout.key_fields)
    parts = [
        f"/* Generated by autotune: {layout.kernels}.",
        " * Tuned on:",
        *[
            _comment(f"[{i}] {d['name']} ({d['vendor']}; {d['platform']}; driver {d['driver']})")
            for i, d in enumerate(devices)
        ],
        f" * Pick one at run time: {p}_find_kernel_for(platform, device name, {kind_words})"
        + (
            f",\n * or of any kind: {p}_find_kernel_of(platform, device name, &kind)."
            if layout.kind_fields
            else "."
        ),
        " * Each entry: OpenCL C source, build options and launch geometry. Launch with",
        " *   local  = {local_size[0], local_size[1]}",
        f" *   global = {p}_global_size(k, out_width, out_height)",
        *[line.replace("{p}", p) for line in layout.arguments],
        *layout.second_launch,
        "",
        *[f"#define {p.upper()}_{line}" for line in layout.defines],
        *([""] if layout.defines else []),
        "#include <stddef.h>",
        "#include <string.h>",
        "",
        "typedef struct {",
        "    const char *platform; /* CL_PLATFORM_NAME */",
        "    const char *vendor;   /* CL_DEVICE_VENDOR */",
        "    const char *name;     /* CL_DEVICE_NAME */",
        "    const char *driver;   /* CL_DRIVER_VERSION */",
        f"}} {p}_device;",
        "",
        "typedef struct {",
        f"    int device; /* index in {p}_devices; {DEFAULT_ENTRY}: default entry, for other devices */",
        *[f"    int {field};" for field in layout.key_fields],
        *[_member(field, p) for field in layout.kind_fields],
        "    const char *kernel_name;",
        "    const char *source;",
        "    const char *build_options;",
        "    size_t local_size[2];",
        "    size_t work_per_item[2];",
        *(
            [
                "    const char *second_kernel_name; /* NULL: one launch; else launched after the first */",
                "    size_t second_local_size[2];",
                "    size_t second_work_per_item[2];",
            ]
            if layout.second_launch
            else []
        ),
        "    double tuned_time_ms; /* on the device it was tuned on; 0 if never tuned */",
        f"}} {p}_kernel;",
        "",
        f"static const {p}_device {p}_devices[] = {{",
    ]
    for d in devices:
        fields = ", ".join(_c_text(d[k]) for k in ("platform", "vendor", "name", "driver"))
        parts.append(f"  {{{fields}}},")
    if not devices:
        parts.append('  {"", "", "", ""},')
    parts += ["};", "", f"static const int {p}_device_count = {len(devices)};", ""]
    parts.append(f"static const {p}_kernel {p}_kernels[] = {{")
    for kernel in kernels:
        variant = kernel.variant
        parts += [
            "  {",
            f"    {kernel.device},",
            *[f"    {variant.render_key[field]}," for field in layout.key_fields],
            *[f"    {_c_value(field.value(variant))}," for field in layout.kind_fields],
            f'    "{variant.kernel_name}",',
            _c_string(variant.source) + ",",
            f'    "{" ".join(variant.build_options)}",',
            f"    {{{variant.local_size[0]}, {variant.local_size[1]}}},",
            f"    {{{variant.work_per_item[0]}, {variant.work_per_item[1]}}},",
            *(_second_launch(variant) if layout.second_launch else []),
            f"    {kernel.time_ms or 0.0!r},",
            "  },",
        ]
    parts += [
        "};",
        "",
        f"static const int {p}_kernel_count = {len(kernels)};",
        "",
        *(_kind_lookup(p, layout) if layout.kind_fields else _key_lookup(p, layout)),
        f"/* The kernel of this {kind_words} for the first device in the table, else the",
        " * default entry; NULL when the header holds no kernel of that kind. */",
        f"static inline const {p}_kernel *{p}_find_kernel({kind_parameters}) {{",
        f"    return {p}_find_kernel_for(NULL, {p}_device_count ? {p}_devices[0].name : NULL, "
        f"{kind_arguments});",
        "}",
        "",
        "/* global[d] = roundup(ceil(out[d] / work_per_item[d]), local_size[d]) */",
        f"static inline void {p}_global_size(const {p}_kernel *k, size_t out_width, size_t out_height,",
        "                                   size_t global_size[2]) {",
        "    size_t out[2] = {out_width, out_height};",
        "    for (int d = 0; d < 2; ++d) {",
        "        size_t items = (out[d] + k->work_per_item[d] - 1) / k->work_per_item[d];",
        "        global_size[d] = (items + k->local_size[d] - 1) / k->local_size[d] * k->local_size[d];",
        "    }",
        "}",
        "",
    ]
    if layout.second_launch:
        parts += [
            "/* The second launch's global size over its extent (see the opening comment). */",
            f"static inline void {p}_second_global_size(const {p}_kernel *k, size_t extent_x,",
            "                                          size_t extent_y, size_t global_size[2]) {",
            "    size_t extent[2] = {extent_x, extent_y};",
            "    for (int d = 0; d < 2; ++d) {",
            "        size_t work = k->second_work_per_item[d], local = k->second_local_size[d];",
            "        global_size[d] = ((extent[d] + work - 1) / work + local - 1) / local * local;",
            "    }",
            "}",
            "",
        ]
    parts += [line.replace("{p}", p) for line in layout.launch_helper]
    return "\n".join(parts)


def _member(field: KindField, p: str) -> str:
    """A struct member's line, with its comment."""
    space = "" if field.c_type.endswith("*") else " "
    return f"    {field.c_type}{space}{field.name}; /* {field.comment.replace('{p}', p)} */"


def _c_value(value: int | str) -> str:
    return _c_text(value) if isinstance(value, str) else str(int(value))


def _search(p: str, signature: str, skip: str) -> list[str]:
    """A lookup function: the entry tuned on the named device, else the first default
    entry, of the kind `skip` does not reject."""
    return [
        f"static inline const {p}_kernel *",
        f"{p}_{signature} {{",
        f"    const {p}_kernel *fallback = NULL;",
        f"    for (int i = 0; i < {p}_kernel_count; ++i) {{",
        f"        const {p}_kernel *k = &{p}_kernels[i];",
        f"        if ({skip}) continue;",
        f"        if (k->device == {DEFAULT_ENTRY}) {{",
        "            if (!fallback) fallback = k;",
        "            continue;",
        "        }",
        f"        const {p}_device *d = &{p}_devices[k->device];",
        "        if (device_name && strcmp(d->name, device_name) == 0 &&",
        "            (!platform || strcmp(d->platform, platform) == 0))",
        "            return k;",
        "    }",
        "    return fallback;",
        "}",
        "",
    ]


def _key_lookup(p: str, layout: HeaderLayout) -> list[str]:
    """Entries looked up by their key fields alone."""
    kind_parameters = ", ".join(f"int {field}" for field in layout.key_fields)
    kind_words = ", ".join(field.replace("_", " ") for field in layout.key_fields)
    return [
        "/* The kernel tuned on a device of this name (and platform; NULL matches any) for",
        f" * this {kind_words}; else the default entry of that kind (a generic kernel, never",
        " * tuned); NULL when the header holds no kernel of that kind. */",
        *_search(
            p,
            f"find_kernel_for(const char *platform, const char *device_name, {kind_parameters})",
            " || ".join(f"k->{f} != {f}" for f in layout.key_fields),
        ),
    ]


def _kind_lookup(p: str, layout: HeaderLayout) -> list[str]:
    """Entries looked up by a kind: key fields and kind fields (strings compared)."""
    key_parameters = ", ".join(f"int {field}" for field in layout.key_fields)
    key_words = ", ".join(field.replace("_", " ") for field in layout.key_fields)
    kind_fields = [f for f in layout.kind_fields if f.in_kind]
    differs = [f"k->{f} != kind->{f}" for f in layout.key_fields] + [
        f"strcmp(k->{f.name}, kind->{f.name}) != 0"
        if f.c_type.endswith("*")
        else f"k->{f.name} != kind->{f.name}"
        for f in kind_fields
    ]
    return [
        "/* A kind of kernel: what a host looks entries up by. Start from",
        f" * {p}_default_kind(...) and change what differs; strings must not be NULL. */",
        "typedef struct {",
        *[f"    int {field};" for field in layout.key_fields],
        *[_member(field, p) for field in kind_fields],
        f"}} {p}_kind;",
        "",
        f"static inline {p}_kind {p}_default_kind({key_parameters}) {{",
        f"    {p}_kind kind = {{{', '.join([*layout.key_fields, *(f.default for f in kind_fields)])}}};",
        "    return kind;",
        "}",
        "",
        "static inline int",
        f"{p}_kind_differs(const {p}_kernel *k, const {p}_kind *kind) {{",
        "    return " + "\n        || ".join(differs) + ";",
        "}",
        "",
        "/* The kernel tuned on a device of this name (and platform; NULL matches any) of",
        " * this kind; else the default entry of that kind (a generic kernel, never tuned);",
        " * NULL when the header holds no kernel of that kind. */",
        *_search(
            p,
            "find_kernel_of(const char *platform, const char *device_name, const " + p + "_kind *kind)",
            f"{p}_kind_differs(k, kind)",
        ),
        f"/* The same, for the default kind of this {key_words}. */",
        "static inline const " + p + "_kernel *",
        f"{p}_find_kernel_for(const char *platform, const char *device_name, {key_parameters}) {{",
        f"    {p}_kind kind = {p}_default_kind({', '.join(layout.key_fields)});",
        f"    return {p}_find_kernel_of(platform, device_name, &kind);",
        "}",
        "",
    ]


def _second_launch(variant: KernelVariant) -> list[str]:
    """An entry's second kernel: its name and geometry, or NULL and zeros."""
    if len(variant.launches) == 1:
        return ["    NULL,", "    {0, 0},", "    {0, 0},"]
    second = variant.launches[1]
    return [
        f'    "{second.kernel_name}",',
        f"    {{{second.local_size[0]}, {second.local_size[1]}}},",
        f"    {{{second.work_per_item[0]}, {second.work_per_item[1]}}},",
    ]
