"""Build a plugin distribution from a fixture directory as a wheel and install that wheel into a site
directory of its own (put it on ``PYTHONPATH`` to make its entry points visible), as a user would
``pip install`` a published plugin; the install step is the kit's ``install_distribution``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from koordshared.testing.dist import install_distribution


def install_wheel(fixture: Path, work: Path, dist: str) -> Path:
    """The site directory where ``dist`` (the distribution's name with underscores) is installed."""
    src = work / "src"
    shutil.copytree(fixture, src)
    wheels = work / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(src),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    (wheel,) = wheels.glob(f"{dist}-*.whl")
    site = install_distribution(wheel, work / "site")
    assert list(site.glob(f"{dist}-*.dist-info")), f"{dist} installed"
    return site
