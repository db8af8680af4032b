"""Which pods the evictor may evict at all (Koordinator's ``EvictorFilter`` and the MigrationController's
static filters): never DaemonSet, mirror, static or terminating pods, nor one whose
``scheduling.koordinator.sh/eviction-cost`` is the int32 maximum; then, per the args and
``skipEvictionGates``, no bare pods (unless asked; failed ones with ``evictFailedBarePods``), no
system-critical pods, only pods under the priority threshold, no local storage, no claims (with
``ignorePvcPods``), only pods matching ``labelSelector``, only the allowed namespaces, and with
``nodeFit`` only pods some other Ready node would take. A pod annotated
``descheduler.alpha.kubernetes.io/evict`` passes whatever the constraints say, except the namespaces and
the eviction cost (as in Koordinator).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from koord.descheduler.evictor.args import MigrationControllerArgs
from koord.descheduler.framework.interface import Obj
from koord.descheduler.framework.nodefit import NodeFit
from koordshared.apis.core import pod as podutil
from koordshared.apis.core.pod import as_map, str_map

MAX_EVICTION_COST = 2**31 - 1


class StaticFilter:
    """``reasons(pod)``: why ``pod`` may not be evicted (empty: it may)."""

    def __init__(
        self,
        args: MigrationControllerArgs,
        *,
        priority_threshold: Callable[[], int | None],
        nodes: Callable[[], Sequence[Obj]],
        node_fit: Callable[[], NodeFit],
    ) -> None:
        self.args = args
        self._threshold = priority_threshold
        self._nodes = nodes
        self._node_fit = node_fit

    def _constraints(self, pod: Obj) -> list[str]:
        a = self.args
        out = []
        if podutil.is_daemonset_pod(pod):
            out.append("pod is a DaemonSet pod")
        if podutil.is_mirror_pod(pod):
            out.append("pod is a mirror pod")
        if podutil.is_static_pod(pod):
            out.append("pod is a static pod")
        if podutil.is_terminating(pod):
            out.append("pod is terminating")
        bare = not podutil.owner_refs(pod)
        if bare and a.gated("BarePods") and not a.evict_all_bare_pods:
            failed = as_map(pod, "status").get("phase") == "Failed"
            if not (a.evict_failed_bare_pods and failed):
                out.append(
                    "pod does not have any ownerRefs" + ("" if a.evict_failed_bare_pods else " (bare pod)")
                )
        if not a.evict_system_critical_pods and a.gated("SystemCritical") and podutil.is_critical(pod):
            out.append("pod has system critical priority")
        if a.gated("PriorityThreshold") and not a.evict_system_critical_pods:
            threshold = self._threshold()
            if threshold is not None and podutil.has_priority(pod) and podutil.priority(pod) >= threshold:
                out.append(f"pod priority {podutil.priority(pod)} is not below the threshold {threshold}")
        if not a.evict_local_storage_pods and a.gated("LocalStorage") and podutil.has_local_storage(pod):
            out.append("pod has local storage and evictLocalStoragePods is false")
        if a.ignore_pvc_pods and a.gated("PVC") and podutil.has_pvc(pod):
            out.append("pod has a PVC and ignorePvcPods is true")
        if a.node_fit and a.gated("NodeFit") and not self._node_fit().fits_any_other(pod, self._nodes()):
            out.append("pod does not fit on any other node")
        selector = a.label_selector if a.gated("LabelSelector") else None
        if selector is not None and not selector.matches(str_map(podutil.meta(pod).get("labels") or {})):
            out.append("pod labels do not match labelSelector")
        return out

    def reasons(self, pod: Obj) -> list[str]:
        a = self.args
        ns = str(podutil.meta(pod).get("namespace") or "")
        if a.gated("Namespaces") and (
            (a.include_namespaces and ns not in a.include_namespaces) or ns in a.exclude_namespaces
        ):
            return [f"namespace {ns} is not evictable"]
        if podutil.eviction_cost(pod) == MAX_EVICTION_COST:
            return ["pod's eviction cost is the maximum (never evicted)"]
        out = self._constraints(pod)
        if out and podutil.EVICT_ANNOTATION in podutil.annotations_of(pod):
            return []
        return out
