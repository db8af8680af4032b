"""The NodeMetric and NodeSLO controllers: one object per Node, named after it (Koordinator's table).

| Node | object | action |
|---|---|---|
| absent | absent | nothing |
| absent | present | delete it (UID precondition; NotFound counts as done) |
| present | absent | create it with the computed spec (no status) |
| present | present | compute the spec; update the whole object when it differs |
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from koord.manager.configcache import SLOConfigCache
from koord.manager.controller import Writer
from koord.manager.metrics import ManagerMetrics
from koordshared.apis.configuration import slocontroller as sloconfig
from koordshared.apis.configuration.slocontroller import collect_policy, node_strategy
from koordshared.apis.core.pod import as_map, str_map
from koordshared.apis.meta import groups
from koordshared.apis.slo.nodemetric import CollectPolicy
from koordshared.kube.client import ApiError
from koordshared.kube.informer import Informer

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]
SpecFunc = Callable[[Obj, "Obj | None"], dict[str, Any]]
"""``(node, current object or None) -> desired spec``."""


def labels_of(obj: Obj) -> dict[str, str]:
    return str_map(as_map(as_map(obj, "metadata"), "labels"))


def annotations_of(obj: Obj) -> dict[str, str]:
    return str_map(as_map(as_map(obj, "metadata"), "annotations"))


def nodemetric_spec(cache: SLOConfigCache) -> SpecFunc:
    def spec(node: Obj, current: Obj | None) -> dict[str, Any]:
        if current is not None and cache.colocation_error:
            return dict(as_map(current, "spec"))
        strategy = node_strategy(cache.colocation, labels_of(node), annotations_of(node))
        return (collect_policy(strategy) or CollectPolicy()).to_spec()

    return spec


def nodeslo_spec(cache: SLOConfigCache) -> SpecFunc:
    def spec(node: Obj, current: Obj | None) -> dict[str, Any]:
        old = as_map(current, "spec") if current is not None else None
        return sloconfig.render_spec(cache.nodeslo_configs(), labels_of(node), annotations_of(node), old)

    return spec


@dataclass(frozen=True, slots=True)
class _Written:
    desired: Any
    stored: Any


@dataclass(frozen=True, slots=True)
class _Expectation:
    """Our write is done but the informer has not shown it yet: until it does, the cache is stale."""

    stale_rv: str | None
    """The resourceVersion the cache shows until it catches up (``None``: the object is still absent)."""
    deadline: float


EXPECTATION_TIMEOUT = 5.0
"""After this long without the watch showing our write, trust the cache again (a 409 then corrects us)."""
STALE_RECHECK = 0.05


class NodeOwnedReconciler:
    """Reconciles the object of ``resource`` (NodeMetric, NodeSLO) named after each node."""

    def __init__(
        self,
        controller: str,
        resource: groups.Resource,
        nodes: Informer,
        objects: Informer,
        desired: SpecFunc,
        writer: Writer,
        metrics: ManagerMetrics,
    ) -> None:
        self.controller = controller
        self.resource = resource
        self.kind = resource.kind
        self.collection = resource.path()
        self.nodes = nodes
        self.objects = objects
        self.desired = desired
        self.writer = writer
        self.metrics = metrics
        self._written: dict[str, _Written] = {}
        self._expect: dict[str, _Expectation] = {}
        self._clock = time.monotonic

    def _record(self, ok: bool, verb: str) -> None:
        self.metrics.record(self.controller, ok, f"{verb}{self.kind}")

    def _same(self, name: str, desired: Any, current: Any) -> bool:
        if desired == current:
            return True
        w = self._written.get(name)
        return w is not None and w.desired == desired and w.stored == current

    def _stale(self, name: str, obj: Obj | None) -> bool:
        exp = self._expect.get(name)
        if exp is None:
            return False
        rv = None if obj is None else as_map(obj, "metadata").get("resourceVersion")
        if rv == exp.stale_rv and self._clock() < exp.deadline:
            return True
        del self._expect[name]
        return False

    def _expect_change(self, name: str, stale_rv: str | None) -> None:
        self._expect[name] = _Expectation(stale_rv, self._clock() + EXPECTATION_TIMEOUT)

    def __call__(self, name: str) -> float | None:
        node = self.nodes.get(name)
        obj = self.objects.get(name)
        if self._stale(name, obj):
            return STALE_RECHECK  # our own last write is not in the cache yet: acting now would conflict
        if node is None and obj is None:
            self._written.pop(name, None)
            return None
        if node is None:
            assert obj is not None
            self._delete(name, obj)
            return None
        if obj is None:
            self._create(name, node)
            return None
        spec = self.desired(node, obj)
        if not self._same(name, spec, obj.get("spec")):
            self._update(name, obj, spec)
        return None

    def _delete(self, name: str, obj: Obj) -> None:
        uid = as_map(obj, "metadata").get("uid")
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
        try:
            self.writer.send("delete", "DELETE", f"{self.collection}/{name}", body)
        except ApiError as err:
            if not err.not_found:
                self._record(False, "delete")
                raise
        self._written.pop(name, None)
        self._expect_change(name, as_map(obj, "metadata").get("resourceVersion"))
        self._record(True, "delete")

    def _create(self, name: str, node: Obj) -> None:
        spec = self.desired(node, None)
        body = {
            "apiVersion": self.resource.api_version,
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": spec,
        }
        try:
            stored = self.writer.send("create", "POST", self.collection, body)
        except Exception:
            self._record(False, "create")
            raise
        self._written[name] = _Written(spec, as_map(stored, "spec"))
        self._expect_change(name, None)
        self._record(True, "create")

    def _update(self, name: str, obj: Obj, spec: dict[str, Any]) -> None:
        meta = dict(as_map(obj, "metadata"))
        meta.pop("managedFields", None)
        body = {"apiVersion": self.resource.api_version, "kind": self.kind, "metadata": meta, "spec": spec}
        try:
            stored = self.writer.send("update", "PUT", f"{self.collection}/{name}", body)
        except Exception:
            self._record(False, "update")
            raise
        self._written[name] = _Written(spec, as_map(stored, "spec"))
        self._expect_change(name, meta.get("resourceVersion"))
        self._record(True, "update")


def generation_changed(old: Obj, new: Obj) -> bool:
    """controller-runtime's ``GenerationChangedPredicate`` for updates (status writes do not bump it)."""
    return as_map(old, "metadata").get("generation") != as_map(new, "metadata").get("generation")


def node_changed(old: Obj, new: Obj) -> bool:
    """Koordinator's ``isNodeUpdated`` (labels or allocatable), plus annotations: the colocation-strategy
    and bandwidth annotations change the computed specs too (Koordinator waits for another event)."""
    return (
        labels_of(old) != labels_of(new)
        or annotations_of(old) != annotations_of(new)
        or as_map(as_map(old, "status"), "allocatable") != as_map(as_map(new, "status"), "allocatable")
    )
