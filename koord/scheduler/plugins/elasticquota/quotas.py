"""ElasticQuota objects as the plugin reads them, the built-in quotas, and which quota a pod runs in.

A pod's quota (Koordinator's ``GetQuotaName`` and ``getPodAssociateQuotaName``): the quota its
``quota.scheduling.koordinator.sh/name`` label names (the default quota when no such quota exists);
without the label, the quota named after the pod's namespace in that namespace; else a quota whose
``namespaces`` annotation lists the namespace (the first by name when several do); else
``koordinator-default-quota``. Quotas are known by name alone, as in Koordinator: names are unique across
namespaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from koord.scheduler.framework import Obj
from koord.scheduler.framework.types import Resources, resources_of
from koord.scheduler.plugins.elasticquota.units import to_list
from koordshared.apis.core.pod import as_map
from koordshared.apis.extension import elasticquota as eq
from koordshared.apis.meta.groups import ELASTIC_QUOTAS


@dataclass(frozen=True, slots=True)
class QuotaSpec:
    """One quota's place in the tree and its limits, in the scheduler's units."""

    name: str
    namespace: str = ""
    parent: str = eq.ROOT_QUOTA
    is_parent: bool = False
    lends: bool = True
    min: Mapping[str, int] = field(default_factory=dict)
    max: Mapping[str, int] = field(default_factory=dict)
    weight: Mapping[str, int] = field(default_factory=dict)
    """The shared weight: the annotation's, else max."""
    namespaces: tuple[str, ...] = ()
    tree_id: str = ""

    @classmethod
    def of(cls, obj: Obj) -> QuotaSpec:
        meta, spec = as_map(obj, "metadata"), as_map(obj, "spec")
        maximum = resources_of(spec.get("max"))
        weight = resources_of(eq.shared_weight_raw(obj))
        return cls(
            name=str(meta.get("name") or ""),
            namespace=str(meta.get("namespace") or ""),
            parent=eq.parent_name(obj),
            is_parent=eq.is_parent(obj),
            lends=eq.allows_lending(obj),
            min=resources_of(spec.get("min")),
            max=maximum,
            weight=weight if any(weight.values()) else dict(maximum),
            namespaces=eq.namespaces(obj),
            tree_id=eq.tree_id(obj),
        )

    def mask(self, values: Mapping[str, int]) -> Resources:
        """``values`` restricted to the resources this quota's max names (Koordinator's ``Mask``)."""
        return {r: v for r, v in values.items() if r in self.max}


def built_in(default_max: Mapping[str, int], system_max: Mapping[str, int]) -> dict[str, QuotaSpec]:
    """The quotas that exist before any object does: the root (a parent that lends nothing), and the
    system and default quotas under it, capped by the args."""
    return {
        eq.ROOT_QUOTA: QuotaSpec(eq.ROOT_QUOTA, parent="", is_parent=True, lends=False),
        eq.SYSTEM_QUOTA: QuotaSpec(eq.SYSTEM_QUOTA, max=dict(system_max), weight=dict(system_max)),
        eq.DEFAULT_QUOTA: QuotaSpec(eq.DEFAULT_QUOTA, max=dict(default_max), weight=dict(default_max)),
    }


def built_in_object(name: str, namespace: str, maximum: Mapping[str, int]) -> Obj:
    """The ElasticQuota the plugin creates for a built-in quota that has none (Koordinator's
    ``create*QuotaIfNotPresent``): the root a parent that lends nothing, the others capped by ``maximum``."""
    meta: dict[str, object] = {"name": name, "namespace": namespace, "annotations": {}}
    spec: dict[str, object] = {}
    if name == eq.ROOT_QUOTA:
        meta["labels"] = {
            eq.LABEL_IS_PARENT: "true",
            eq.LABEL_ALLOW_LENT_RESOURCE: "false",
            eq.LABEL_PARENT: "",
        }
    else:
        spec["max"] = to_list(maximum)
    return {"apiVersion": ELASTIC_QUOTAS.api_version, "kind": "ElasticQuota", "metadata": meta, "spec": spec}


def match(pod: Obj, specs: Mapping[str, QuotaSpec], by_namespace: Mapping[str, list[str]]) -> str:
    """The name of the quota ``pod`` runs in (see the module docstring)."""
    named = eq.pod_quota_label(pod)
    if named:
        return named if named in specs else eq.DEFAULT_QUOTA
    namespace = str(as_map(pod, "metadata").get("namespace") or "")
    own = specs.get(namespace)
    if own is not None and own.namespace == namespace:
        return namespace
    listed = by_namespace.get(namespace)
    if listed:
        return listed[0]
    return eq.DEFAULT_QUOTA
