"""An extender served on loopback over in-memory caches, with a recording binder, for HTTP-level tests."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from koord.scheduler.extender.binder import BindFailed
from koord.scheduler.extender.handle import ExtenderHandle
from koord.scheduler.extender.metrics import ExtenderMetrics
from koord.scheduler.extender.server import ExtenderServer
from koord.scheduler.extender.verbs import Extender
from koord.scheduler.framework.profile import parse_profile
from koord.scheduler.framework.runtime import Framework
from koord.scheduler.plugins import BUILTIN
from koordlet.testing import FakeClock
from koordshared.kube.memstore import MemoryStore
from koordshared.runtime.pluginregistry import Registry
from koordshared.testing import objects


class RecordingBinder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, str]] = []
        self.fail_with = ""

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.calls.append((namespace, name, uid, node))
        if self.fail_with:
            raise BindFailed(self.fail_with)


class ServedExtender:
    """``post(verb, body)`` -> (status, decoded JSON); ``get(path)`` -> (status, text)."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        extra_plugins: Mapping[str, Any] | None = None,
        *,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.clock = FakeClock()
        self.nodes = MemoryStore()
        self.pods = MemoryStore()
        self.metrics_store = MemoryStore()
        self.handle = ExtenderHandle(self.nodes, self.pods, self.metrics_store, clock=self.clock.wall)
        registry = Registry()
        for name, factory in {**BUILTIN, **(extra_plugins or {})}.items():
            registry.register(name, factory)
        self.framework = Framework(parse_profile(config), registry, self.handle)
        self.registry = CollectorRegistry()
        self.metrics = ExtenderMetrics(self.registry)
        self.binder = RecordingBinder()
        self.is_ready = True
        self.extender = Extender(
            self.framework, self.handle, self.metrics, self.binder, ready=lambda: self.is_ready
        )
        self.server = ExtenderServer("127.0.0.1", 0, self.extender, ready=lambda: self.is_ready, tls=tls)
        self.server.start()
        self._conn: http.client.HTTPConnection | None = None

    @property
    def now(self) -> float:
        return self.clock.wall()

    def add_node(self, name: str, cpu: str = "16", memory: str = "64Gi", **kw: Any) -> dict[str, Any]:
        return dict(self.nodes.put(objects.node(name, cpu, memory, **kw)))

    def report(self, name: str, age: float = 10.0, **kw: Any) -> None:
        self.metrics_store.put(objects.node_metric(name, update_time=self.now - age, **kw))

    def conn(self) -> http.client.HTTPConnection:
        if self._conn is None:
            self._conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        return self._conn

    def raw_post(self, path: str, body: bytes) -> tuple[int, bytes]:
        c = self.conn()
        c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        resp = c.getresponse()
        return resp.status, resp.read()

    def post(self, verb: str, doc: Any) -> tuple[int, Any]:
        status, body = self.raw_post(f"/{verb}", json.dumps(doc).encode())
        return status, json.loads(body) if body else None

    def get(self, path: str) -> tuple[int, str]:
        c = self.conn()
        c.request("GET", path)
        resp = c.getresponse()
        return resp.status, resp.read().decode()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self.server.shutdown()
