"""One pod as the quota ledger counts it: its quota, its requests, whether it is non-preemptible, and
whether (and where) it is placed."""

from __future__ import annotations

from dataclasses import dataclass

from koord.apis import elasticquota as eq
from koord.apis.pod import as_map
from koord.scheduler.framework import Obj, PodInfo
from koord.scheduler.framework.types import Resources

_TERMINATED = ("Succeeded", "Failed")
_REQUEST_FIELDS = ("containers", "initContainers", "overhead")


def pod_key(pod: Obj) -> str:
    meta = as_map(pod, "metadata")
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _bound(pod: Obj) -> bool:
    return bool(as_map(pod, "spec").get("nodeName")) and as_map(pod, "status").get("phase") not in _TERMINATED


def _same_requests(old: Obj, new: Obj) -> bool:
    """Whether nothing a pod's requests come from changed (most updates: status, binding, labels)."""
    a, b = as_map(old, "spec"), as_map(new, "spec")
    return all(a.get(f) is b.get(f) or a.get(f) == b.get(f) for f in _REQUEST_FIELDS)


@dataclass(slots=True)
class PodEntry:
    pod: Obj
    quota: str
    requests: Resources
    non_preemptible: bool
    assigned: bool
    node: str = ""
    """Where it is placed (bound, or reserved by this scheduler)."""

    @classmethod
    def of(cls, pod: Obj, quota: str, old: PodEntry | None) -> PodEntry:
        """``pod`` (a new version of ``old``'s, if any) in ``quota``: assigned once bound or reserved,
        until unreserved or deleted (Koordinator's ``isAssigned``)."""
        bound = _bound(pod)
        return cls(
            pod,
            quota,
            old.requests if old is not None and _same_requests(old.pod, pod) else PodInfo(pod).requests,
            eq.is_non_preemptible(pod),
            bound or (old is not None and old.assigned),
            str(as_map(pod, "spec").get("nodeName") or "") if bound else (old.node if old else ""),
        )
