"""Every file the tool writes appears whole or not at all, with the permissions the
user's umask asks for: a failed write leaves whatever was there before."""

import os
import resource
import shutil
import sqlite3
import stat
import subprocess
import sys

import numpy as np
import pytest

from autotune.devices import device_info
from tests.conftest import ROOT, run_cli


@pytest.fixture
def tuned_db(tmp_path):
    """The schema 0002 fixture, upgraded, its device this machine's (tuned F = 3, 5, 7)."""
    path = tmp_path / "tuned.db"
    shutil.copy(ROOT / "tests" / "fixtures" / "schema_0002.db", path)
    info = device_info(0)
    with sqlite3.connect(path) as connection:
        connection.execute(
            "UPDATE autotune_devices SET platform = ?, name = ?, vendor = ?, driver = ?",
            (info.platform, info.name, info.vendor, info.driver_version),
        )
    connection.close()
    return f"sqlite:///{path}"


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_written_files_honour_the_umask(tmp_path, tuned_db, umask_022):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "in.npy", rng.uniform(-1, 1, (20, 30)).astype(np.float32))
    np.save(tmp_path / "f.npy", rng.uniform(-1, 1, (3, 3)).astype(np.float32))
    for args in (
        ["render", "-f", "3", "--preset", "baseline", "--out", str(tmp_path / "rendered")],
        [
            "export",
            "-d",
            "0",
            "--format",
            "cl,json,header,t4",
            "--out",
            str(tmp_path / "exported"),
            "--db",
            tuned_db,
        ],
        [
            "convolve",
            str(tmp_path / "in.npy"),
            str(tmp_path / "out.npy"),
            "--filter",
            str(tmp_path / "f.npy"),
            "--db",
            f"sqlite:///{tmp_path / 'none.db'}",
        ],
    ):
        result = run_cli(*args)
        assert result.returncode == 0, result.stderr
    written = [
        *(tmp_path / "rendered").iterdir(),
        *(tmp_path / "exported").iterdir(),
        tmp_path / "out.npy",
    ]
    assert len(written) == 2 + 3 * 2 + 2 + 1
    assert {p.name: oct(mode(p)) for p in written} == {p.name: oct(0o644) for p in written}
    os.umask(0o077)
    assert (
        run_cli("render", "-f", "3", "--preset", "baseline", "--out", str(tmp_path / "private")).returncode
        == 0
    )
    assert {mode(p) for p in (tmp_path / "private").iterdir()} == {0o600}


def test_a_failed_export_or_render_leaves_the_earlier_files(tmp_path, tuned_db):
    """A directory where the header should go: nothing of the new set replaces the old."""
    out = tmp_path / "kernels"
    out.mkdir()
    for name in ("convolve_f3.cl", "convolve_f3.json"):
        (out / name).write_text("earlier export\n")
    (out / "autotune_kernels.h").mkdir()
    result = run_cli("export", "-d", "0", "--out", str(out), "--db", tuned_db)
    assert result.returncode == 1 and result.stderr.startswith("autotune: error: cannot write to")
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in out.iterdir()) == [
        "autotune_kernels.h",
        "convolve_f3.cl",
        "convolve_f3.json",
    ]
    assert {(out / n).read_text() for n in ("convolve_f3.cl", "convolve_f3.json")} == {"earlier export\n"}

    rendered = tmp_path / "rendered"
    rendered.mkdir()
    (rendered / "convolve_f5.cl").write_text("earlier render\n")
    (rendered / "convolve_f5.json").mkdir()
    result = run_cli("render", "-f", "5", "--preset", "float4", "--out", str(rendered))
    assert result.returncode == 1 and "cannot write to" in result.stderr
    assert (rendered / "convolve_f5.cl").read_text() == "earlier render\n"
    assert leftovers(rendered) == []


def test_convolve_on_a_full_disk_keeps_the_earlier_output(tmp_path):
    """The output write fails for real (RLIMIT_FSIZE: EFBIG past the limit, as a full
    disk fails with ENOSPC): OUT.npy from before is still there, whole."""
    rng = np.random.default_rng(1)
    np.save(tmp_path / "in.npy", rng.uniform(-1, 1, (1000, 1100)).astype(np.float32))  # 4.4 MB out
    np.save(tmp_path / "f.npy", rng.uniform(-1, 1, (3, 3)).astype(np.float32))
    earlier = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.save(tmp_path / "out.npy", earlier)
    limit = 2 * 1024 * 1024  # past what the OpenCL compiler writes for itself

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = dict(os.environ, PYTHONPATH=str(ROOT), POCL_KERNEL_CACHE="0")
    args = [
        "convolve",
        str(tmp_path / "in.npy"),
        str(tmp_path / "out.npy"),
        "--filter",
        str(tmp_path / "f.npy"),
    ]
    args += ["--db", f"sqlite:///{tmp_path / 'none.db'}"]  # none: the default kernel
    result = subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=small_files,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"autotune: error: cannot write {tmp_path / 'out.npy'}")
    assert len(result.stderr.strip().splitlines()) == 1
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), earlier)
    assert leftovers(tmp_path) == []
    # and without the limit the same command replaces it
    assert run_cli(*args).returncode == 0
    assert np.load(tmp_path / "out.npy").shape == (998, 1098)
    assert leftovers(tmp_path) == []
