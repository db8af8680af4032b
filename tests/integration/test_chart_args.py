"""Koordinator's chart starts our cluster processes unchanged: each process gets the chart's exact
arguments and answers the chart's readiness probe on the chart's port (in a private network namespace:
those ports are fixed), exits 0 on SIGTERM, and names each flag without effect here once in its log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT

pytestmark = [pytest.mark.root, pytest.mark.slow]


def run(process: str, tmp: Path, *extra: str) -> dict[str, Any]:
    out = subprocess.run(
        ["unshare", "--net", sys.executable, "-m", "tests.integration.chartrun", process, str(tmp), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_koord_manager_takes_the_charts_args_and_answers_readyz_on_8000(tmp_path: Path) -> None:
    r = run("koord-manager", tmp_path)
    assert r["ready"] and r["code"] == 0, r["tail"]
    assert r["webhook"], r["tail"]  # the chart's WEBHOOK_PORT: the admission webhooks are served
    # --logtostderr=true asks for what we do, --feature-gates= is empty: nothing to name.
    assert r["warnings"] == [], r["warnings"]


def test_koord_scheduler_takes_the_charts_args_and_names_the_skip_lookup_flag_once(tmp_path: Path) -> None:
    r = run("koord-scheduler", tmp_path, "--bind-address=0.0.0.0", "--authorization-kubeconfig=/etc/k")
    assert r["ready"] and r["code"] == 0, r["tail"]
    named = sorted(w.split("--", 1)[1].split("=", 1)[0] for w in r["warnings"])
    assert named == ["authentication-skip-lookup", "authorization-kubeconfig", "bind-address"], r["warnings"]


def test_koord_descheduler_takes_the_charts_args_and_answers_healthz_on_10251(tmp_path: Path) -> None:
    r = run("koord-descheduler", tmp_path, "--leader-elect=false", "-secure-port", "10259")
    assert r["ready"] and r["code"] == 0, r["tail"]
    assert [w.split("--", 1)[1].split(":", 1)[0] for w in r["warnings"]] == ["secure-port=10259"]
