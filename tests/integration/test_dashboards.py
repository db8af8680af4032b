"""The Grafana dashboards of ``deploy/dashboards/`` are proven against a real Prometheus: every panel's
PromQL (Grafana's variables expanded as Grafana would: the dashboard's own ``label_values`` queries for
``$job``/``$node``, ``$__rate_interval`` and friends as durations) parses and returns data.

What Prometheus scrapes is the real thing at work: a koordlet (child process) on real cgroups with an LS
and BE pods, suppressing BE (cfsQuota) and then evicting BE pods when its NodeSLO file lowers the memory
threshold; koord-manager, koord-scheduler-extender and koord-descheduler as child processes against the
test API server, with pods scheduled through the extender (a hot node filtered out) and evicted by
LowNodeLoad.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordlet.api import KubeQOSClass
from koordlet.testing import wait_until
from koordlet.testing.agent import Agent, http_get, wait_http
from koordlet.testing.cgroups import RealKubepods
from koordshared.kube.client import make_api_client
from koordshared.testing import objects
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.cluster.deschedulerharness import DeschedulerProcess, low_node_load
from tests.cluster.extenderharness import ExtenderProcess
from tests.cluster.kubescheduler import ExtenderConfig, KubeSchedulerSim
from tests.managerharness import ManagerProcess, set_config, write_kubeconfig
from tests.support.dashboards import load, panels, queries
from tests.support.prometheus import api_get, prometheus

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.tool("prometheus"), pytest.mark.timeout(300)]
NODE = "dash-node"
NEEDS_A_NODE = {("koordlet", "Batch CPU")}
"""Panels only a cluster agent fills: batch allocatable comes from its Node (koord-manager writes it), and
the standalone agent here has none, so it rightly exports none (unknown is not zero; checked below)."""
BUILTINS = {"__rate_interval": "15s", "__interval": "2s", "__range": "2m", "__range_s": "120"}
"""Grafana's built-ins at a 1 s scrape interval: ``$__rate_interval`` is at least four scrapes."""
DESCHEDULER = low_node_load("dash", consecutive_abnormalities=1)


def expand(expr: str, values: Mapping[str, str]) -> str:
    """``$var``, ``${var}`` and ``[[var]]`` replaced, longest names first (``$__range_s`` before
    ``$__range``); an unknown variable is left as is, so Prometheus refuses the query."""
    for name in sorted(values, key=len, reverse=True):
        v = values[name]
        expr = expr.replace(f"${{{name}}}", v).replace(f"[[{name}]]", v)

        def literal(_m: re.Match[str], v: str = v) -> str:  # the value as is (no escapes processed)
            return v

        expr = re.sub(rf"\${re.escape(name)}(?![A-Za-z0-9_])", literal, expr)
    return expr


def label_values(base: str, query: str) -> list[str]:
    """Grafana's ``label_values(metric{...}, label)`` / ``label_values(label)`` through the label API."""
    m = re.fullmatch(r"\s*label_values\(\s*(?:(.+?)\s*,\s*)?(\w+)\s*\)\s*", query)
    assert m, f"not a label_values query: {query}"
    params: dict[str, Any] = {"match[]": [m.group(1)]} if m.group(1) else {}
    answer = api_get(base, f"label/{m.group(2)}/values", **params)
    assert answer.get("status") == "success", (query, answer)
    return sorted(answer["data"])


def variables(base: str, doc: Mapping[str, Any]) -> dict[str, str]:
    """Each variable as Grafana resolves it: query variables from Prometheus (their first value, in the
    order they are declared so later ones may use earlier ones), the data source by its type."""
    values = dict(BUILTINS)
    for var in (doc.get("templating") or {}).get("list") or ():
        name = var["name"]
        if var["type"] == "datasource":
            values[name] = "prometheus"
        elif var["type"] == "query":
            raw = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            found = label_values(base, expand(raw, values))
            assert found, f"variable ${name}: {raw} found nothing"
            values[name] = found[0]
        else:
            raise AssertionError(f"variable ${name}: type {var['type']} not expanded by this test")
    return values


def query_failures(base: str, doc: Mapping[str, Any], start: float, end: float) -> list[str]:
    values = variables(base, doc)
    failures = []
    count = 0
    for title, raw in queries(doc):
        count += 1
        expr = expand(raw, values)
        got = api_get(base, "query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step="2")
        if got.get("status") != "success":
            failures.append(f"{doc['title']} / {title}: {expr}: {got.get('error')}")
        elif not got["data"]["result"] and (doc["title"], title) not in NEEDS_A_NODE:
            failures.append(f"{doc['title']} / {title}: {expr}: no data")
    assert count > 0, f"{doc['title']}: no panel queries"
    return failures


def node_slo(path: Path, **extra: object) -> None:
    threshold: dict[str, object] = {"enable": True, "cpuSuppressPolicy": "cfsQuota", **extra}
    doc = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": NODE},
           "spec": {"resourceUsedThresholdWithBE": threshold}}  # fmt: skip
    path.write_text(yaml.safe_dump(doc))


def used_memory_percent() -> int:
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        info[key] = int(rest.split()[0])
    return max(int((info["MemTotal"] - info["MemAvailable"]) * 100 / info["MemTotal"]), 1)


