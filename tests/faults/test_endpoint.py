"""The agent's endpoint as the DaemonSet runs it (F19 and the endpoint half of the security posture):
callers are reviewed against the test API server's RBAC, probes stay open, idle connections hold no
thread, and nothing listens beyond the address asked for."""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil

from koordlet.testing import wait_until
from koordlet.testing.agent import Agent, http_get
from tests.apiserver import APIServer
from tests.faults.clusteragent import cluster_agent, manifests

AUTH_FLAGS = ("--authentication", "--authorization")


def daemonset_auth_args() -> list[str]:
    """The DaemonSet's own authentication and authorization args (so the test proves they are on)."""
    (ds,) = [d for d in manifests("koordlet.yaml") if d["kind"] == "DaemonSet"]
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    return [a for a in args if a.startswith(AUTH_FLAGS)]


def call(agent: Agent, path: str, token: str = "") -> tuple[int, bytes]:
    req = urllib.request.Request(agent.base + path)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()


def grant(server: APIServer, account: str, paths: list[str]) -> None:
    """A ServiceAccount ``default/<account>`` allowed to get ``paths`` (nonResourceURLs)."""
    server.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": "default"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"read-{account}"},
            "rules": [{"nonResourceURLs": paths, "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"read-{account}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"read-{account}",
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "default"}],
        },
    )


def test_callers_are_reviewed_against_rbac_and_probes_stay_open(
    tmp_path: Path, api_server_factory: Callable[..., APIServer]
) -> None:
    args = daemonset_auth_args()
    assert args == ["--authentication-token-webhook=true", "--authorization-mode=Webhook"]
    server = api_server_factory(authorization=True)
    files = ("koordlet.yaml", "rbac.yaml", "prometheus-scrape.yaml")
    with cluster_agent(tmp_path, server, *args, files=files) as (agent, _kubelet):
        assert call(agent, "/healthz")[0] == 200 and call(agent, "/readyz")[0] == 200
        for path in ("/metrics", "/events", "/nodemetric"):
            assert call(agent, path)[0] == 401, path
            assert call(agent, path, "not-a-token")[0] == 401, path
        grant(server, "stranger", [])
        stranger = server.token_for("default", "stranger")
        assert call(agent, "/metrics", stranger)[0] == 403
        assert call(agent, "/events", stranger)[0] == 403
        # The scrape setup shipped for Prometheus: its token reads /metrics and nothing else.
        scraper = server.token_for("koordinator-system", "koordlet-metrics-scraper")
        status, body = call(agent, "/metrics", scraper)
        assert status == 200 and b"koordlet_start_time" in body
        assert call(agent, "/events", scraper)[0] == 403
        grant(server, "auditor", ["/events", "/nodemetric"])
        auditor = server.token_for("default", "auditor")
        status, body = call(agent, "/events", auditor)
        assert status == 200 and "events" in json.loads(body)
        assert call(agent, "/metrics", auditor)[0] == 403
        # Every review went to the API server as the agent's own ServiceAccount, allowed by rbac.yaml.
        reviews = [r for r in server.requests if "reviews" in r.path]
        assert {r.path for r in reviews} == {
            "/apis/authentication.k8s.io/v1/tokenreviews",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        }
        assert all(r.status == 201 for r in reviews), [(r.path, r.status) for r in reviews]


def test_idle_connections_hold_no_thread_and_the_agent_listens_where_asked(tmp_path: Path) -> None:
    agent = Agent(tmp_path)
    try:
        agent.wait_ready()
        proc = psutil.Process(agent.proc.pid)
        threads = proc.num_threads()
        idle = [socket.create_connection(("127.0.0.1", agent.port), timeout=5) for _ in range(200)]
        try:
            assert call(agent, "/healthz")[0] == 200
            assert call(agent, "/metrics")[0] == 200
            # 200 idle connections once left 80 threads behind; now they cost a descriptor each.
            assert proc.num_threads() <= threads + 1, (threads, proc.num_threads())
        finally:
            for s in idle:
                s.close()
        listening = [c.laddr for c in proc.net_connections("inet") if c.status == psutil.CONN_LISTEN]
        assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", agent.port)]
        others = [
            a.address
            for addrs in psutil.net_if_addrs().values()
            for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")
        ]
        for address in others:
            with socket.socket() as s:
                s.settimeout(2)
                assert s.connect_ex((address, agent.port)) != 0, address
        assert wait_until(lambda: proc.num_threads() <= threads + 1, 5)
    finally:
        assert agent.stop() == 0, agent.tail()


def test_pprof_profiles_the_agent_on_its_own_address_when_enabled(tmp_path: Path) -> None:
    """koordlet's ``--enable-pprof``: a CPU profile of the running agent and its threads' stacks, on a
    second listener, so a profile in progress holds none of the endpoint's workers."""
    agent = Agent(tmp_path, "--enable-pprof", "--pprof-addr=127.0.0.1:0")
    try:
        agent.wait_ready()
        assert wait_until(lambda: re.search(r"serving pprof on port (\d+)", agent.tail(20000)), 30)
        found = re.search(r"serving pprof on port (\d+)", agent.tail(20000))
        assert found is not None
        pprof = f"http://127.0.0.1:{found.group(1)}"
        proc = psutil.Process(agent.proc.pid)
        listening = sorted(
            c.laddr.port for c in proc.net_connections("inet") if c.status == psutil.CONN_LISTEN
        )
        assert listening == sorted([agent.port, int(found.group(1))])
        status, body = http_get(pprof + "/debug/pprof/threads", timeout=10)
        assert status == 200 and b"thread MainThread" in body, body[:2000]
        status, body = http_get(pprof + "/debug/pprof/profile?seconds=5&format=top", timeout=30)
        assert status == 200 and b"% of a core" in body, body[:2000]
        # the agent samples pods every second, so five seconds see its own code at work
        assert b"koordlet." in body or b"koord." in body, body[:3000]
        assert http_get(pprof + "/debug/pprof/profile?seconds=0", timeout=10)[0] == 400
        assert http_get(pprof + "/metrics", timeout=10)[0] == 404  # its own routes only
        assert call(agent, "/debug/pprof/threads")[0] == 404  # nothing of it on the main endpoint
    finally:
        assert agent.stop() == 0, agent.tail()
