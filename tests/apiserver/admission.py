"""Admission on create and update, as kube-apiserver's default plugins do it (``plugin/pkg/admission``).

* NamespaceLifecycle: a namespaced object needs an existing namespace (404 ``namespaces "x" not found``)
  that is not being deleted (403).
* Priority: a pod's ``priorityClassName`` must name a PriorityClass (403 otherwise); ``spec.priority``
  and ``preemptionPolicy`` come from it, or from the global-default class, or are 0; a pod that sets a
  different priority itself is refused (403).
* ServiceAccount: a pod without ``serviceAccountName`` runs as ``default`` (no token volume is mounted
  and the account need not exist here).
* DefaultTolerationSeconds: pods tolerate ``node.kubernetes.io/not-ready`` and ``unreachable``
  (NoExecute) for 300 s unless they say otherwise, on create and on every update of the pod itself (so a
  re-applied manifest that replaces the tolerations keeps them, and pod update validation, which allows
  only added tolerations, passes).
* Priority on update keeps the pod's resolved ``priority`` and ``preemptionPolicy`` when the new object
  leaves them out (a PUT of the manifest as written).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.apiserver import status
from tests.apiserver.resources import ResourceType

if TYPE_CHECKING:
    from tests.apiserver.server import APIServer

Obj = dict[str, Any]
DEFAULT_TOLERATION_SECONDS = 300
_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_NO_NAMESPACE_CHECK = {("", "namespaces"), ("authentication.k8s.io", "tokenreviews")}


def admit_create(api: APIServer, rt: ResourceType, namespace: str | None, obj: Obj) -> Obj:
    """``obj`` as the mutating plugins leave it; raises what the validating ones refuse."""
    out = copy.deepcopy(obj)
    raw_meta = out.get("metadata")
    meta = raw_meta if isinstance(raw_meta, dict) else {}
    ns = namespace or str(meta.get("namespace") or "default")
    if rt.namespaced and rt.key not in _NO_NAMESPACE_CHECK:
        _namespace_lifecycle(api, ns)
    if rt.key == ("", "pods"):
        if out.get("spec") is None:
            out["spec"] = {}
        spec = out["spec"]
        if not isinstance(spec, dict):
            return out  # it does not decode: the store answers 400 (decoding comes before admission)
        spec.setdefault("serviceAccountName", "default")
        _priority(api, str(meta.get("name") or meta.get("generateName") or ""), spec)
        _default_tolerations(spec)
    return out


def update_admission(rt: ResourceType, subresource: str) -> Callable[[Obj, Obj], Obj] | None:
    """The mutating plugins of an update of ``rt`` (None: none apply): pods proper, not subresources."""
    if rt.key != ("", "pods") or subresource:
        return None
    return _admit_pod_update


def _admit_pod_update(new: Obj, old: Obj) -> Obj:
    spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
    for field in ("priority", "preemptionPolicy"):
        if spec.get(field) is None and old_spec.get(field) is not None:
            spec[field] = old_spec[field]
    _default_tolerations(spec)
    return new


def _namespace_lifecycle(api: APIServer, ns: str) -> None:
    try:
        found = api.store.get("namespaces", ns)
    except status.APIError as err:
        raise status.not_found("namespaces", "", ns) from err
    if (
        found["metadata"].get("deletionTimestamp")
        or (found.get("status") or {}).get("phase") == "Terminating"
    ):
        why = f"unable to create new content in namespace {ns} because it is being terminated"
        raise status.forbidden("", "", "", why)


def _priority(api: APIServer, pod_name: str, spec: Obj) -> None:
    name = spec.get("priorityClassName")
    classes, _ = api.store.list("priorityclasses.scheduling.k8s.io")
    if name:
        found = [pc for pc in classes if pc["metadata"]["name"] == name]
        if not found:
            raise status.forbidden("pods", "", pod_name, f"no PriorityClass with name {name} was found")
        pc: Obj | None = found[0]
    else:
        defaults = [pc for pc in classes if pc.get("globalDefault")]
        pc = defaults[0] if defaults else None
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
    value = int(pc["value"]) if pc is not None else 0
    if spec.get("priority") is not None and spec["priority"] != value:
        why = (
            f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
            f"priority admission controller computed {value} from the given PriorityClass name"
        )
        raise status.forbidden("pods", "", pod_name, why)
    spec["priority"] = value
    spec.setdefault("preemptionPolicy", (pc or {}).get("preemptionPolicy") or "PreemptLowerPriority")


def _default_tolerations(spec: Obj) -> None:
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list):
        if tolerations is not None:
            return  # not a list: validation refuses it
        tolerations = spec["tolerations"] = []
    for key in _TAINTS:
        covered = any(
            isinstance(t, dict)
            and t.get("effect") in (None, "", "NoExecute")
            and t.get("key") in (None, "", key)
            for t in tolerations
        )
        if not covered:
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