def seed_cluster(server: APIServer) -> None:
    """``hot`` at 90 % CPU with nine pods of one ReplicaSet, ``cold`` at 10 %, ``new`` without a NodeMetric
    yet (koord-manager makes it), three pods to schedule; colocation on (koord-manager writes batch
    resources)."""
    now = time.time()
    set_config(server, colocation_config={"enable": True})
    for name in ("hot", "cold", "new"):
        server.store.create("nodes", objects.node(name, cpu="10"))
    reported = []
    for i in range(9):
        p = objects.pod(f"be-{i}", node_name="hot", phase="Running",
                        labels={"koordinator.sh/priority-class": "koord-batch"})  # fmt: skip
        p["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}
        ]
        p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        server.store.create("pods", p)
        reported.append(("default", f"be-{i}", 1000, 0, ""))
    server.store.create(
        "nodemetrics", objects.node_metric("hot", update_time=now, cpu_milli=9000, pods=reported)
    )
    server.store.create("nodemetrics", objects.node_metric("cold", update_time=now, system=(1000, 0)))
    for i in range(3):
        server.store.create("pods", objects.pod(f"new-{i}", requests={"cpu": "100m"}))


def test_every_panel_query_parses_and_returns_data(
    tmp_path: Path,
    kubepods: RealKubepods,
    api_server_factory: Any,  # noqa: F811
) -> None:
    docs = load()
    assert set(docs) == {"koordlet.json", "koord-cluster.json"}
    for name, doc in docs.items():
        assert doc["uid"] and doc["title"] and doc["schemaVersion"] >= 36, name
        for p in panels(doc):
            if p["type"] != "row":
                assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, (name, p["title"])

    # the node side: LS and BE pods burning CPU, the agent suppressing BE
    ls = kubepods.add_pod(KubeQOSClass.BURSTABLE)
    kubepods.busy(kubepods.add_container(ls), 0.3)
    for _ in range(2):
        be = kubepods.add_pod(KubeQOSClass.BESTEFFORT)
        kubepods.busy(kubepods.add_container(be))
    slo = tmp_path / "nodeslo.yaml"
    node_slo(slo)
    agent = Agent(tmp_path, f"--cgroup-root=/{kubepods.parent}", f"--node-slo-file={slo}",
                  "--feature-gates=BEMemoryEvict=true", env={"NODE_NAME": NODE})  # fmt: skip
    # the cluster side
    server = api_server_factory(kubelet_auto_confirm=True)
    seed_cluster(server)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig.json", server)
    manager = ManagerProcess(tmp_path, server, "m1")
    extender = ExtenderProcess(tmp_path, server)
    descheduler = DeschedulerProcess(tmp_path, kubeconfig, DESCHEDULER, "--no-leader-elect")
    api = make_api_client(kubeconfig=str(kubeconfig))
    try:
        agent.wait_ready()
        manager.wait_ready()
        assert wait_http(extender.base + "/readyz", 30) and wait_http(descheduler.base + "/readyz", 30)
        jobs: dict[str, list[tuple[str, dict[str, str]]]] = {
            "koordlet": [(f"127.0.0.1:{agent.port}", {"node": NODE})],  # the PodMonitor's node relabel
            "koord-manager": [(f"127.0.0.1:{manager.port}", {})],
            "koord-scheduler-extender": [(f"127.0.0.1:{extender.port}", {})],
            "koord-descheduler": [(f"127.0.0.1:{descheduler.port}", {})],
        }
        with prometheus(jobs) as base:
            start = time.time()
            sim = KubeSchedulerSim(api, [ExtenderConfig(f"{extender.base}", bind_verb="bind")])
            try:
                outcomes = sim.schedule_pending()
            finally:
                sim.close()
            assert outcomes and all(o.node in ("cold", "new") for o in outcomes), outcomes
            evicting = wait_until(lambda: 'result="success"' in descheduler.metrics(), 30)
            assert evicting, descheduler.log()
            time.sleep(8)  # BE suppressed a while before the evictions
            # the node's memory is over this threshold already, with a margin for other work freeing some
            # meanwhile: BEMemoryEvict evicts the BE pods
            used = used_memory_percent()
            over, lower = max(used - 2, 1), max(used - 3, 0)
            node_slo(slo, memoryEvictThresholdPercent=over, memoryEvictLowerPercent=lower)
            evicted = wait_until(
                lambda: any(e["resource"] == "pod/eviction" for e in agent.get("/events")["events"]), 30
            )
            assert evicted, agent.tail()
            time.sleep(20)  # rates and increases need a few scrapes after the last event
            end = time.time()
            failures = [f for doc in docs.values() for f in query_failures(base, doc, start, end)]
        assert not failures, "\n".join(failures)
        exported = http_get(f"{agent.base}/metrics", timeout=5)[1].decode()
        assert 'resource="kubernetes.io/batch-cpu"' not in exported  # unknown, not 0
        # the test can fail: a misspelt metric finds no data
        bad = {
            "title": "probe",
            "templating": {"list": []},
            "panels": [{"title": "p", "targets": [{"expr": "koordlet_no_such_metric"}, {"expr": "sum("}]}],
        }
        with prometheus(jobs) as base:
            found = query_failures(base, bad, time.time() - 5, time.time())
        assert found[0] == "probe / p: koordlet_no_such_metric: no data"
        assert found[1].startswith("probe / p: sum(: ") and "parse error" in found[1]
    finally:
        api.close()
        codes = [agent.stop(), extender.stop(), descheduler.stop()]
        manager.stop()
    assert codes == [0, 0, 0], agent.tail()
