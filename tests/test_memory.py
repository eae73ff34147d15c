"""Every template path under Oclgrind: no invalid access, uninitialised read or race."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.mark.skipif(
    not Path("/usr/lib/oclgrind/liboclgrind-rt-icd.so").exists(),
    reason="needs Debian's oclgrind (.ci/run installs it)",
)
def test_kernels_are_memory_safe_under_oclgrind():
    result = subprocess.run(
        [sys.executable, str(ROOT / "checks/memory.py")],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "0 with a reported problem" in result.stdout
    assert "planted invalid read it caught" in result.stdout
