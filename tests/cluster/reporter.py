"""A fake NodeMetric reporter: writes what an agent would report, through the API (create the NodeMetric,
then ``PATCH .../status``), so every consumer sees it exactly as it would see koordlet's reports.

``report(node, cpu, memory, pods)`` stamps ``updateTime`` with the reporter's clock; ``report_bound``
reports each node's base load plus a share of the requests of the pods bound to it, as a node whose
pods use ``share`` of what they asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koordshared.apis.core.resources import pod_requests_list, value_of
from koordshared.kube.client import ApiError, request
from koordshared.testing.objects import node_metric

BASE = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"


class FakeReporter:
    def __init__(self, api_client: Any, clock: Callable[[], float] = time.time) -> None:
        self.api = api_client
        self.clock = clock

    def ensure(self, node: str) -> None:
        try:
            request(self.api, "create nodemetric", "POST", BASE, body=node_metric(node, update_time=None))
        except ApiError as err:
            if not err.conflict:
                raise

    def report(
        self,
        node: str,
        cpu_milli: int,
        memory_bytes: int,
        pods: Iterable[tuple[str, str, int, int, str]] = (),
        *,
        age: float = 0.0,
    ) -> None:
        """``pods`` are ``(namespace, name, cpu_milli, memory_bytes, priority)``."""
        self.ensure(node)
        status = node_metric(
            node, update_time=self.clock() - age, cpu_milli=cpu_milli, memory_bytes=memory_bytes, pods=pods
        )["status"]
        request(
            self.api,
            f"report {node}",
            "PATCH",
            f"{BASE}/{node}/status",
            body={"status": status},
            content_type="application/merge-patch+json",
        )

    def report_bound(self, base: Mapping[str, tuple[int, int]], share: float = 1.0) -> None:
        """Each node of ``base``: its base load plus ``share`` of its bound pods' requests."""
        doc = request(self.api, "list pods", "GET", "/api/v1/pods")
        by_node: dict[str, list[tuple[str, str, int, int, str]]] = {n: [] for n in base}
        for p in doc.get("items") or []:
            node = (p.get("spec") or {}).get("nodeName")
            if node not in by_node:
                continue
            req = pod_requests_list(p)
            cpu = int(value_of("cpu", req["cpu"]) * share) if "cpu" in req else 0
            mem = int(value_of("memory", req["memory"]) * share) if "memory" in req else 0
            meta = p["metadata"]
            by_node[node].append((meta["namespace"], meta["name"], cpu, mem, "koord-prod"))
        for node, (cpu, mem) in base.items():
            pods = by_node[node]
            self.report(node, cpu + sum(p[2] for p in pods), mem + sum(p[3] for p in pods), pods)
