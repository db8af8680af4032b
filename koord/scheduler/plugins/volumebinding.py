"""VolumeBinding (PreFilter, Filter; kube-scheduler's ``volumebinding``, limited) and the clear refusal of
what koord-scheduler does not schedule. Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koord.scheduler.framework import (
    QUEUE,
    SKIP,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    NodeInfo,
    Obj,
    PreFilterResult,
    Status,
)
from koord.scheduler.framework.events import NODE, QueueingHint
from koord.scheduler.framework.events import SKIP as SKIP_HINT
from koordshared.apis.core.node import term_matches
from koordshared.apis.core.pod import as_list, as_map, pod_key
from koordshared.apis.meta import groups

NAME = "VolumeBinding"
__all__ = ["NAME", "VolumeBinding"]  # the built-in table loads the plugin by these names
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
UNBOUND_DELAYED = (
    "pod has unbound PersistentVolumeClaims with volumeBindingMode WaitForFirstConsumer: koord-scheduler "
    "does not bind or provision volumes (schedule the pod with kube-scheduler)"
)
DRA = (
    "pod uses dynamic resource allocation (spec.resourceClaims), which koord-scheduler does not support "
    "(schedule the pod with kube-scheduler)"
)
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
HOSTNAME = "kubernetes.io/hostname"
_KEY = "VolumeBinding/bound"


def claim_names(pod: Obj) -> list[tuple[str, bool]]:
    """The claims of the pod's volumes, each with whether it is a generic ephemeral volume's."""
    meta, out = as_map(pod, "metadata"), []
    for v in as_list(as_map(pod, "spec"), "volumes"):
        if not isinstance(v, Mapping):
            continue
        if isinstance(v.get("persistentVolumeClaim"), Mapping):
            out.append((str(v["persistentVolumeClaim"].get("claimName") or ""), False))
        elif isinstance(v.get("ephemeral"), Mapping):
            out.append((f"{meta.get('name') or ''}-{v.get('name') or ''}", True))
    return out


def storage_class_of(pvc: Obj) -> str:
    """The beta annotation, else ``spec.storageClassName`` (kube's ``GetPersistentVolumeClaimClass``)."""
    annotations = as_map(as_map(pvc, "metadata"), "annotations")
    if BETA_STORAGE_CLASS in annotations:
        return str(annotations[BETA_STORAGE_CLASS])
    return str(as_map(pvc, "spec").get("storageClassName") or "")


@dataclass(frozen=True, slots=True)
class _Bound:
    """The pod's bound claims: (claim, its PersistentVolume or ``None`` when that is gone)."""

    volumes: tuple[tuple[str, Obj | None], ...]


class VolumeBinding:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        if args:
            raise ValueError(f"koord-scheduler's VolumeBinding takes no args, got {sorted(args)}")
        if not callable(getattr(handle, "watch", None)):
            raise ValueError("needs koord-scheduler's handle (it watches claims, volumes and classes)")
        self.pvcs = handle.watch("persistentvolumeclaims", groups.PVCS)
        self.pvs = handle.watch("persistentvolumes", groups.PVS)
        self.classes = handle.watch("storageclasses", groups.STORAGE_CLASSES)

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | PreFilterResult | None:
        if as_list(as_map(pod, "spec"), "resourceClaims"):
            return Status.unresolvable(DRA)
        claims = claim_names(pod)
        if not claims:
            return SKIP
        namespace = str(as_map(pod, "metadata").get("namespace") or "")
        bound: list[tuple[str, Obj | None]] = []
        immediate = delayed = False
        for name, ephemeral in claims:
            pvc = self.pvcs.get(f"{namespace}/{name}")
            why = _unusable(pvc, name, ephemeral, pod)
            if why:
                return Status.unresolvable(why)
            assert pvc is not None
            volume = str(as_map(pvc, "spec").get("volumeName") or "")
            if volume and BIND_COMPLETED in as_map(as_map(pvc, "metadata"), "annotations"):
                bound.append((name, self.pvs.get(volume)))
                continue
            mode = self._binding_mode(pvc)
            if isinstance(mode, Status):
                return mode
            if mode == "WaitForFirstConsumer" and not volume:
                delayed = True
            else:  # Immediate, or pre-bound to a volume: the PersistentVolume controller finishes it
                immediate = True
        if immediate:
            return Status.unresolvable(UNBOUND_IMMEDIATE)
        if delayed:
            return Status.unresolvable(UNBOUND_DELAYED)
        state.write(_KEY, _Bound(tuple(bound)))
        eligible = _eligible_nodes([pv for _, pv in bound])
        return None if eligible is None else PreFilterResult(eligible)

    def _binding_mode(self, pvc: Obj) -> str | Status:
        cls = storage_class_of(pvc)
        if not cls:
            return "Immediate"
        sc = self.classes.get(cls)
        if sc is None:
            return "Immediate"
        mode = sc.get("volumeBindingMode")
        if not mode:
            return Status.error(f'VolumeBindingMode not set for StorageClass "{cls}"')
        return str(mode)

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        bound: _Bound | None = state.get(_KEY)
        if bound is None:
            return None
        for _, pv in bound.volumes:
            if pv is None:
                return Status.unresolvable(PV_NOT_EXIST)
            affinity = as_map(as_map(pv, "spec"), "nodeAffinity")
            if "required" not in affinity:
                continue  # kube's CheckNodeAffinity: no required terms, no constraint
            terms = as_list(as_map(affinity, "required"), "nodeSelectorTerms")
            if not any(term_matches(t, node_info.node or {}) for t in terms):
                return Status.unresolvable(NODE_CONFLICT)
        return None

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent(groups.PVCS.kind, Action.ADD | Action.UPDATE), _claim_of_pod),
            ClusterEventWithHint(ClusterEvent(groups.PVS.kind, Action.ADD | Action.UPDATE)),
            ClusterEventWithHint(ClusterEvent(groups.STORAGE_CLASSES.kind, Action.ADD | Action.UPDATE)),
            ClusterEventWithHint(
                ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_TAINT)
            ),
        )


