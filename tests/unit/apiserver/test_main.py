"""``python -m tests.apiserver``: the server outside pytest, until SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.paths import ROOT


def test_entry_point_serves_until_sigterm(tmp_path: Path) -> None:
    from kubernetes import client, config

    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.apiserver", "--kubeconfig", str(kubeconfig), "--authorization"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line, line
        api = config.new_client_from_config(str(kubeconfig))
        names = [
            n.metadata.name if n.metadata else None for n in client.CoreV1Api(api).list_namespace().items
        ]
        assert "kube-system" in names
        groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
        assert "slo.koordinator.sh" in groups
        assert yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_server_modules_do_not_import_pytest() -> None:
    code = "import sys, tests.apiserver.__main__; print('pytest' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
