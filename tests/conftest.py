import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotune.devices import device_info
from autotune.evaluate import Evaluator
from autotune.families.conv2d import CONV2D
from autotune.outcomes import TimingPolicy
from tests.stored import store_best  # noqa: F401 - tests import it from here

ROOT = Path(__file__).resolve().parent.parent

# Tests time nothing: one timed run is enough to prove the timing path works.
FAST = TimingPolicy(min_runs=1, min_time_s=0.0, max_runs=2, max_time_s=0.5)


@functools.cache
def _widest_vector_bytes() -> int:
    return device_info(0).widest_vector_bytes


def device_vectors(config: dict, dtype: str = "float32", out_dtype: str = "float32") -> dict:
    """`config` with `x_vector` (and `work_x` with it) halved until device 0 takes vectors
    that wide (autotune/devices.py, `widest_vector_bytes`), so the kernels a test runs are
    ones a search would run there; the same config on every other device."""
    lane = 8 if "float64" in (dtype, out_dtype) else 4
    config = dict(config)
    while config.get("x_vector", 1) > 1 and config["x_vector"] * lane > _widest_vector_bytes():
        config["x_vector"] //= 2
        if "work_x" in config:
            config["work_x"] = max(1, config["work_x"] // 2)
    return config


@pytest.fixture(scope="session")
def evaluator() -> Iterator[Evaluator]:
    with Evaluator(0, CONV2D, policy=FAST, timeout_s=60) as ev:
        yield ev


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess, as a user runs it."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env["COLUMNS"] = "200"
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def cli_json(*args: str, env: dict[str, str] | None = None) -> dict:
    """Run a command with --json; check it succeeded and printed the envelope; its data."""
    result = run_cli(*args, "--json", env=env)
    assert result.returncode == 0, result.stderr
    envelope = json.loads(result.stdout)
    assert envelope["schema_version"] == 1 and envelope["command"] == args[0]
    assert isinstance(envelope["data"], dict)
    return envelope["data"]


@pytest.fixture(scope="session")
def autotune_pocl_env(tmp_path_factory) -> dict[str, str]:
    """Environment in which a C program's OpenCL loader finds the PoCL that autotune tuned
    on (the one pyopencl's wheel bundles), so headers' tuned entries match its device
    name; the system's PoCL names its device otherwise. Where that PoCL cannot compile for
    this CPU autotune left it out and tuned on the system's, and so does the C program."""
    import pyopencl

    from autotune.devices import unusable_devices

    (library,) = (Path(pyopencl.__file__).parent / ".libs").glob("libpocl*.so*")
    vendors = tmp_path_factory.mktemp("vendors")
    (vendors / "autotune-pocl.icd").write_text(f"{library}\n")
    bundled = {**os.environ, "OCL_ICD_VENDORS": str(vendors)}
    listed = subprocess.run(
        [sys.executable, "-c", "import pyopencl as cl; print(cl.get_platforms()[0].version.strip())"],
        env=bundled,
        capture_output=True,
        text=True,
        check=True,
    )
    version = listed.stdout.strip()
    if any(entry.startswith(f"{version} / ") for entry in unusable_devices()):
        return dict(os.environ)
    return bundled


# A GPU's limits as the space's device rules read them (one lane per work-item).
GPU_LIMITS = {
    "max_work_group_size": 1024,
    "max_work_item_sizes": [1024, 1024, 64],
    "local_mem_size": 49152,
    "max_constant_buffer_size": 65536,
    "native_vector_width": 1,
}
