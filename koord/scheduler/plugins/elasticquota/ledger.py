"""The quota ledger (Koordinator's ``GroupQuotaManager``): every quota, every pod's place in one, what each
quota's pods ask for and use, the cluster's total, and the runtime figures computed from them.

Fed by informer events (quotas, pods, nodes) and by the plugin's Reserve/Unreserve; read by PreFilter,
preemption, the status writer and the over-use revoke. All of it under one lock: events arrive on the
informers' threads while the scheduling cycle reads. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from koord.scheduler.framework import Obj, PodInfo
from koord.scheduler.framework.types import Resources, resources_of
from koord.scheduler.plugins.elasticquota.args import ElasticQuotaArgs
from koord.scheduler.plugins.elasticquota.quotas import QuotaSpec, built_in, match
from koord.scheduler.plugins.elasticquota.runtime import QuotaFigures, QuotaInput, calculate
from koordshared.apis.core.pod import as_map, pod_key
from koordshared.apis.extension import elasticquota as eq

log = logging.getLogger(__name__)

OUTSIDE_TREE = (eq.SYSTEM_QUOTA, eq.DEFAULT_QUOTA)
_TERMINATED = ("Succeeded", "Failed")
_REQUEST_FIELDS = ("containers", "initContainers", "overhead")


def _bound(pod: Obj) -> bool:
    return bool(as_map(pod, "spec").get("nodeName")) and as_map(pod, "status").get("phase") not in _TERMINATED


def _same_requests(old: Obj, new: Obj) -> bool:
    """Whether nothing a pod's requests come from changed (most updates: status, binding, labels)."""
    a, b = as_map(old, "spec"), as_map(new, "spec")
    return all(a.get(f) is b.get(f) or a.get(f) == b.get(f) for f in _REQUEST_FIELDS)


@dataclass(slots=True)
class PodEntry:
    """One pod as the ledger counts it: its quota, its requests, whether it is non-preemptible, and
    whether (and where) it is placed."""

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


@dataclass(frozen=True, slots=True)
class Usage:
    """What one quota's pods ask for and hold (its children's included), masked to max."""

    request: Resources
    used: Resources
    non_preemptible_request: Resources
    non_preemptible_used: Resources


@dataclass(frozen=True, slots=True)
class Summary:
    """A quota's figures as its object shows them."""

    runtime: Resources
    request: Resources
    child_request: Resources
    usage: Usage


def _add(into: Resources, more: Mapping[str, int], sign: int = 1) -> None:
    for r, v in more.items():
        into[r] = into.get(r, 0) + sign * v


