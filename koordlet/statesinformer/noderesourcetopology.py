"""The node topology informer (koordlet's ``nodeTopoInformer``): the node's topology status for the
runtime hooks, and its NodeResourceTopology object in the cluster.

Every ``--node-topology-sync-interval`` (3 s) it re-reads the host (CPUs, NUMA memory, CPU facts, the
kubelet's checkpoint) and, unless ``--disable-query-kubelet-config``, the kubelet's ``/configz``; with gate
``NodeTopologyReport`` (on by default) it creates the object when absent and replaces it when the status
differs from what the API holds (the object is watched, so nothing is read to compare). :meth:`status` is
computed on demand from those facts and the pods and node of now, so the runtime hooks see an LSR pod's
CPUs leave the share pools as soon as the pod is listed, not a sync later. Standalone, the object is only
served (``/noderesourcetopology``). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from koordlet import api
from koordlet.api.errors import KoordletError
from koordlet.statesinformer.kubeletconfig import KubeletConfig, parse_checkpoint, parse_configz
from koordlet.statesinformer.topologystatus import TopologyInputs, build
from koordlet.system.host import Host
from koordlet.system.numa import CPUFacts, NUMANodeMemory, read_cpu_facts, read_numa_memory
from koordshared.apis.topology import noderesourcetopology as nrtobj
from koordshared.runtime.errors import APIUnavailable, InvalidValue
from koordshared.runtime.logs import OncePerChange

log = logging.getLogger(__name__)
_unreadable = OncePerChange(log)


class TopologySink(Protocol):
    """Where the object goes in a cluster (``kube.ClusterAPI``)."""

    def write_node_topology(self, body: Mapping[str, Any], *, create: bool) -> int: ...


@dataclass(frozen=True, slots=True)
class TopologyOptions:
    node_name: str
    sync_interval: float = 3.0
    query_kubelet_config: bool = True
    report: bool = True
    """Gate ``NodeTopologyReport``."""
    hugepage_report: bool = False
    """Gate ``HugePageReport``."""


@dataclass(frozen=True, slots=True)
class _HostFacts:
    cpus: tuple[api.CPUInfo, ...]
    numa: tuple[NUMANodeMemory, ...]
    facts: CPUFacts
    checkpoint_text: str | None


class NodeTopologyInformer:
    def __init__(
        self,
        options: TopologyOptions,
        host: Host,
        node: Callable[[], api.NodeInfo | None],
        pods: Callable[[], Sequence[api.PodInfo]],
        *,
        configz: Callable[[], Any] | None = None,
        cached_object: Callable[[], Mapping[str, Any] | None] | None = None,
        ready: Callable[[], bool] = lambda: True,
        node_uid: Callable[[], str] = lambda: "",
        sink: TopologySink | None = None,
    ) -> None:
        """``configz``: GET of the kubelet's ``/configz`` (cluster mode); ``cached_object``: this node's
        object as the watch holds it, trusted once ``ready`` (the watch has listed); ``sink``: the API
        (``None`` standalone)."""
        self.options = options
        self.host = host
        self._node = node
        self._pods = pods
        self._configz = configz
        self._cached = cached_object
        self._ready = ready
        self._node_uid = node_uid
        self._sink = sink
        self._lock = threading.Lock()
        self._facts: _HostFacts | None = None
        self._kubelet: KubeletConfig | None = None
        self._kubelet_refused = False
        """``/configz`` failed before any answer: the status goes on from the checkpoint."""
        self._memo: tuple[tuple[object, ...], nrtobj.NodeTopologyStatus | None] | None = None
        self.syncs = 0
        self.reports = 0
        self.errors = 0

    # -- inputs ------------------------------------------------------------------------------------

    def refresh_host(self) -> None:
        """Re-read the host; a host that cannot be read keeps the last facts (or none: no status)."""
        paths = self.host.paths
        try:
            cpus = tuple(self.host.cpu_topology())
            numa = tuple(read_numa_memory(paths))
        except (OSError, KoordletError) as err:
            _unreadable.warning("host", f"node topology: cannot read the host's CPUs and memory: {err}")
            return
        _unreadable.forget("host")
        try:
            checkpoint: str | None = paths.kubelet_cpu_manager_state().read_text()
        except OSError:
            checkpoint = None  # not a kubelet node, or the kubelet root is not mounted
        facts = _HostFacts(cpus, numa, read_cpu_facts(paths, cpus), checkpoint)
        with self._lock:
            self._facts = facts

    def refresh_kubelet(self) -> None:
        """Ask the kubelet again; a failure keeps the last answer, or (none yet) lets the status go on
        from the checkpoint; logged once per reason."""
        if not self.options.query_kubelet_config or self._configz is None:
            return
        try:
            config = parse_configz(self._configz())
        except (APIUnavailable, InvalidValue) as err:
            with self._lock:
                self._kubelet_refused = True
                kept = self._kubelet is not None
            what = (
                "keeping its last answer"
                if kept
                else "reporting the topology without its CPU manager settings (policy and exclusive CPUs "
                "from its checkpoint) until it answers"
            )
            _unreadable.warning("configz", f"node topology: kubelet configuration not read ({err}); {what}")
            return
        _unreadable.forget("configz")
        with self._lock:
            self._kubelet = config

    def _kubelet_config(self, facts: _HostFacts) -> KubeletConfig | None:
        if not self.options.query_kubelet_config:
            return None
        if self._configz is None or (self._kubelet is None and self._kubelet_refused):
            # No /configz (standalone), or the kubelet refused it: its checkpoint still names its policy
            policy = parse_checkpoint(facts.checkpoint_text).policy_name
            return KubeletConfig(cpu_manager_policy=policy or "none")
        return self._kubelet

    # -- status ------------------------------------------------------------------------------------

    def status(self) -> nrtobj.NodeTopologyStatus | None:
        """The status for the pods and node of now; ``None`` until the host (and, in a cluster, the
        kubelet's configuration) has been read."""
        with self._lock:
            facts = self._facts
            node, pods = self._node(), tuple(self._pods())
            if facts is None:
                return None
            kubelet = self._kubelet_config(facts)
            if kubelet is None and self.options.query_kubelet_config:
                return None
            key = (facts, node, pods, kubelet)
            if self._memo is not None and self._memo[0] == key:
                return self._memo[1]
            inputs = TopologyInputs(
                facts.cpus,
                facts.numa,
                facts.facts,
                node,
                pods,
                kubelet,
                parse_checkpoint(facts.checkpoint_text),
                self.options.hugepage_report,
            )
            got = build(inputs)
            self._memo = (key, got)
            return got

    def document(self) -> dict[str, Any]:
        """The object as it would be written (served at ``/noderesourcetopology``)."""
        status = self.status()
        base = nrtobj.new_object(self.options.node_name, self._node_uid())
        return status.apply_to(base) if status is not None else base

    # -- loop --------------------------------------------------------------------------------------

    def sync(self) -> None:
        """One round: re-read the host and the kubelet, then report if enabled and changed."""
        self.syncs += 1
        self.refresh_host()
        self.refresh_kubelet()
        if self._sink is None or not self.options.report or not self._ready():
            return
        status = self.status()
        if status is None:
            return
        current = self._cached() if self._cached is not None else None
        why = status.difference(current)
        if not why:
            return
        create = current is None
        base = current if current is not None else nrtobj.new_object(self.options.node_name, self._node_uid())
        try:
            code = self._sink.write_node_topology(status.apply_to(base), create=create)
        except APIUnavailable as err:  # an outage is a fault to ride out, not a bug: no traceback
            self.errors += 1
            _unreadable.warning(
                "api", f"node topology not written (API server unreachable: {err}); next sync retries"
            )
            return
        _unreadable.forget("api")
        if code in (200, 201):
            self.reports += 1
            log.info("node topology %s: %s", "created" if create else "updated", why)
        else:
            # 409: the object changed since the watch saw it; the next round compares with the new one
            self.errors += 1
            log.warning("node topology not written (HTTP %d): %s", code, why)
