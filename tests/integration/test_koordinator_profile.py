"""Koordinator's default koord-scheduler profile as shipped (``deploy/scheduler/koordinator-profile.yaml``,
the plugins and args of Koordinator's ``config/manager/scheduler-config.yaml``): every plugin it names is
one of ours at the points it lists, and the real process runs it unchanged against an authorizing test
API server holding the CRDs and the RBAC of ``deploy/scheduler/``. One process places, each through the
plugin that owns it: a plain pod, a gang of two (Coscheduling), a pod charged to an ElasticQuota, an LSR
pod on whole cores (NodeNUMAResource), a Reservation and its owner inside it (Reservation), a GPU pod
(DeviceShare); no request it makes is refused."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from koord.scheduler import cli, config
from koord.scheduler.plugins import plugin_registry
from koordlet.testing.wait import wait_until
from koordshared.apis.extension import elasticquota as eq
from koordshared.apis.extension.deviceshare import ANNOTATION_DEVICE_ALLOCATED
from koordshared.apis.extension.numa import resource_status
from koordshared.apis.scheduling import device as dv
from koordshared.testing import objects
from koordshared.testing.devices import device, device_node, gpu
from koordshared.testing.reservations import owner_labels, reservation
from koordshared.testing.topology import TWO_SOCKETS, node_resource_topology
from tests.apiserver import APIServer
from tests.apiserver.fixtures import DEFAULT_CRDS
from tests.cluster.koordscheduler import KoordSchedulerProcess, node_of
from tests.support.paths import ROOT
from tests.support.scheduler.gangkit import member
from tests.support.scheduler.numakit import lsr

pytestmark = pytest.mark.slow

DEPLOY = ROOT / "deploy" / "scheduler"
PROFILE = DEPLOY / "koordinator-profile.yaml"
NS = "koordinator-system"
RBAC = sorted(DEPLOY.glob("*rbac.yaml"))
"""koord-scheduler's own RBAC and each plugin's (the extender's ``rbac.yaml`` grants another account)."""
WEB = {"app": "web"}
WHOLE_GPU = {dv.RESOURCE_NVIDIA_GPU: "1"}  # an extended resource: limits = requests


def shipped() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(PROFILE.read_text())
    return doc


def test_every_plugin_of_the_shipped_profile_is_ours_at_the_points_it_names(tmp_path: Path) -> None:
    conf = config.parse_configuration(shipped(), registered=frozenset(plugin_registry().names()))
    (profile,) = conf.profiles
    assert profile.scheduler_name == "koord-scheduler"
    path = tmp_path / "config.yaml"
    path.write_text(PROFILE.read_text())
    result = CliRunner().invoke(cli.main, [f"--config={path}", "--list-plugins"])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: set(line.split()[-1].split(",")) for line in result.output.splitlines()[1:]}
    wanted = {
        (ref["name"], point)
        for point, refs in shipped()["profiles"][0]["plugins"].items()
        for ref in refs.get("enabled", ())
    }
    assert {"Coscheduling", "ElasticQuota", "Reservation", "NodeNUMAResource", "DeviceShare"} <= {
        n for n, _ in wanted
    }
    missing = sorted((n, pt) for n, pt in wanted if f"koord-scheduler:{pt}" not in rows.get(n, set()))
    assert not missing, missing


def create(server: APIServer, kind: str, obj: dict[str, Any]) -> None:
    """As a client creates it: the server assigns the uid."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "uid"}
    server.store.create(kind, {**obj, "metadata": meta})


def test_the_shipped_profile_starts_and_schedules_with_every_plugin(tmp_path: Path) -> None:
    crds = [*DEFAULT_CRDS, *sorted((DEPLOY / "crds").glob("*.yaml"))]
    with APIServer(crds=crds, authorization=True) as server:
        server.store.create("namespaces", {"metadata": {"name": NS}}, keep_status=False)
        server.apply(*RBAC)
        server.store.create("nodes", objects.node("a", "16", "64Gi"))
        server.store.create("nodes", device_node("b", gpus=2, cpu="16", memory="64Gi"))
        server.store.create("devices", device("b", gpu(0), gpu(1)))
        for name in ("a", "b"):
            server.store.create(
                "nodemetrics", objects.node_metric(name, update_time=time.time(), cpu_milli=500)
            )
        server.store.create("noderesourcetopologies", node_resource_topology("a", TWO_SOCKETS))
        create(
            server, "elasticquotas", objects.elastic_quota("team", minimum={"cpu": "2"}, maximum={"cpu": "4"})
        )
        create(server, "reservations", reservation("hold", {"cpu": "2"}, owners=[owner_labels(WEB)]))

        ks = KoordSchedulerProcess(
            tmp_path, server, shipped(), elect=True, token=server.token_for(NS, "koord-scheduler")
        )
        try:
            assert ks.ready(60), ks.log()[-3000:]

            def placed(*names: str) -> bool:
                return all(node_of(server, n) for n in names)

            def phase(name: str) -> str:
                return str(server.store.get("reservations", name).get("status", {}).get("phase", ""))

            assert wait_until(lambda: phase("hold") == "Available", 60, step=0.05), ks.log()[-3000:]
            create(
                server, "pods", objects.pod("plain", requests={"cpu": "1"}, scheduler_name="koord-scheduler")
            )
            for m in ("g1", "g2"):
                create(server, "pods", member(m, "gang", 2))
            create(
                server,
                "pods",
                objects.pod(
                    "charged",
                    requests={"cpu": "1"},
                    labels={eq.LABEL_QUOTA_NAME: "team"},
                    scheduler_name="koord-scheduler",
                ),
            )
            create(server, "pods", lsr("pinned", "4"))
            create(
                server,
                "pods",
                objects.pod("owner", requests={"cpu": "2"}, labels=WEB, scheduler_name="koord-scheduler"),
            )
            create(
                server,
                "pods",
                objects.pod("gpu", requests=WHOLE_GPU, limits=WHOLE_GPU, scheduler_name="koord-scheduler"),
            )
            names = ("plain", "g1", "g2", "charged", "pinned", "owner", "gpu")
            assert wait_until(lambda: placed(*names), 60, step=0.05), ks.log()[-3000:]

            pinned = server.store.get("pods", "pinned", "default")["metadata"]["annotations"]
            assert node_of(server, "pinned") == "a" and len(resource_status(pinned).cpus) == 4
            gpu_pod = server.store.get("pods", "gpu", "default")["metadata"].get("annotations") or {}
            assert node_of(server, "gpu") == "b" and ANNOTATION_DEVICE_ALLOCATED in gpu_pod
            owner = server.store.get("pods", "owner", "default")["metadata"].get("annotations") or {}
            assert "scheduling.koordinator.sh/reservation-allocated" in owner
            assert wait_until(lambda: phase("hold") == "Succeeded", 30, step=0.05), ks.log()[-3000:]

            def used_cpu() -> str:
                quota = server.store.get("elasticquotas", "team", "default")
                return str(quota.get("status", {}).get("used", {}).get("cpu", ""))

            assert wait_until(lambda: used_cpu() in ("1", "1000m"), 30, step=0.05), used_cpu()
        finally:
            code = ks.stop()
        assert code == 0, ks.log()[-3000:]
        ours = [r for r in server.requests if r.headers.get("User-Agent", "").startswith("koord-scheduler/")]
    denied = [(r.method, r.path, r.status) for r in ours if r.status == 403]
    assert not denied, denied
