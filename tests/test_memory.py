"""Every template path under Oclgrind: no invalid access, uninitialised read or race."""

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_kernels_are_memory_safe_under_oclgrind():
    # Needs Debian's oclgrind, which .ci/run installs: without it this fails, it does not skip.
    library = Path("/usr/lib/oclgrind/liboclgrind-rt-icd.so")
    assert library.exists(), "install oclgrind (apt-get install oclgrind)"
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
