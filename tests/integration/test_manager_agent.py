"""End to end: koord-manager renders NodeMetric and NodeSLO from the ConfigMap, the real agent process in
cluster mode picks them up (its host-application collector samples the application the rendered NodeSLO
declares, a real cgroup), reports its NodeMetric status, and the manager lends batch resources from it.
A ConfigMap change reaches the agent the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordlet.testing.agent import Agent, http_get
from koordlet.testing.cgroups import RealKubepods
from koordlet.testing.kubelet import FakeKubelet
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.managerharness import (
    get,
    running_manager,
    set_config,
    wait_until,
    write_kubeconfig,
)

NODE = "e2e-node"


def host_app(name: str, cgroup: str) -> dict[str, Any]:
    return {
        "name": name,
        "priority": "koord-prod",
        "qos": "LS",
        "cgroupPath": {"base": "CgroupRoot", "relativePath": cgroup},
    }


def agent_metrics(agent: Agent) -> str:
    try:
        status, body = http_get(agent.base + "/metrics")
    except OSError:
        return ""
    return body.decode() if status == 200 else ""


def samples_app(agent: Agent, name: str) -> bool:
    return f'host_application_name="{name}"' in agent_metrics(agent)


@pytest.fixture
def kubelet() -> Iterator[FakeKubelet]:
    with FakeKubelet() as k:
        yield k


@pytest.mark.root
@pytest.mark.slow
def test_agent_in_cluster_mode_picks_up_what_the_manager_renders(
    api_server: APIServer,  # noqa: F811
    kubelet: FakeKubelet,
    kubepods: RealKubepods,
    tmp_path: Path,
) -> None:
    kubepods.tree.mkdir("hostapp")  # the host application's cgroup, under the test parent
    set_config(
        api_server,
        colocation_config={"enable": True},
        resource_threshold_config={"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60}},
        host_application_config={"applications": [host_app("e2e-app", "hostapp")]},
    )
    api_server.store.create("nodes", objects.node(NODE, "64", "256Gi", kubelet_port=kubelet.port))
    with running_manager(api_server):
        wait_until(lambda: get(api_server, "nodeslos", NODE) is not None, 10, "NodeSLO rendered")
        slo = get(api_server, "nodeslos", NODE)
        assert slo is not None and slo["spec"]["hostApplications"][0]["name"] == "e2e-app"
        agent = Agent(
            tmp_path,
            f"--cgroup-root=/{kubepods.parent}",
            "--kubelet-insecure-tls",
            f"--kubelet-read-only-port={kubelet.port}",
            env={"NODE_NAME": NODE},
            kubeconfig=write_kubeconfig(tmp_path / "kubeconfig.json", api_server),
        )
        try:
            agent.wait_ready()
            wait_until(lambda: samples_app(agent, "e2e-app"), 30, "the agent samples the NodeSLO's host app")
            # The agent reports into the NodeMetric the manager created; the manager lends from it.
            wait_until(
                lambda: bool(
                    ((get(api_server, "nodemetrics", NODE) or {}).get("status") or {}).get("updateTime")
                ),
                30,
                "NodeMetric status reported",
            )
            nm = get(api_server, "nodemetrics", NODE)
            assert nm is not None and nm["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 60

            def lent() -> bool:
                alloc = ((get(api_server, "nodes", NODE) or {}).get("status") or {}).get("allocatable") or {}
                return "kubernetes.io/batch-cpu" in alloc and "kubernetes.io/batch-memory" in alloc

            wait_until(lent, 10, "batch resources from the agent's report")

            set_config(
                api_server,
                colocation_config={"enable": True},
                resource_threshold_config={
                    "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60}
                },
                host_application_config={"applications": [host_app("renamed-app", "hostapp")]},
            )
            wait_until(
                lambda: samples_app(agent, "renamed-app"), 30, "the re-rendered NodeSLO reaches the agent"
            )
            log = agent.tail(200_000)
            assert "NodeSLO refused" not in log
            assert "NodeSLO generation 2 in force" in log
        finally:
            assert agent.stop() == 0, agent.tail()
