"""Builders shared by the test API server's tests: official-client handles and small objects."""

from __future__ import annotations

import http.client
import json
from typing import Any

from tests.apiserver import APIServer

GROUP, VERSION = "slo.koordinator.sh", "v1alpha1"


def api_client(server: APIServer) -> Any:
    """The official client's ``ApiClient`` pointed at ``server``."""
    from kubernetes import client

    return client.ApiClient(server.client_config())


def error_status(err: Any) -> tuple[int, dict[str, Any]]:
    """``(HTTP status, Status body)`` of a ``pytest.raises(ApiException)`` result."""
    return err.value.status, json.loads(err.value.body)


def clients(server: APIServer) -> tuple[Any, Any]:
    """``(CoreV1Api, CustomObjectsApi)`` of the official client, pointed at ``server``."""
    from kubernetes import client

    api = client.ApiClient(server.client_config())
    return client.CoreV1Api(api), client.CustomObjectsApi(api)


def pod(name: str, node: str = "node-a", namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }


def nodemetric(name: str = "node-a", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        **({"status": status} if status else {}),
    }


def new_watch() -> Any:
    """A ``kubernetes.watch.Watch`` (the class is untyped in the client)."""
    from kubernetes import watch

    cls: Any = watch.Watch
    return cls()


def is_down(server: APIServer) -> bool:
    return server.is_down


def connect(server: APIServer) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)


def raw_call(server: APIServer, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
    """One plain HTTP request (what the official client cannot send); returns status and decoded body."""
    conn = connect(server)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw and raw != b"ok" else raw
    finally:
        conn.close()
