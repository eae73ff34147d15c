"""What the bench scripts share: reading `--config` arguments, and the registers and
spills NVIDIA's compiler reports for a kernel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autotune.families.conv2d.render import KernelVariant


def read_configs(texts: list[str]) -> list[dict]:
    """Each text is a JSON object or list of objects, or @file holding one."""
    configs: list[dict] = []
    for text in texts:
        data = json.loads(Path(text[1:]).read_text() if text.startswith("@") else text)
        configs += data if isinstance(data, list) else [data]
    return configs


def nvidia_resources(cl: Any, context: Any, device: Any, variant: KernelVariant) -> tuple[str, str]:
    """(registers, spill store bytes) from `-cl-nv-verbose`; "?" where the build log says
    nothing (another driver, or a build the driver answered from its cache)."""
    program = cl.Program(context, variant.source).build(options=[*variant.build_options, "-cl-nv-verbose"])
    log = program.get_build_info(device, cl.program_build_info.LOG)
    used = next((line for line in log.splitlines() if "Used" in line), "")
    spill = next((line for line in log.splitlines() if "spill stores" in line), "")
    registers = used.split("Used")[1].split("registers")[0].strip() if "Used" in used else "?"
    stores = spill.split("bytes stack frame,")[-1].split("bytes spill stores")[0].strip() if spill else "?"
    return registers, stores
