"""Registry strategies: per built-in type, what a create or update does before the object is stored.

Each is the test server's counterpart of a kubernetes ``pkg/registry/<group>/<type>/strategy.go``:
``defaults`` (decode defaulting, ``pkg/apis/core/v1/defaults.go``, applied on every write), ``decode``
(paths that must parse as MicroTime/Time/quantity, else 400), ``prepare_for_create`` (PrepareForCreate:
what a create may not set), ``validate``/``validate_update`` (422 causes), ``prepare_for_update`` and
``grace_period`` (CheckGracefulDelete; None for types deleted at once). Types without an entry get the
generic behaviour (:class:`Strategy`). Services and Secrets (:mod:`tests.apiserver.services`) and the
``apps`` workloads (:mod:`tests.apiserver.workloads`) have theirs in their own modules.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from tests.apiserver import podspec, validation
from tests.apiserver.status import Cause

Obj = dict[str, Any]
Path = tuple[str, ...]
_CONDITION_TIMES: tuple[Path, ...] = (
    ("status", "conditions", "*", "lastTransitionTime"),
    ("status", "conditions", "*", "lastProbeTime"),
    ("status", "conditions", "*", "lastHeartbeatTime"),
)


class Strategy:
    """The generic behaviour (``registry/generic``) that a type's strategy refines."""

    name_is_label = False  # namespaces: an RFC 1123 label rather than a subdomain
    name_is_path_segment = False  # RBAC objects: anything usable in a URL path
    status_on_create = False  # nodes: a create keeps .status even with a status subresource
    allow_create_on_update = False  # a PUT of a missing object creates it (Leases, Events)
    micro_times: tuple[Path, ...] = ()
    times: tuple[Path, ...] = ()
    quantities: tuple[Path, ...] = ()

    def defaults(self, obj: Obj) -> None:
        """Decode defaulting (in place)."""

    def prepare_for_create(self, obj: Obj, *, keep_status: bool) -> None:
        """What a create may not set (``keep_status``: a test seeding a complete object)."""

    def validate(self, obj: Obj) -> list[Cause]:
        return []

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        """What an update may not change (status and server metadata are already kept by the store)."""

    def validate_update(self, new: Obj, old: Obj, subresource: str | None) -> list[Cause]:
        return self.validate(new)

    def grace_period(self, obj: Obj, requested: int | None) -> int | None:
        return None

    def decode_problems(self, obj: Obj) -> list[str]:
        return validation.decode_errors(
            obj,
            micro_times=self.micro_times,
            times=(("metadata", "creationTimestamp"), ("metadata", "deletionTimestamp"), *self.times),
            quantities=self.quantities,
        )

    def name_problems(self, name: str) -> list[Cause]:
        return validation.name_errors(name, label=self.name_is_label, path_segment=self.name_is_path_segment)


class PodStrategy(Strategy):
    """``pkg/registry/core/pod/strategy.go``."""

    times = (*_CONDITION_TIMES, ("status", "startTime"))
    quantities = (
        *(
            ("spec", field, "*", "resources", kind, "*")
            for field in podspec.CONTAINER_LISTS
            for kind in ("requests", "limits")
        ),
        ("spec", "overhead", "*"),
    )

    def defaults(self, obj: Obj) -> None:
        podspec.set_defaults(obj)

    def prepare_for_create(self, obj: Obj, *, keep_status: bool) -> None:
        given = obj.get("status")
        st: Obj = given if keep_status and isinstance(given, dict) else {}
        st.setdefault("phase", "Pending")
        st.setdefault("qosClass", podspec.qos_class(obj))
        obj["status"] = st

    def validate(self, obj: Obj) -> list[Cause]:
        return podspec.create_errors(obj)

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        if subresource == "status":
            # pods/status may not touch owner references; the QoS class is fixed at creation
            _keep(new["metadata"], old["metadata"], "ownerReferences")
            if not (new.get("status") or {}).get("qosClass") and (old.get("status") or {}).get("qosClass"):
                new.setdefault("status", {})["qosClass"] = old["status"]["qosClass"]

    def validate_update(self, new: Obj, old: Obj, subresource: str | None) -> list[Cause]:
        return podspec.update_errors(new, old) if subresource is None else []

    def grace_period(self, obj: Obj, requested: int | None) -> int | None:
        spec, phase = obj.get("spec") or {}, (obj.get("status") or {}).get("phase")
        period = requested if requested is not None else int(spec.get("terminationGracePeriodSeconds") or 0)
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0  # never scheduled, or already terminated: nothing for a kubelet to stop
        return 1 if period < 0 else period


