"""Installing a plugin distribution the way its users would (a wheel built from its source), into a
directory of its own rather than the running environment, for every plugin kind's end-to-end tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def install_distribution(source: Path, target: Path) -> Path:
    """Build the plugin distribution in ``source`` and install it into the directory ``target`` (not the
    running environment); run a process with ``PYTHONPATH=<target>`` to load it. Returns ``target``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return target
