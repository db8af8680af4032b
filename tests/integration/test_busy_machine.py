"""The whole real-kernel suite on a busy machine: one core kept spinning outside kubepods (as a node's
system daemons or a neighbour would) while every ``root`` test of the integration and fault-matrix
suites runs in a child pytest. Non-pod load is real load for the agent; the tests must account for it
(koordlet.testing.load), and this run proves they do."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from koordlet.testing.load import busy_outside_kubepods
from tests.support.paths import ROOT

THIS = "tests/integration/test_busy_machine.py"


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_real_kernel_suite_passes_with_a_core_kept_busy() -> None:
    with busy_outside_kubepods(cores=1) as spinners:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-m",
                "root",
                "-p",
                "no:cacheprovider",
                "--deselect",
                f"{THIS}::test_the_real_kernel_suite_passes_with_a_core_kept_busy",
                "tests/integration",
                "tests/faults",
                "tests/unit",
            ],
            cwd=ROOT,
            env=dict(os.environ),
            capture_output=True,
            text=True,
            timeout=840,
            check=False,
        )
        assert all(p.poll() is None for p in spinners), "the load ran all along"
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary, summary
