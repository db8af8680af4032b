"""The CI gating rules of tests/conftest.py: an unmet need skips off CI and fails on CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PROBE = """
import pytest
from koordlet.system import native

@pytest.mark.native
def test_uses_the_c_helpers():
    assert native.HAS_NATIVE
"""
# A run in which the compiled module cannot be imported, as after a broken C build.
NO_NATIVE = (
    "import sys; sys.modules['koordlet.system._native'] = None; import pytest; sys.exit(pytest.main())"
)


@pytest.mark.parametrize(("ci", "outcome"), [("", "1 skipped"), ("true", "1 error")])
def test_a_missing_native_module_skips_off_ci_and_fails_on_ci(tmp_path: Path, ci: str, outcome: str) -> None:
    probe = ROOT / "tests" / "unit" / "repo" / f"test_zz_probe_{ci or 'local'}.py"
    probe.write_text(PROBE)
    try:
        run = subprocess.run(
            [sys.executable, "-c", NO_NATIVE, "-q", "-p", "no:cacheprovider", "-rs", str(probe)],
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "CI": ci, "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        probe.unlink()
    assert outcome in run.stdout, run.stdout[-2000:]
    assert "needs the compiled native module" in run.stdout
