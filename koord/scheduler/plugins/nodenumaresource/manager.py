"""NodeNUMAResource's per-node state (Koordinator's ``resourceManager`` and ``topologyOptionsManager``,
with their pod, node and NodeResourceTopology event handlers): each node's reported topology and what is
bound on it.

- A NodeResourceTopology added or changed replaces the node's :class:`TopologyOptions`; deleted, the
  node is unreported again.
- A bound pod with a ``resource-status`` holds its CPUs and NUMA resources until it is deleted, finishes,
  or becomes unbound; an update replaces its holding. A placement made in Reserve holds them from then on
  (the pod's own update, once bound, replaces it with the same).
- A deleted node forgets its pods' holdings. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from koord.scheduler.framework import Obj
from koord.scheduler.plugins.nodenumaresource.allocation import NodeAllocation, PodAllocation, allocation_of
from koord.scheduler.plugins.nodenumaresource.topologyoptions import (
    NOT_REPORTED,
    TopologyOptions,
    full_pcpus_only,
    labels_of,
    options_of,
)
from koordshared.apis.core.pod import pod_key
from koordshared.apis.extension.numa import (
    LABEL_NODE_CPU_BIND_POLICY,
    LABEL_NODE_NUMA_ALLOCATE_STRATEGY,
    LABEL_NUMA_TOPOLOGY_POLICY,
    NUMATopologyPolicy,
)
from koordshared.apis.meta.cpulist import format_cpuset
from koordshared.runtime.errors import InvalidValue
from koordshared.runtime.logs import OncePerChange

log = logging.getLogger(__name__)
LOG_SIZE = 8192
"""Node changes remembered for :meth:`ResourceManager.changed_since`; half forgotten past this."""
_malformed = OncePerChange(log)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _node_of(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _finished(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class ResourceManager:
    def __init__(self, default_strategy: str) -> None:
        self.default_strategy = default_strategy
        self._lock = threading.RLock()
        self._options: dict[str, TopologyOptions] = {}
        self._nodes: dict[str, NodeAllocation] = {}
        self._steering: frozenset[str] = frozenset()
        self._valid: frozenset[str] = frozenset()
        # node -> (the options, the holding's version, the node object it was worked out from; the kind)
        self._kinds: dict[str, tuple[TopologyOptions, int, Obj, tuple[Any, ...]]] = {}
        # The nodes whose report or holding changed, in order (absolute positions from _log_base): what
        # keeps kinds elsewhere catches up on them instead of asking every node.
        self._log: list[str] = []
        self._log_base = 0

    def locked(self) -> AbstractContextManager[bool]:
        """The manager's lock, to hold across a read and the decision made from it."""
        return self._lock

    # ---- reads (hold the lock across a read and the decision made from it) -------------------------

    def options(self, node: str) -> TopologyOptions:
        with self._lock:
            return self._options.get(node, NOT_REPORTED)

    def allocation(self, node: str) -> NodeAllocation:
        with self._lock:
            na = self._nodes.get(node)
            if na is None:
                na = self._nodes[node] = NodeAllocation()
            return na

    def strategy(self, node: Obj) -> str:
        """The node's NUMA allocate strategy: its label, else the plugin's default."""
        labels = (node.get("metadata") or {}).get("labels") or {}
        return str(labels.get(LABEL_NODE_NUMA_ALLOCATE_STRATEGY) or self.default_strategy)

    def kinds(self, nodes: Sequence[tuple[str, Obj]]) -> list[tuple[Any, ...]]:
        """:meth:`kind` of each ``(name, node object)``."""
        with self._lock:
            return [self.kind(name, node) for name, node in nodes]

    def kind(self, name: str, node: Obj) -> tuple[Any, ...]:
        """What a NUMA decision on the node depends on beside the pod: its report, its holding, its
        steering labels and its strategy. Kept per node while the report, the holding and the node
        object stay the same ones: a cycle asks it of every node, and few change between two."""
        with self._lock:
            opts = self._options.get(name, NOT_REPORTED)
            na = self._nodes.get(name)
            version = 0 if na is None else na.version
            kept = self._kinds.get(name)
            if kept is not None and kept[0] is opts and kept[1] == version and kept[2] is node:
                return kept[3]
            labels = labels_of(node)
            kind = (
                opts.fingerprint,
                "" if na is None else na.fingerprint(),
                labels.get(LABEL_NUMA_TOPOLOGY_POLICY, ""),
                labels.get(LABEL_NODE_CPU_BIND_POLICY, ""),
                self.strategy(node),
            )
            self._kinds[name] = (opts, version, node, kind)
            return kind

    def changed_since(self, position: int) -> tuple[set[str] | None, int]:
        """The nodes whose report or holding changed since log ``position`` (``None``: too long ago to
        say, take them all as changed), and the position now."""
        with self._lock:
            now = self._log_base + len(self._log)
            start = position - self._log_base
            if start < 0:
                return None, now
            return set(self._log[start:]), now

    def _changed(self, node: str) -> None:
        self._log.append(node)
        if len(self._log) > LOG_SIZE:
            drop = len(self._log) // 2
            del self._log[:drop]
            self._log_base += drop

    def held_by(self, node: str, uid: str) -> PodAllocation | None:
        with self._lock:
            na = self._nodes.get(node)
            return None if na is None else na.pods.get(uid)

    # ---- writes ---------------------------------------------------------------------------------------

    def update(self, node: str, alloc: PodAllocation) -> None:
        with self._lock:
            na = self.allocation(node)
            version = na.version
            na.update(alloc)
            if na.version != version:
                self._changed(node)

    def release(self, node: str, uid: str) -> None:
        with self._lock:
            na = self._nodes.get(node)
            if na is not None:
                na.release(uid)
                self._changed(node)

    # ---- NodeResourceTopology events --------------------------------------------------------------

    def topology_changed(self, obj: Obj) -> None:
        name = _name(obj)
        opts = options_of(obj)
        for problem in opts.problems:
            _malformed.warning(f"nrt/{name}", f"NodeResourceTopology {name}: {problem}")
        with self._lock:
            self._options[name] = opts
            steers = opts.numa_policy is not NUMATopologyPolicy.NONE or full_pcpus_only(opts.kubelet_policy)
            if steers != (name in self._steering):
                self._steering = self._steering | {name} if steers else self._steering - {name}
            valid = opts.topology.valid
            if valid != (name in self._valid):
                self._valid = self._valid | {name} if valid else self._valid - {name}
            self._changed(name)

    def topology_deleted(self, obj: Obj) -> None:
        with self._lock:
            self._options.pop(_name(obj), None)
            self._steering -= {_name(obj)}
            self._valid -= {_name(obj)}
            self._changed(_name(obj))

    def steering(self) -> frozenset[str]:
        """The nodes whose report alone steers placement (a NUMA policy, a kubelet binding whole cores):
        a pod that asks for nothing still needs a look there."""
        return self._steering

    def valid(self) -> frozenset[str]:
        """The nodes whose report has a usable CPU topology (the others cannot bind CPUs)."""
        return self._valid

    # ---- pod and node events ----------------------------------------------------------------------

    def pod_added(self, pod: Obj) -> None:
        self.pod_updated(None, pod)

    def pod_updated(self, old: Obj | None, pod: Obj) -> None:
        node = _node_of(pod)
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        if not node:
            if old is not None and _node_of(old):
                self.release(_node_of(old), uid)
            return
        if _finished(pod):
            self.release(node, uid)
            return
        try:
            alloc = allocation_of(pod)
        except InvalidValue as err:
            _malformed.warning(f"pod/{uid}", f"pod {pod_key(pod)}: {err}; its CPUs are not counted")
            return
        if alloc is not None:
            self.update(node, alloc)

    def pod_deleted(self, pod: Obj) -> None:
        node = _node_of(pod)
        if node:
            self.release(node, str((pod.get("metadata") or {}).get("uid") or ""))

    def node_deleted(self, node: Obj) -> None:
        with self._lock:
            self._nodes.pop(_name(node), None)
            self._kinds.pop(_name(node), None)
            self._changed(_name(node))

    # ---- debugging ------------------------------------------------------------------------------------

    def describe(self, node: str) -> dict[str, Any]:
        """What ``/debug/nodes/<node>`` shows (Koordinator's ``/nodes/:nodeName`` service): the report as
        understood, the free CPUs and NUMA resources, and each pod's holding."""
        with self._lock:
            opts = self._options.get(node, NOT_REPORTED)
            if not opts.reported:
                return {"reported": False}
            na = self._nodes.get(node) or NodeAllocation()
            free, held = na.available_cpus(opts.topology, opts.max_refs, opts.reserved_cpus)
            remaining, allocated = na.available_numa(opts.numa_resources, {})
            return {
                "reported": True,
                "problems": list(opts.problems),
                "cpus": format_cpuset(opts.topology.cpus),
                "reservedCPUs": format_cpuset(opts.reserved_cpus),
                "numaTopologyPolicy": str(opts.numa_policy),
                "availableCPUs": format_cpuset(free),
                "allocatedCPUs": format_cpuset(held),
                "remainingNUMANodeResources": remaining,
                "allocatedNUMANodeResources": allocated,
                "allocatedPods": [
                    {"uid": a.uid, "namespace": a.namespace, "name": a.name, **a.resource_status().to_json()}
                    for a in na.pods.values()
                ],
            }
