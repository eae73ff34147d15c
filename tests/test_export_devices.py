"""Export for devices this machine does not have, from the database alone
(`--device-name`, `--all-devices`), and the C header with a table of devices that a
host program picks its kernel from at run time."""

import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest

from autotune.devices import device_info
from autotune.families.conv2d import CONV2D
from autotune.store import Store
from tests.conftest import ROOT, cli_json, run_cli
from tests.opencl_runner import scipy_valid

FIXTURE = ROOT / "tests" / "fixtures" / "schema_0002.db"
H200 = {"platform": "NVIDIA CUDA", "name": "NVIDIA H200", "vendor": "NVIDIA Corporation", "driver": "570.86"}
H200_CONFIG = CONV2D.space.complete(
    {"filter_space": "global", "local_x": 8, "local_y": 4, "work_x": 2, "work_y": 2, "unroll": 2}
)
HAS_GCC = shutil.which("gcc") is not None
HAS_OPENCL_HEADERS = Path("/usr/include/CL/cl.h").exists() and HAS_GCC


@pytest.fixture
def fleet_db(tmp_path):
    """Tuned kernels (F = 3, 5, 7) of two devices: this machine's device 0 (the schema
    0002 fixture's rows) and an H200 that only the database knows, with its own configs."""
    path = tmp_path / "fleet.db"
    shutil.copy(FIXTURE, path)
    Store(f"sqlite:///{path}").close()  # today's schema
    info = device_info(0)
    with sqlite3.connect(path) as connection:
        connection.execute(
            "UPDATE autotune_devices SET platform = ?, name = ?, vendor = ?, driver = ?",
            (info.platform, info.name, info.vendor, info.driver_version),
        )
        stored = json.loads(connection.execute("SELECT info FROM autotune_devices").fetchone()[0])
        gpu = {**stored, **H200, "driver_version": H200["driver"], "type": "GPU"}
        del gpu["driver"]
        device_id = connection.execute(
            "INSERT INTO autotune_devices (platform, name, vendor, driver, type, info) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (H200["platform"], H200["name"], H200["vendor"], H200["driver"], "GPU", json.dumps(gpu)),
        ).lastrowid
        connection.execute(
            "INSERT INTO autotune_best (device_id, problem_id, trial_id, config, time_ms, updated_at) "
            "SELECT ?, problem_id, trial_id, ?, time_ms / 10, updated_at FROM autotune_best",
            (device_id, json.dumps(H200_CONFIG, sort_keys=True)),
        )
    connection.close()
    return f"sqlite:///{path}"


def _one_line_error(result) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: "), result.stderr
    return lines[0]


def test_export_of_a_device_that_is_not_on_this_machine(fleet_db, tmp_path):
    old = os.umask(0o022)
    try:
        for pattern in ("h200", "*H200*"):
            out = tmp_path / pattern.strip("*")
            data = cli_json("export", "--device-name", pattern, "--out", str(out), "--db", fleet_db)
            assert [d["name"] for d in data["devices"]] == ["NVIDIA H200"] and data["devices"][0][
                "index"
            ] is None
            assert {k["filter_width"] for k in data["kernels"]} == {3, 5, 7}
            for width in (3, 5, 7):
                manifest = json.loads((out / "nvidia-h200" / f"convolve_f{width}.json").read_text())
                assert manifest["device"] == H200 and manifest["config"] == H200_CONFIG
                source = (out / "nvidia-h200" / f"convolve_f{width}.cl").read_text()
                assert "__kernel" in source
            for path in out.rglob("*"):  # the usual mode: 0666 / 0777 less the umask
                assert stat.S_IMODE(path.stat().st_mode) == (0o755 if path.is_dir() else 0o644), path
    finally:
        os.umask(old)
    everything = cli_json("export", "--all-devices", "--out", str(tmp_path / "all"), "--db", fleet_db)
    folders = sorted(p.name for p in (tmp_path / "all").iterdir() if p.is_dir())
    assert folders == sorted(
        ["nvidia-h200", re.sub(r"[^a-z0-9]+", "-", device_info(0).name.lower()).strip("-")]
    )
    assert len(everything["kernels"]) == 6
    assert [
        k["filter_width"]
        for k in cli_json(
            "export", "--all-devices", "-f", "5", "--out", str(tmp_path / "f5"), "--db", fleet_db
        )["kernels"]
    ] == [5, 5]
    float32 = cli_json(  # a pixel option filters the kinds of every device
        "export", "--all-devices", "--dtype", "float32", "--out", str(tmp_path / "f32"), "--db", fleet_db
    )
    assert len(float32["kernels"]) == 6
    for args, says in (
        (["--device-name", "A100"], "no device matching 'A100'"),
        (["--device-name", "h200", "-f", "9"], "no tuned kernel for F=9"),
        (["--all-devices", "--dtype", "uint8"], "no tuned kernel with dtype=uint8 on the devices asked"),
        (["--all-devices", "-d", "0"], "one of --device, --device-name and --all-devices"),
        (["--all-devices", "--c-prefix", "9lives"], "--c-prefix must be a C identifier"),
        (["--all-devices", "--include-guard", "A-B"], "--include-guard must be a C identifier"),
    ):
        result = run_cli("export", *args, "--out", str(tmp_path / "bad"), "--db", fleet_db)
        assert says in _one_line_error(result), result.stderr
    assert not (tmp_path / "bad").exists()