class Ledger:
    def __init__(self, args: ElasticQuotaArgs) -> None:
        self.args = args
        self._lock = threading.RLock()
        self._built_in = built_in(args.default_quota_group_max, args.system_quota_group_max)
        self._specs: dict[str, QuotaSpec] = dict(self._built_in)
        self._by_namespace: dict[str, list[str]] = {}
        self._pods: dict[str, PodEntry] = {}
        self._members: dict[str, set[str]] = {}
        """Per quota, the keys of its pods."""
        # Per quota, its own pods' sums (unmasked): request, non-preemptible request, used, n-p used.
        self._own: dict[str, tuple[Resources, Resources, Resources, Resources]] = {}
        self._nodes: dict[str, Resources] = {}
        self._total: Resources = {}
        self._figures: dict[str, QuotaFigures] | None = None
        self._children: dict[str, list[str]] | None = None

    # ---- quotas ---------------------------------------------------------------------------------

    def set_quota(self, obj: Obj) -> None:
        if as_map(obj, "metadata").get("deletionTimestamp"):
            return  # Koordinator ignores a quota being deleted until it is gone
        spec = QuotaSpec.of(obj)
        if not spec.name or spec.name == eq.ROOT_QUOTA:
            return
        if spec.name in OUTSIDE_TREE:
            spec = QuotaSpec(spec.name, spec.namespace, max=spec.max, weight=spec.weight, min=spec.min)
        with self._lock:
            old = self._specs.get(spec.name)
            if old == spec:
                return
            if old is not None and old.namespace and spec.namespace and old.namespace != spec.namespace:
                log.warning(
                    "ElasticQuota %s exists in namespaces %s and %s: quota names must be unique, the last "
                    "one seen counts",
                    spec.name,
                    old.namespace,
                    spec.namespace,
                )
            self._specs[spec.name] = spec
            self._figures = None
            self._children = None
            if old is None or old.namespaces != spec.namespaces or old.namespace != spec.namespace:
                self._index_namespaces()
                self._rematch()

    def delete_quota(self, obj: Obj) -> None:
        name = str(as_map(obj, "metadata").get("name") or "")
        with self._lock:
            if name == eq.ROOT_QUOTA or name not in self._specs:
                return
            if name in self._built_in:
                self._specs[name] = self._built_in[name]
            else:
                del self._specs[name]
            self._figures = None
            self._children = None
            self._index_namespaces()
            self._rematch()

    def _index_namespaces(self) -> None:
        index: dict[str, list[str]] = {}
        for spec in self._specs.values():
            for ns in spec.namespaces:
                index.setdefault(ns, []).append(spec.name)
        for names in index.values():
            names.sort()
        self._by_namespace = index

    def _rematch(self) -> None:
        for entry in self._pods.values():
            quota = match(entry.pod, self._specs, self._by_namespace)
            if quota != entry.quota:
                self._account(entry, -1)
                entry.quota = quota
                self._account(entry, 1)

    def spec(self, name: str) -> QuotaSpec | None:
        with self._lock:
            return self._specs.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._specs)

    def quota_of(self, pod: Obj) -> str:
        """The quota ``pod`` runs in (the one the ledger counts it in, once it has seen the pod)."""
        with self._lock:
            entry = self._pods.get(pod_key(pod))
            if entry is not None:
                return entry.quota
            return match(pod, self._specs, self._by_namespace)

    # ---- pods -----------------------------------------------------------------------------------

    def _account(self, entry: PodEntry, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) the pod's requests, and its used when it is assigned."""
        members = self._members.setdefault(entry.quota, set())
        if sign > 0:
            members.add(pod_key(entry.pod))
        else:
            members.discard(pod_key(entry.pod))
        own = self._own.setdefault(entry.quota, ({}, {}, {}, {}))
        _add(own[0], entry.requests, sign)
        if entry.non_preemptible:
            _add(own[1], entry.requests, sign)
        self._figures = None  # requests change the runtime figures
        if entry.assigned:
            self._count_used(entry, sign)

    def _count_used(self, entry: PodEntry, sign: int) -> None:
        own = self._own.setdefault(entry.quota, ({}, {}, {}, {}))
        _add(own[2], entry.requests, sign)
        if entry.non_preemptible:
            _add(own[3], entry.requests, sign)
        if entry.quota in OUTSIDE_TREE:
            self._figures = None  # what the system and default quotas use is not the tree's to share

    def add_pod(self, pod: Obj) -> None:
        key = pod_key(pod)
        with self._lock:
            old = self._pods.get(key)
            entry = PodEntry.of(pod, match(pod, self._specs, self._by_namespace), old)
            self._pods[key] = entry
            if old is not None and (old.quota, old.requests, old.non_preemptible) == (
                entry.quota,
                entry.requests,
                entry.non_preemptible,
            ):
                if entry.assigned and not old.assigned:
                    self._count_used(entry, 1)
                return
            if old is not None:
                self._account(old, -1)
            self._account(entry, 1)

    def update_pod(self, _old: Obj, new: Obj) -> None:
        self.add_pod(new)

    def delete_pod(self, pod: Obj) -> None:
        with self._lock:
            entry = self._pods.pop(pod_key(pod), None)
            if entry is not None:
                self._account(entry, -1)

    def reserve(self, pod: Obj, node: str) -> None:
        """The pod is placed: its requests count as used from now (Koordinator's ``ReservePod``)."""
        self._assign(pod, node)

    def unreserve(self, pod: Obj) -> None:
        self._assign(pod, "")

    def _assign(self, pod: Obj, node: str) -> None:
        with self._lock:
            entry = self._pods.get(pod_key(pod))
            if entry is None or entry.assigned == bool(node):
                return
            entry.assigned, entry.node = bool(node), node
            self._count_used(entry, 1 if node else -1)

    def placed(self, quota: str) -> list[tuple[Obj, str]]:
        """The quota's placed pods and their nodes."""
        with self._lock:
            entries = (self._pods[k] for k in self._members.get(quota, ()))
            return [(e.pod, e.node) for e in entries if e.assigned]

    def in_quota(self, pod: Obj, quota: str) -> bool:
        """Whether the ledger counts ``pod`` in ``quota`` (Koordinator's ``IsPodExist``)."""
        with self._lock:
            entry = self._pods.get(pod_key(pod))
            return entry is not None and entry.quota == quota

    # ---- nodes ----------------------------------------------------------------------------------

    def set_node(self, node: Obj) -> None:
        name = str(as_map(node, "metadata").get("name") or "")
        allocatable = resources_of(as_map(as_map(node, "status"), "allocatable"))
        with self._lock:
            old = self._nodes.get(name)
            if old == allocatable:
                return
            if old is not None:
                _add(self._total, old, -1)
            self._nodes[name] = allocatable
            _add(self._total, allocatable)
            self._figures = None

    def delete_node(self, node: Obj) -> None:
        with self._lock:
            old = self._nodes.pop(str(as_map(node, "metadata").get("name") or ""), None)
            if old is not None:
                _add(self._total, old, -1)
                self._figures = None

    # ---- figures --------------------------------------------------------------------------------

    def _own_masked(self, name: str, which: int) -> Resources:
        spec = self._specs.get(name)
        own = self._own.get(name)
        if spec is None or own is None:
            return {}
        return spec.mask(own[which])

    def tree_total(self) -> Resources:
        """What the root's children share: the cluster's allocatable less the system and default quotas'
        used."""
        with self._lock:
            total = dict(self._total)
            for name in OUTSIDE_TREE:
                _add(total, self._own_masked(name, 2), -1)
            return total

    def figures(self) -> dict[str, QuotaFigures]:
        """Every tree quota's runtime figures (computed again only after a change)."""
        with self._lock:
            if self._figures is None:
                inputs = {
                    name: QuotaInput(
                        name, s.parent, s.min, s.max, s.weight, s.lends, self._own_masked(name, 0)
                    )
                    for name, s in self._specs.items()
                    if name not in OUTSIDE_TREE
                }
                self._figures = calculate(
                    inputs, eq.ROOT_QUOTA, self.tree_total(), scale_min=self.args.enable_min_quota_scale
                )
            return self._figures

    def runtime(self, name: str) -> Resources | None:
        """What the quota may use now: its runtime; the system and default quotas' max; the root's total.
        ``None`` for a quota outside the tree (unknown, or its parents never reach the root)."""
        with self._lock:
            spec = self._specs.get(name)
            if spec is None:
                return None
            if name in OUTSIDE_TREE:
                return dict(spec.max)
            if name == eq.ROOT_QUOTA:
                return self.tree_total()
            fig = self.figures().get(name)
            return None if fig is None else fig.runtime

    def usage(self, name: str) -> Usage:
        """The quota's request and used, its descendants' included."""
        with self._lock:
            children = self._children
            if children is None:
                children = self._children = {}
                for s in self._specs.values():
                    children.setdefault(s.parent, []).append(s.name)
            sums = Usage({}, {}, {}, {})
            seen: set[str] = set()
            stack = [name]
            while stack:
                n = stack.pop()
                if n in seen:
                    continue  # a cycle of parents: count each quota once
                seen.add(n)
                for which, into in enumerate(
                    (sums.request, sums.non_preemptible_request, sums.used, sums.non_preemptible_used)
                ):
                    _add(into, self._own_masked(n, which))
                stack.extend(children.get(n, ()))
            return sums

    def own_used(self, name: str) -> tuple[Resources, Resources]:
        """The used and non-preemptible used of the quota's own pods (masked): PreFilter's figures."""
        with self._lock:
            return self._own_masked(name, 2), self._own_masked(name, 3)

    def parents(self, name: str) -> list[str]:
        """The quota's ancestors below the root, nearest first."""
        with self._lock:
            out: list[str] = []
            spec = self._specs.get(name)
            while (
                spec is not None and spec.parent and spec.parent != eq.ROOT_QUOTA and spec.parent not in out
            ):
                out.append(spec.parent)
                spec = self._specs.get(spec.parent)
            return out

    def summary(self, name: str) -> Summary | None:
        """What the status writer writes on the quota's object; ``None`` for a quota the ledger does not
        know."""
        with self._lock:
            spec = self._specs.get(name)
            if spec is None:
                return None
            usage = self.usage(name)
            if name in OUTSIDE_TREE:
                own = self._own_masked(name, 0)
                return Summary(dict(spec.max), own, own, usage)
            figures = self.figures()
            if name == eq.ROOT_QUOTA:
                request: Resources = {}
                for child, figs in figures.items():
                    if self._specs[child].parent == eq.ROOT_QUOTA:
                        _add(request, figs.limited_request)
                for outside in OUTSIDE_TREE:
                    _add(request, self._own_masked(outside, 0))
                return Summary(self.tree_total(), request, request, usage)
            fig = figures.get(name)
            if fig is None:  # outside the tree: nothing to share with it
                return Summary({}, usage.request, usage.request, usage)
            return Summary(spec.mask(fig.runtime), fig.request, fig.child_request, usage)
