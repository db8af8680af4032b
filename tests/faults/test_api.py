"""Cluster-side faults against the real agent process (F8, F9, F11, F18 and 10 000 pods at once): the
test API server and a fake kubelet misbehave; the agent keeps sampling, stops acting on stale pods, opens
nothing a malicious pod list points at, and stays responsive."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import psutil
import pytest

from koordlet.api import KubeQOSClass
from koordlet.system import inotify
from koordlet.testing import wait_until
from koordlet.testing.agent import Agent, http_get, koordlet_command
from koordlet.testing.cgroups import RealKubepods
from koordlet.testing.kubelet import pod_object
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.faults.clusteragent import NODE, cluster_agent
from tests.faults.probes import read_int, samples, total, tracebacks

IN_OPEN, IN_ACCESS, IN_MODIFY = 0x20, 0x01, 0x02


def node_cpu(agent: Agent) -> list[float]:
    return [v for _l, v in samples(agent, "koordlet_node_resource_usage", resource="cpu")]


def degraded(agent: Agent) -> float:
    return total(agent, "koordlet_states_informer_degraded")


def test_the_daemonset_path_imports_no_kubernetes_module(tmp_path: Path, api_server: APIServer) -> None:
    # F20 memory: the package's __init__ alone is some 17 MiB of the agent's RSS (oauthlib, requests,
    # pydantic, websocket); a kubeconfig with a token is served by the lean client, the API server's
    # answers mapped by koordshared.kube.client, the kubelet shown the same token.
    nodemetric = objects.node_metric(NODE, update_time=None, report_interval=1, with_node_metric=False)
    api_server.store.create("nodemetrics", nodemetric)
    pods = [pod_object(str(uuid.uuid4()), f"web-{i}", node=NODE) for i in range(3)]
    env = {"PYTHONPROFILEIMPORTTIME": "1"}  # every module imported, to the log, while the agent lives
    with cluster_agent(tmp_path, api_server, "--node-metric-report-min-interval=1s", env=env) as (
        agent,
        kubelet,
    ):
        kubelet.set_pods(pods)
        assert wait_until(lambda: total(agent, "koordlet_states_informer_pods") == 3, 10), agent.tail()
        written = {"result": "ok"}
        assert wait_until(lambda: total(agent, "koordlet_nodemetric_report_total", **written) >= 1, 15), (
            agent.tail()
        )
        imported = [
            line.rsplit("|", 1)[1].strip()
            for line in agent.log.read_text().splitlines()
            if line.startswith("import time:") and "|" in line
        ]
    assert "koordlet.statesinformer.kube" in imported  # the log is the import trace
    assert [m for m in imported if m.split(".")[0] == "kubernetes"] == []


def test_an_unknown_feature_gate_is_a_clear_exit() -> None:
    # F11, on the command line (a NodeSLO carries no gate map in Koordinator's schema).
    done = koordlet_command("run", "--standalone", "--feature-gates=NoSuchGate=true")
    assert done.returncode == 2
    assert "NoSuchGate" in done.stderr and "BECPUSuppress" in done.stderr  # names it, lists the known


@pytest.mark.slow
def test_a_failing_kubelet_pauses_qos_until_a_good_pod_list(tmp_path: Path, api_server: APIServer) -> None:
    # F9: garbage, 401 and a kubelet slower than the timeout: the last good pods are kept for 2 sync
    # intervals, then the informer reports degraded and plugins stop acting; sampling never stops.
    pods = [pod_object(str(uuid.uuid4()), f"web-{i}", node=NODE) for i in range(3)]
    with cluster_agent(tmp_path, api_server, "--kubelet-sync-interval=1s", "--kubelet-sync-timeout=1s") as (
        agent,
        kubelet,
    ):
        kubelet.set_pods(pods)
        assert wait_until(lambda: total(agent, "koordlet_states_informer_pods") == 3, 10), agent.tail()
        assert degraded(agent) == 0
        for n, mode in enumerate(("garbage", "401", "slow"), start=1):
            kubelet.slow_seconds = 3.0
            kubelet.mode = mode
            assert wait_until(lambda: degraded(agent) == 1, 10), (mode, agent.tail())
            assert total(agent, "koordlet_states_informer_pods") == 3  # kept, not dropped
            before = samples(
                agent, "koordlet_collect_duration_seconds_count", collector="NodeResourceCollector"
            )
            time.sleep(1.5)
            after = samples(
                agent, "koordlet_collect_duration_seconds_count", collector="NodeResourceCollector"
            )
            assert after[0][1] > before[0][1], "sampling goes on"
            kubelet.mode = "ok"
            assert wait_until(lambda: degraded(agent) == 0, 10), (mode, agent.tail())

            def resumed(n: int = n) -> bool:
                return agent.log.read_text().count("QoS plugins resumed") == n

            assert wait_until(resumed, 5), agent.tail()
    log = agent.log.read_text()
    assert log.count("QoS plugins paused") == 3 and log.count("QoS plugins resumed") == 3
    assert tracebacks(agent) == []


def test_malicious_pod_ids_open_nothing_outside_the_cgroup_root(
    tmp_path: Path, api_server: APIServer
) -> None:
    # F18: pod UIDs and container IDs come from objects anyone with pods/status can write.
    sentinel = tmp_path / f"sentinel-{uuid.uuid4().hex[:8]}"
    sentinel.mkdir()
    for name in ("cpuacct.usage", "memory.stat", "cpu.stat", "cpu.cfs_quota_us", "cgroup.procs"):
        (sentinel / name).write_text("1\n")
    climb = "/" + "../" * 12 + str(sentinel).lstrip("/")
    evil_uids = [climb, f"pod{climb}", "a" * 200, "0d3c5c3e-1111-2222-3333-44445555666\x00", "../../etc"]
    evil = [pod_object(u, f"evil-{i}", node=NODE) for i, u in enumerate(evil_uids)]
    good_uid = str(uuid.uuid4())
    ids = [f"containerd://{climb}", "evil://" + "a" * 64, "containerd://" + "a" * 63 + "/", "x" * 300]
    evil += [pod_object(good_uid, f"ok-{i}", node=NODE, container_id=cid) for i, cid in enumerate(ids[:1])]
    evil += [
        pod_object(str(uuid.uuid4()), f"c-{i}", node=NODE, container_id=cid) for i, cid in enumerate(ids[1:])
    ]
    with inotify.Inotify() as watch:
        watch.add_watch(sentinel, IN_OPEN | IN_ACCESS | IN_MODIFY)
        with cluster_agent(
            tmp_path, api_server, "--kubelet-sync-interval=1s", "--cgroup-driver=cgroupfs"
        ) as (agent, kubelet):
            kubelet.set_pods(evil)
            assert wait_until(lambda: total(agent, "koordlet_pods_refresh_total", result="ok") >= 3, 10)
            time.sleep(2.0)  # a few collection sweeps over those pods
            assert http_get(agent.base + "/nodemetric")[0] == 200
            events = watch.read(0.1)
    assert events == [], events
    log = agent.log.read_text()
    assert tracebacks(agent) == []
    # Each refusal is logged once, not at every pod-list refresh (one per second here).
    refusals = [line for line in log.splitlines() if "malformed" in line or "refusing" in line]
    assert 5 <= len(refusals) <= len(evil), refusals


@pytest.mark.slow
def test_ten_thousand_pods_at_once(tmp_path: Path, api_server: APIServer) -> None:
    # A kubelet that suddenly lists 10 000 pods (none with a cgroup yet): the agent takes them in, keeps
    # answering its probes within a second, and stays far inside the DaemonSet's 256 MiB memory limit.
    pods = [
        pod_object(
            str(uuid.uuid4()), f"burst-{i}", namespace=f"ns-{i % 50}", node=NODE, qos_class="BestEffort"
        )
        for i in range(10_000)
    ]
    with cluster_agent(tmp_path, api_server, "--kubelet-sync-interval=2s") as (agent, kubelet):
        proc = psutil.Process(agent.proc.pid)
        kubelet.set_pods(pods)
        slowest = 0.0
        deadline = time.monotonic() + 30

        def all_in() -> bool:
            return total(agent, "koordlet_states_informer_pods") == 10_000

        while time.monotonic() < deadline and not all_in():
            started = time.monotonic()
            assert http_get(agent.base + "/healthz", timeout=5)[0] == 200
            slowest = max(slowest, time.monotonic() - started)
            time.sleep(0.2)
        assert all_in(), agent.tail()
        for _ in range(10):  # a few sync intervals with every pod listed
            started = time.monotonic()
            assert http_get(agent.base + "/healthz", timeout=5)[0] == 200
            slowest = max(slowest, time.monotonic() - started)
            time.sleep(0.5)
        status, _body = http_get(agent.base + "/metrics", timeout=30)
        assert status == 200
        rss_mib = proc.memory_info().rss / 2**20
    assert slowest < 1.0, slowest
    assert rss_mib < 200, rss_mib
    assert tracebacks(agent) == []
    lines = agent.log.read_text().splitlines()
    assert len(lines) < 200, lines[-20:]


def suppress_ticks(agent: Agent) -> float:
    return sum(
        v
        for labels, v in samples(agent, "koordlet_tick_duration_seconds_count")
        if labels["component"].startswith("plugin/BECPUSuppress")
    )


@pytest.mark.root
@pytest.mark.slow
def test_api_server_outage_keeps_suppression_on_the_cached_nodeslo(
    tmp_path: Path, api_server: APIServer, kubepods: RealKubepods
) -> None:
    # F8 for the whole agent (the informer's own 60 s outage with memory and backoff checks is
    # tests/integration/test_informer_cluster.py::test_api_server_outage).
    be = kubepods.add_pod(KubeQOSClass.BESTEFFORT)
    be_c = kubepods.add_container(be)
    kubepods.busy(be_c)
    pods = [pod_object(be.uid, "be-0", node=NODE, container_id=f"containerd://{be_c.container_id}")]
    slo = {"enable": True, "cpuSuppressPolicy": "cfsQuota", "cpuSuppressThresholdPercent": 100}
    api_server.store.create(
        "nodeslos",
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": NODE},
            "spec": {"resourceUsedThresholdWithBE": slo},
        },
    )
    quota = kubepods.path("cpu", f"{kubepods.kubepods}/besteffort", "cpu.cfs_quota_us")
    with cluster_agent(tmp_path, api_server, f"--cgroup-root=/{kubepods.parent}") as (agent, kubelet):
        kubelet.set_pods(pods)
        assert wait_until(lambda: read_int(quota) > 0, 15), agent.tail()
        api_server.down()
        try:
            ticks = suppress_ticks(agent)
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline:
                assert read_int(quota) > 0, "suppression must go on with the cached NodeSLO"
                assert http_get(agent.base + "/readyz")[0] == 200
                time.sleep(0.2)
            assert suppress_ticks(agent) >= ticks + 5
            assert node_cpu(agent)  # sampling went on
        finally:
            api_server.up()
        # The watches come back by themselves: a NodeSLO change after the outage still applies.
        api_server.store.patch("nodeslos", NODE, {"spec": {"resourceUsedThresholdWithBE": {"enable": False}}})
        assert wait_until(lambda: read_int(quota) == -1, 20), agent.tail()
    assert tracebacks(agent) == []
