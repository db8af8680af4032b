"""One cluster process started with the exact arguments of Koordinator's chart, inside a private network
namespace so the chart's fixed ports (10251, 8080, 8000) collide with nothing on the machine: the test API
server runs here too, the process gets it through ``KUBECONFIG`` (the chart's pods are in-cluster), and its
readiness probe is asked where the chart asks. Prints one JSON line: ready, exit code, the log's warnings.

Run as root: ``unshare --net python -m tests.integration.chartrun <process> <dir>``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from tests.apiserver import APIServer
from tests.apiserver.manifests import DEFAULT_CRDS
from tests.managerharness import write_kubeconfig
from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"
CRDS = [*DEFAULT_CRDS, *sorted((DEPLOY / "scheduler" / "crds").glob("*.yaml"))]


def _configmap_value(path: Path, name: str, key: str) -> str:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == "ConfigMap" and doc["metadata"]["name"] == name:
            return str(doc["data"][key])
    raise LookupError(f"{path}: no ConfigMap {name}")


def chart(process: str, tmp: Path) -> tuple[str, list[str], str]:
    """The module, the chart's arguments (the mounted config file's path is the one change) and the URL
    its readiness probe asks."""
    if process == "koord-manager":
        args = [
            "--enable-leader-election",
            "--metrics-addr=:8080",
            "--health-probe-addr=:8000",
            "--logtostderr=true",
            "--leader-election-namespace=koordinator-system",
            "--v=4",
            "--feature-gates=",
            "--sync-period=0",
            "--config-namespace=koordinator-system",
        ]
        return "koord.manager", args, "http://127.0.0.1:8000/readyz"
    if process == "koord-scheduler":
        config = tmp / "koord-scheduler.config"
        config.write_text((DEPLOY / "scheduler" / "koordinator-profile.yaml").read_text())
        args = [
            "--port=10251",
            "--logtostderr=true",
            "--authentication-skip-lookup=true",
            "--v=4",
            "--feature-gates=",
            f"--config={config}",
        ]
        return "koord.scheduler", args, "http://127.0.0.1:10251/healthz"
    if process == "koord-descheduler":
        config = tmp / "koord-descheduler.config"
        manifest = DEPLOY / "descheduler" / "koord-descheduler.yaml"
        config.write_text(_configmap_value(manifest, "koord-descheduler-config", "koord-descheduler-config"))
        return "koord.descheduler", ["--v=4", f"--config={config}"], "http://127.0.0.1:10251/healthz"
    raise SystemExit(f"unknown process {process}")


def ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status) == 200
    except (OSError, urllib.error.HTTPError):
        return False


def main(process: str, tmp: Path, *extra: str) -> dict[str, object]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with APIServer(crds=CRDS) as server:
        server.store.create("namespaces", {"metadata": {"name": "koordinator-system"}}, keep_status=False)
        kubeconfig = write_kubeconfig(tmp / "kubeconfig.json", server)
        module, args, probe = chart(process, tmp)
        log = tmp / f"{process}.log"
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAME": f"{process}-0"}
        env["POD_NAMESPACE"] = "koordinator-system"
        if process == "koord-manager":  # the chart's env: the webhook server on 9876
            env |= {"WEBHOOK_PORT": "9876", "WEBHOOK_CONFIGURATION_FAILURE_POLICY_PODS": "Ignore"}
        with log.open("w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", module, *args, *extra], stdout=out, stderr=subprocess.STDOUT, env=env
            )
            deadline, ready = time.monotonic() + 90, False
            while time.monotonic() < deadline and proc.poll() is None and not ready:
                ready = ok(probe)
                time.sleep(0.1)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait(10)
    text = log.read_text(errors="replace")
    warnings = [line for line in text.splitlines() if "accepted and ignored" in line]
    webhook = "webhook server on port 9876" in text
    return {"ready": ready, "code": code, "warnings": warnings, "webhook": webhook, "tail": text[-3000:]}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]), *sys.argv[3:])))
