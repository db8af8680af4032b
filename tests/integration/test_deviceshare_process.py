"""DeviceShare in the real ``koord-scheduler`` process against the test API server (with the repository's
Device CRD): GPU pods placed on the Device-backed nodes with the ``device-allocated`` annotation (the
Device's ids, whole and shared GPUs), a pod that no GPU can take reported, then placed when a Device reports
one more healthy GPU; a restarted scheduler rebuilding the taken GPUs from the pods' annotations; and the
ClusterRole and Role of ``deploy/scheduler/deviceshare-rbac.yaml`` allowing exactly the plugin's own API
traffic."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordlet.testing.wait import wait_until
from koordshared.apis.extension.deviceshare import ANNOTATION_DEVICE_ALLOCATED
from koordshared.apis.scheduling import device as dv
from koordshared.testing.devices import device, device_node, gpu
from koordshared.testing.objects import pod
from tests.apiserver import APIServer
from tests.apiserver.fixtures import DEFAULT_CRDS, api_server_factory  # noqa: F401
from tests.cluster.koordscheduler import configuration, running
from tests.support.paths import ROOT
from tests.support.scheduler.devicekit import S, profile
from tests.unit.deploy.test_rbac import READ_VERBS, allows, attributes, granted

pytestmark = pytest.mark.slow

DEPLOY = ROOT / "deploy" / "scheduler"
CRD = DEPLOY / "crds" / "scheduling.koordinator.sh_devices.yaml"
RESERVATION_CRD = DEPLOY / "crds" / "scheduling.koordinator.sh_reservations.yaml"
CONFIG = configuration(profile())
WHOLE = {dv.RESOURCE_NVIDIA_GPU: "1"}
SHARE = {dv.RESOURCE_GPU_CORE: "50", dv.RESOURCE_GPU_MEMORY_RATIO: "50"}


@pytest.fixture
def server(api_server_factory: Callable[..., APIServer]) -> APIServer:  # noqa: F811
    return api_server_factory(crds=[*DEFAULT_CRDS, CRD, RESERVATION_CRD])


def create_pod(server: APIServer, name: str, requests: dict[str, str]) -> None:
    obj = pod(name, requests=requests, limits=requests, scheduler_name=S)  # extended: limits = requests
    server.store.create("pods", {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "uid"}})


def bound(server: APIServer) -> dict[str, str]:
    pods, _ = server.store.list("pods", "default")
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}


def allocated(server: APIServer, name: str) -> dict[str, Any]:
    text = (
        server.store.get("pods", name, "default")["metadata"]
        .get("annotations", {})
        .get(ANNOTATION_DEVICE_ALLOCATED)
    )
    return json.loads(text) if text else {}


def failures(server: APIServer, name: str) -> list[str]:
    events, _ = server.store.list("events", "default")
    return [
        str(e.get("message"))
        for e in events
        if e.get("involvedObject", {}).get("name") == name and e.get("reason") == "FailedScheduling"
    ]


def wait(cond: Callable[[], object], log: Path, timeout: float = 30) -> None:
    assert wait_until(cond, timeout, step=0.05), log.read_text()[-3000:]


def test_gpu_pods_in_the_process(server: APIServer, tmp_path: Path) -> None:
    # n1: two GPUs, the second unhealthy for now; n2: a node without a Device and without GPUs.
    server.store.create("nodes", device_node("n1", gpus=2))
    server.store.create("nodes", device_node("n2"))
    server.store.create("devices", device("n1", gpu(0), gpu(1, healthy=False)))
    before = len(server.requests)
    with running(tmp_path, server, CONFIG, name="first") as ks:
        log = ks.log_path
        create_pod(server, "whole", WHOLE)
        wait(lambda: "whole" in bound(server) and allocated(server, "whole"), log)
        assert bound(server)["whole"] == "n1"
        (gpu0,) = allocated(server, "whole")["gpu"]
        assert gpu0["minor"] == 0 and gpu0["id"] == "GPU-0"
        assert gpu0["resources"] == {
            dv.RESOURCE_GPU_CORE: "100",
            dv.RESOURCE_GPU_MEMORY: "16Gi",
            dv.RESOURCE_GPU_MEMORY_RATIO: "100",
        }
        # No healthy GPU left: the shared pod waits, and says why.
        create_pod(server, "share", SHARE)
        wait(lambda: failures(server, "share"), log)
        assert "Insufficient GPU Devices" in failures(server, "share")[0], failures(server, "share")
        # The node agent reports GPU 1 healthy: the Device update brings the pod back.
        server.store.patch("devices", "n1", {"spec": {"devices": [gpu(0), gpu(1)]}})
        wait(lambda: "share" in bound(server) and allocated(server, "share"), log)
        (gpu1,) = allocated(server, "share")["gpu"]
        assert gpu1["minor"] == 1 and gpu1["resources"][dv.RESOURCE_GPU_MEMORY] == "8Gi"
    traffic = {
        attributes(r)
        for r in server.requests[before:]
        if any(part in r.path for part in ("/devices", "/configmaps", "/reservations"))
    }

    # A new process sees both GPUs taken from the pods' annotations: a whole-GPU pod cannot go anywhere.
    with running(tmp_path, server, CONFIG, name="second") as ks:
        log = ks.log_path
        create_pod(server, "late", WHOLE)
        wait(lambda: failures(server, "late"), log)
        # n1's kubelet-level count has room (nvidia.com/gpu 1 of 2 requested): DeviceShare says no.
        assert "late" not in bound(server) and "1 Insufficient GPU Devices" in failures(server, "late")[0]

    docs = [d for d in yaml.safe_load_all((DEPLOY / "deviceshare-rbac.yaml").read_text()) if d]
    rules = [r for d in docs if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert sorted((a.verb, a.resource) for a in traffic if not allows(rules, a)) == []
    unused = sorted(
        (a.verb, a.resource) for a in granted(rules) if a not in traffic and a.verb not in READ_VERBS
    )
    assert unused == []
    assert {("list", "devices"), ("watch", "devices"), ("list", "configmaps"), ("list", "reservations")} <= {
        (a.verb, a.resource) for a in traffic
    }
    namespaces = {
        r.path.split("/namespaces/")[1].split("/")[0]
        for r in server.requests[before:]
        if "/configmaps" in r.path
    }
    assert namespaces == {role["metadata"]["namespace"]}
