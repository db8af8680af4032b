"""How the built-in types' fields merge in a strategic merge patch: the ``patchStrategy`` and
``patchMergeKey`` struct tags of ``k8s.io/api`` (the ``x-kubernetes-patch-strategy`` and
``x-kubernetes-patch-merge-key`` of their OpenAPI), for the types served here, keyed by the official
client's model and the field's JSON name.

A list tagged ``merge`` merges element by element on its merge key (``containers`` by ``name``), or as a
set when it holds scalars (``finalizers``); ``merge,retainKeys`` also lets a patch name the keys an element
keeps (``volumes``); a struct tagged ``retainKeys`` (a Deployment's ``strategy``) likewise. Every other
list is replaced whole. :func:`strategy` answers for one field; :mod:`tests.apiserver.smp` applies patches
and :mod:`tests.apiserver.openapi` publishes the tags.
"""

from __future__ import annotations

import dataclasses

_CONTAINER = {
    "ports": "containerPort",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}
_CONDITIONS = {"conditions": "type"}

# model -> {field: merge key ("" for a list of scalars)}, for lists tagged patchStrategy=merge
MERGE_LISTS: dict[str, dict[str, str]] = {
    "V1ObjectMeta": {"finalizers": "", "ownerReferences": "uid"},
    "V1PodSpec": {
        "containers": "name",
        "initContainers": "name",
        "ephemeralContainers": "name",
        "volumes": "name",
        "imagePullSecrets": "name",
        "hostAliases": "ip",
        "topologySpreadConstraints": "topologyKey",
        "schedulingGates": "name",
        "resourceClaims": "name",
    },
    "V1Container": _CONTAINER,
    "V1EphemeralContainer": _CONTAINER,
    "V1PodStatus": {**_CONDITIONS, "podIPs": "ip", "hostIPs": "ip", "resourceClaimStatuses": "name"},
    "V1NodeSpec": {"podCIDRs": ""},
    "V1NodeStatus": {**_CONDITIONS, "addresses": "type"},
    "V1ServiceAccount": {"secrets": "name"},
    "V1ServiceSpec": {"ports": "port"},
    "V1ServiceStatus": _CONDITIONS,
    "V1NamespaceStatus": _CONDITIONS,
    "V1PodDisruptionBudgetStatus": _CONDITIONS,
    "V1DeploymentStatus": _CONDITIONS,
    "V1DaemonSetStatus": _CONDITIONS,
}
# (model, field) tagged retainKeys besides merging (lists) or instead of it (structs)
RETAIN_KEYS = frozenset(
    {("V1PodSpec", "volumes"), ("V1PodSpec", "resourceClaims"), ("V1DeploymentSpec", "strategy")}
)


@dataclasses.dataclass(frozen=True, slots=True)
class FieldStrategy:
    """``merge``: a merging list (``key``: its merge key, None for scalars); ``retain_keys``: the tag
    also says retainKeys."""

    merge: bool
    key: str | None
    retain_keys: bool

    @property
    def tag(self) -> str:
        """The ``x-kubernetes-patch-strategy`` value."""
        return ",".join(t for t, on in (("merge", self.merge), ("retainKeys", self.retain_keys)) if on)


def strategy(model: str, field: str) -> FieldStrategy | None:
    """The patch strategy of ``model``'s ``field``, None when it has none (replaced whole)."""
    key = MERGE_LISTS.get(model, {}).get(field)
    retain = (model, field) in RETAIN_KEYS
    if key is None and not retain:
        return None
    return FieldStrategy(key is not None, key or None, retain)
