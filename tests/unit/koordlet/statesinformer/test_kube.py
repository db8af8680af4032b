"""The agent's API calls (:class:`koordlet.statesinformer.kube.ClusterAPI`) go on REST paths: the typed API
classes, and the pydantic models their import builds, are never loaded (DaemonSet memory)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from kubernetes import client
from koordlet.statesinformer import kube
from koordshared.kube.client import make_api_client
from koordshared.runtime.errors import APIUnavailable

cfg = client.Configuration()
cfg.host = "http://127.0.0.1:9"  # discard: nothing answers, every call is an unreachable server
api = kube.ClusterAPI(make_api_client(client_configuration=cfg), "node-1", request_timeout=0.5)
api.pods_informer(); api.node_informer(); api.custom_informer("nodeslos")
for call in (
    api.create_node_metric,
    lambda: api.update_node_metric_status({}, {"metadata": {"name": "node-1"}}),
    lambda: api.write_node_topology({}, create=True),
    lambda: api.evict("ns", "pod", "uid"),
    lambda: api.create_event("Pod", "ns", "pod", "uid", "Normal", "Test", "message", 0.0),
):
    try:
        call()
    except APIUnavailable:
        pass
print(sorted(m for m in sys.modules if m.startswith(("kubernetes.client.api.", "kubernetes.client.models."))))
"""


def test_the_agent_loads_no_typed_api_class_nor_model() -> None:
    """The informers and writes of the agent built ``CoreV1Api`` and ``CustomObjectsApi``, whose import
    builds some 250 pydantic models (about 10 MiB of the DaemonSet's RSS) for answers decoded as plain
    JSON anyway."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout[:500]
