"""The order a scheduling cycle walks the nodes in (kube-scheduler's ``nodeTree``): nodes grouped by zone
(region and zone labels), zones in the order they first appeared, nodes in each zone in the order they
were added; the walk takes one node of each zone in turn. With ``percentageOfNodesToScore`` a cycle
scores a slice of this order from a rotating start, so a slice covers every zone alike whatever order
the nodes were created in, as kube-scheduler's does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


def zone_key(node: Mapping[str, Any]) -> str:
    """kube-scheduler's ``GetZoneKey``: region and zone (the GA label, else the beta one); ``""`` for a node
    with neither."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    zone = next((str(labels[k]) for k in ZONE_LABELS if k in labels), "")
    region = next((str(labels[k]) for k in REGION_LABELS if k in labels), "")
    return f"{region}:\x00:{zone}" if region or zone else ""


class NodeTree:
    def __init__(self) -> None:
        self._zones: dict[str, list[str]] = {}
        """Zone -> its nodes in the order added; zones in the order they (last) appeared."""
        self._zone_of: dict[str, str] = {}
        self.version = 0
        """Bumped on every change of the order."""
        self._order: list[str] | None = []

    def __len__(self) -> int:
        return len(self._zone_of)

    def add(self, name: str, node: Mapping[str, Any]) -> None:
        """A node added, or updated (moved to the end of its new zone when its zone changed)."""
        zone = zone_key(node)
        old = self._zone_of.get(name)
        if old == zone:
            return
        if old is not None:
            self.remove(name)
        self._zones.setdefault(zone, []).append(name)
        self._zone_of[name] = zone
        self._changed()

    def remove(self, name: str) -> None:
        zone = self._zone_of.pop(name, None)
        if zone is None:
            return
        nodes = self._zones[zone]
        nodes.remove(name)
        if not nodes:
            del self._zones[zone]
        self._changed()

    def names(self) -> list[str]:
        """Every node, one of each zone in turn (``nodeTree.list``)."""
        if self._order is None:
            zones = list(self._zones.values())
            longest = max(map(len, zones), default=0)
            self._order = [nodes[i] for i in range(longest) for nodes in zones if i < len(nodes)]
        return self._order

    def _changed(self) -> None:
        self.version += 1
        self._order = None