def _unusable(pvc: Obj | None, name: str, ephemeral: bool, pod: Obj) -> str:
    """Why the claim cannot serve the pod at all (kube's ``podHasPVCs``), or ""."""
    if pvc is None:
        if ephemeral:
            return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
        return f'persistentvolumeclaim "{name}" not found'
    if as_map(pvc, "status").get("phase") == "Lost":
        volume = as_map(pvc, "spec").get("volumeName") or ""
        return f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{volume}"'
    if as_map(pvc, "metadata").get("deletionTimestamp"):
        return f'persistentvolumeclaim "{name}" is being deleted'
    if ephemeral:
        uid = as_map(pod, "metadata").get("uid")
        owners = as_list(as_map(pvc, "metadata"), "ownerReferences")
        if not any(isinstance(o, Mapping) and o.get("controller") and o.get("uid") == uid for o in owners):
            return (
                f"PVC {as_map(pvc, 'metadata').get('namespace')}/{name} was not created for pod "
                f"{pod_key(pod)} (pod is not owner)"
            )
    return ""


def _eligible_nodes(volumes: Sequence[Obj | None]) -> frozenset[str] | None:
    """The hosts local volumes are pinned to (``kubernetes.io/hostname In``), intersected over the
    volumes (kube's ``GetEligibleNodes``); ``None`` when no volume pins the pod."""
    out: frozenset[str] | None = None
    for pv in volumes:
        required = as_map(as_map(as_map(pv, "spec"), "nodeAffinity"), "required")
        hosts: set[str] = set()
        for term in as_list(required, "nodeSelectorTerms"):
            names: set[str] | None = None
            for expr in as_list(term, "matchExpressions"):
                if isinstance(expr, Mapping) and expr.get("key") == HOSTNAME and expr.get("operator") == "In":
                    values = {str(v) for v in expr.get("values") or ()}
                    names = values if names is None else names & values
            hosts |= names or set()
        if hosts:
            out = frozenset(hosts) if out is None else out & hosts
    return out


def _claim_of_pod(pod: Obj, old: Any, new: Any) -> QueueingHint:
    """A claim change matters to the pods that use the claim."""
    pvc = new if isinstance(new, Mapping) else {}
    meta = as_map(pvc, "metadata")
    if meta.get("namespace") != as_map(pod, "metadata").get("namespace"):
        return SKIP_HINT
    return QUEUE if any(name == meta.get("name") for name, _ in claim_names(pod)) else SKIP_HINT