PROBE = r"""
#include <stdio.h>
#include "autotune_kernels.h"
#include "autotune_kernels.h" /* twice: the guard holds */
#include "h200_kernels.h"     /* another export's header beside it */

static int which(const autotune_kernel *k) { return k ? k->device : -9; }

int main(int argc, char **argv) {
    (void)argc;
    printf("%d %d %d %d %d %d %d\n",
           which(autotune_find_kernel_for(argv[1], argv[2], 3)),
           which(autotune_find_kernel_for(NULL, argv[2], 5)),
           which(autotune_find_kernel_for("NVIDIA CUDA", "NVIDIA H200", 3)),
           which(autotune_find_kernel_for("Other Platform", "NVIDIA H200", 3)),
           which(autotune_find_kernel_for("x", "a device nobody tuned", 7)),
           which(autotune_find_kernel_for(argv[1], argv[2], 9)),
           h200_find_kernel(3)->device);
    return 0;
}
"""


@pytest.mark.skipif(not HAS_GCC, reason="needs gcc")
def test_one_header_holds_every_device_and_a_default_per_width(fleet_db, tmp_path):
    out = tmp_path / "kernels"
    assert run_cli("export", "--all-devices", "--out", str(out), "--db", fleet_db).returncode == 0
    only_h200 = ["export", "--device-name", "h200", "--c-prefix", "h200", "--format", "header"]
    assert run_cli(*only_h200, "--out", str(out), "--db", fleet_db).returncode == 0
    header = (out / "autotune_kernels.h").read_text()
    info = device_info(0)
    for name in (info.name, "NVIDIA H200"):
        assert f'"{name}"' in header  # the device table names every device
    guards = [
        re.search(r"#ifndef (\w+)", (out / f).read_text()).group(1)
        for f in ("autotune_kernels.h", "h200_kernels.h")
    ]
    assert guards[0] != guards[1] and all(
        g.startswith(("AUTOTUNE_KERNELS_H_", "H200_KERNELS_H_")) for g in guards
    )
    (tmp_path / "probe.c").write_text(PROBE)
    binary = tmp_path / "probe"
    subprocess.run(
        [
            "gcc",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{out}",
            "-o",
            str(binary),
            str(tmp_path / "probe.c"),
        ],
        check=True,
    )
    result = subprocess.run(
        [str(binary), info.platform, info.name], capture_output=True, text=True, check=True
    )
    devices = re.findall(r"^ \*   \[(\d)\] (.*) \(", header, re.MULTILINE)
    h200 = next(int(i) for i, name in devices if name == "NVIDIA H200")
    here = 1 - h200
    # this device; name alone; the H200; the H200's name on another platform and an
    # unknown device get the default entry (-1); a width never exported; the other header
    assert result.stdout.split() == [str(here), str(here), str(h200), "-1", "-1", "-9", "0"]
    # the guard can be given
    guarded = ["export", "-d", "0", "--include-guard", "MY_KERNELS_H", "--format", "header"]
    assert run_cli(*guarded, "--out", str(tmp_path / "g"), "--db", fleet_db).returncode == 0
    single = (tmp_path / "g" / "autotune_kernels.h").read_text()
    assert "#ifndef MY_KERNELS_H\n#define MY_KERNELS_H\n" in single
    assert f'"{info.name}"' in single and "NVIDIA H200" not in single  # one device's header names it


def _run_host(kernels: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess, np.ndarray]:
    """Build the C host example against `kernels`, run it on its device 0 with a 5x5
    filter; its result, and whether it was right."""
    binary = kernels / "convolve_host"
    source = str(ROOT / "examples/c_host/convolve_host.c")
    flags = ["-O2", "-Wall", "-Werror", "-std=c11", f"-I{kernels}"]
    subprocess.run(["gcc", *flags, "-o", str(binary), source, "-lOpenCL", "-lm"], check=True)
    rng = np.random.default_rng(5)
    filt = rng.uniform(-1, 1, (5, 5)).astype(np.float32)
    (tmp_path / "filter.txt").write_text("\n".join(" ".join(f"{v:.9g}" for v in row) for row in filt))
    image = rng.uniform(0, 255, (37, 29)).astype(np.float32)
    image.tofile(tmp_path / "image.raw")
    args = [
        "-d",
        "0",
        f"29x37:{tmp_path / 'image.raw'}",
        str(tmp_path / "filter.txt"),
        str(tmp_path / "out.raw"),
    ]
    result = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = np.fromfile(tmp_path / "out.raw", dtype=np.float32).reshape(33, 25)
    np.testing.assert_allclose(out, scipy_valid(image, filt), rtol=1e-5, atol=1e-3)
    return result, out


@pytest.mark.skipif(
    not HAS_OPENCL_HEADERS, reason="needs gcc, opencl-headers and ocl-icd-opencl-dev (.ci/run installs them)"
)
def test_c_host_picks_its_devices_kernel_at_run_time(fleet_db, tmp_path):
    first, _ = _run_host(_export(fleet_db, tmp_path / "first", "--device-name", "H200"), tmp_path)
    # The host numbers devices in its loader's order: tune "its" device 0 in the database.
    name, platform = re.match(r"convolve_host: (.*) \((.*)\): ", first.stderr).groups()
    assert "using the default entry" in first.stderr  # no H200 here: the default entry ran, and was right
    with sqlite3.connect(fleet_db.removeprefix("sqlite:///")) as connection:
        connection.execute(
            "UPDATE autotune_devices SET name = ?, platform = ? WHERE name != ?",
            (name, platform, H200["name"]),
        )
    connection.close()
    tuned, _ = _run_host(_export(fleet_db, tmp_path / "all", "--all-devices"), tmp_path)
    assert f"{name} ({platform}): kernel tuned on it" in tuned.stderr


def _export(db: str, out: Path, *args: str) -> Path:
    result = run_cli("export", *args, "--out", str(out), "--db", db)
    assert result.returncode == 0, result.stderr
    return out