class NodeStrategy(Strategy):
    """``pkg/registry/core/node/strategy.go``: a node registers with its status."""

    status_on_create = True
    times = _CONDITION_TIMES
    quantities = (("status", "capacity", "*"), ("status", "allocatable", "*"))

    def defaults(self, obj: Obj) -> None:
        st = obj.get("status")
        if isinstance(st, dict) and st.get("capacity") and "allocatable" not in st:
            st["allocatable"] = copy.deepcopy(st["capacity"])  # SetDefaults_NodeStatus

    def validate(self, obj: Obj) -> list[Cause]:
        return validation.node_errors(obj)


class NamespaceStrategy(Strategy):
    """``pkg/registry/core/namespace/strategy.go`` and ``SetDefaults_Namespace``."""

    name_is_label = True

    def defaults(self, obj: Obj) -> None:
        meta = obj.setdefault("metadata", {})
        if meta.get("name"):
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]

    def prepare_for_create(self, obj: Obj, *, keep_status: bool) -> None:
        obj["status"] = {"phase": "Active"}
        spec = obj.setdefault("spec", {})
        if "kubernetes" not in (spec.get("finalizers") or []):
            spec["finalizers"] = [*(spec.get("finalizers") or []), "kubernetes"]


class LeaseStrategy(Strategy):
    """``pkg/registry/coordination/lease/strategy.go``: MicroTime times, positive durations."""

    allow_create_on_update = True
    micro_times = (("spec", "acquireTime"), ("spec", "renewTime"))

    def validate(self, obj: Obj) -> list[Cause]:
        return validation.lease_errors(obj)


class ConfigMapStrategy(Strategy):
    """``pkg/registry/core/configmap/strategy.go``."""

    def validate(self, obj: Obj) -> list[Cause]:
        return validation.configmap_errors(obj)

    def validate_update(self, new: Obj, old: Obj, subresource: str | None) -> list[Cause]:
        return validation.configmap_errors(new) + validation.configmap_update_errors(new, old)


class PDBStrategy(Strategy):
    """``pkg/registry/policy/poddisruptionbudget/strategy.go``: a create starts from an empty status."""

    times = (("status", "conditions", "*", "lastTransitionTime"), ("status", "disruptedPods", "*"))

    def prepare_for_create(self, obj: Obj, *, keep_status: bool) -> None:
        if not keep_status or not isinstance(obj.get("status"), dict):
            obj["status"] = {
                "disruptionsAllowed": 0,
                "currentHealthy": 0,
                "desiredHealthy": 0,
                "expectedPods": 0,
            }

    def validate(self, obj: Obj) -> list[Cause]:
        return validation.pdb_errors(obj)

    def validate_update(self, new: Obj, old: Obj, subresource: str | None) -> list[Cause]:
        return validation.pdb_errors(new) if subresource is None else []


class EventStrategy(Strategy):
    """``pkg/registry/core/event/strategy.go`` (both API groups; the store keeps the core shape)."""

    allow_create_on_update = True
    micro_times = (("eventTime",), ("series", "lastObservedTime"))
    times = (("firstTimestamp",), ("lastTimestamp",))

    def validate(self, obj: Obj) -> list[Cause]:
        return validation.event_errors(obj, events_api=False)


class RBACStrategy(Strategy):
    """RBAC objects are named by path segments (``ValidateRBACName``)."""

    name_is_path_segment = True


GENERIC = Strategy()
STRATEGIES: dict[tuple[str, str], Strategy] = {
    ("", "pods"): PodStrategy(),
    ("", "nodes"): NodeStrategy(),
    ("", "namespaces"): NamespaceStrategy(),
    ("", "configmaps"): ConfigMapStrategy(),
    ("", "events"): EventStrategy(),
    ("coordination.k8s.io", "leases"): LeaseStrategy(),
    ("policy", "poddisruptionbudgets"): PDBStrategy(),
    **{
        ("rbac.authorization.k8s.io", p): RBACStrategy()
        for p in ("clusterroles", "clusterrolebindings", "roles", "rolebindings")
    },
}


@functools.cache
def _more() -> dict[tuple[str, str], Strategy]:
    """The strategies kept in their own modules (which import :class:`Strategy` from here)."""
    from tests.apiserver import services, workloads

    return {
        ("", "services"): services.ServiceStrategy(),
        ("", "secrets"): services.SecretStrategy(),
        ("apps", "deployments"): workloads.DeploymentStrategy(),
        ("apps", "daemonsets"): workloads.DaemonSetStrategy(),
    }


def for_key(key: tuple[str, str]) -> Strategy:
    return STRATEGIES.get(key) or _more().get(key, GENERIC)


def _keep(new_meta: Obj, old_meta: Obj, field: str) -> None:
    if field in old_meta:
        new_meta[field] = copy.deepcopy(old_meta[field])
    else:
        new_meta.pop(field, None)
