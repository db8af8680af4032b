"""Every committed CRD under ``deploy/`` is what its generator writes (``gen_*.py --check``, run as an
operator would run it), and a stale file is named by the check."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"
GENERATORS = sorted(DEPLOY.glob("*/crds/gen_*.py"))


def check(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, check=False
    )


def test_every_crd_directory_has_its_generators() -> None:
    assert {p.parent.parent.name for p in GENERATORS} == {"daemonset", "scheduler", "descheduler"}
    assert len(GENERATORS) >= 5


@pytest.mark.parametrize("script", GENERATORS, ids=[f"{p.parent.parent.name}/{p.name}" for p in GENERATORS])
def test_the_committed_yaml_is_what_the_generator_writes(script: Path) -> None:
    done = check(script)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_stale_crd_is_named(tmp_path: Path) -> None:
    crds = tmp_path / "deploy"
    shutil.copytree(DEPLOY / "daemonset" / "crds", crds / "daemonset" / "crds")
    shutil.copytree(DEPLOY / "scheduler" / "crds", crds / "scheduler" / "crds")
    stale = crds / "scheduler" / "crds" / "scheduling.sigs.k8s.io_podgroups.yaml"
    stale.write_text(stale.read_text() + "# edited by hand\n")
    done = check(crds / "scheduler" / "crds" / "gen_podgroup_crd.py")
    assert done.returncode == 1
    assert done.stdout == "scheduling.sigs.k8s.io_podgroups.yaml is out of date: run gen_podgroup_crd.py\n"
