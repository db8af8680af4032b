"""Hollow nodes: Node objects without a kubelet or an agent, made Ready and given a fresh NodeMetric
report by the caller, so the scheduler sees them as a real node with an agent (LoadAwareScheduling
filters out a node whose NodeMetric has expired, as Koordinator's does).

kube-controller-manager marks a node without a kubelet's heartbeats ``Ready=Unknown`` after its grace
period (40 s) and taints it soon after: a hollow node is for what happens within that time, or for a
caller that keeps :meth:`HollowNode.heartbeat` going.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

TAINT = "koordlet.test/hollow"
Kubectl = Callable[..., str]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class HollowNode:
    name: str
    kubectl: Kubectl
    capacity: Mapping[str, str] = field(default_factory=lambda: {"cpu": "8", "memory": "16Gi", "pods": "110"})
    taint: bool = True
    """Tainted ``koordlet.test/hollow=true:NoSchedule``: only pods tolerating it land there."""

    def create(self) -> None:
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": {"kubernetes.io/hostname": self.name, TAINT: "true"}},
        }
        if self.taint:
            node["spec"] = {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]}
        self.kubectl("apply", "-f", "-", stdin=json.dumps(node))
        self.heartbeat()

    def heartbeat(self) -> None:
        """Ready, with the capacity as allocatable, as the kubelet's status update says."""
        now = _now()
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "hollow node",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        status = {
            "status": {
                "capacity": dict(self.capacity),
                "allocatable": dict(self.capacity),
                "conditions": [ready],
            }
        }
        self.kubectl(
            "patch", "node", self.name, "--subresource=status", "--type=merge", "-p", json.dumps(status)
        )

    def report(self, cpu: str = "500m", memory: str = "1Gi") -> None:
        """A NodeMetric status as the agent reports it (the object exists once koord-manager made it)."""
        usage = {"resources": {"cpu": cpu, "memory": memory}}
        status = {
            "status": {
                "updateTime": _now(),
                "nodeMetric": {"nodeUsage": usage, "systemUsage": {"resources": {"cpu": "0", "memory": "0"}}},
            }
        }
        self.kubectl(
            "patch", "nodemetric", self.name, "--subresource=status", "--type=merge", "-p", json.dumps(status)
        )

    def delete(self) -> None:
        self.kubectl("delete", "node", self.name, "--ignore-not-found", "--wait=false")
