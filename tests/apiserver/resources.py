"""Resource types the test API server serves, CRD registration, and the discovery documents.

The built-in types are listed in :mod:`tests.apiserver.builtin`. Custom resources come from registered
``apiextensions.k8s.io/v1`` CRDs, whose ``openAPIV3Schema`` then checks every write (see ``tests.crdschema``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

from tests import crdschema
from tests.apiserver import status

COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")


@dataclasses.dataclass(frozen=True, slots=True)
class Subresource:
    """A subresource other than status, as discovery lists it: its verbs, and the kind its requests and
    answers carry when that is not the parent's (``pods/eviction`` takes a ``policy/v1`` Eviction)."""

    name: str
    verbs: tuple[str, ...]
    kind: str = ""
    group: str | None = None
    version: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource (group/version/plural) and how writes to it behave."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool
    fields: frozenset[str] = COMMON_FIELDS
    short_names: tuple[str, ...] = ()
    crd: Mapping[str, Any] | None = dataclasses.field(default=None, compare=False, repr=False)
    verbs: tuple[str, ...] = ALL_VERBS
    # A PUT without metadata.resourceVersion is allowed (the strategy's AllowUnconditionalUpdate).
    unconditional_update: bool = True
    # Subresources other than status.
    subresources: tuple[Subresource, ...] = ()
    # Discovery categories (``kubectl get all`` lists the resources in "all").
    categories: tuple[str, ...] = ()
    # Where the objects live when another type's storage holds them (events.k8s.io Events are core Events).
    storage: tuple[str, str] | None = None
    # A DELETE answers with the object (ReturnDeletedObject) rather than a Status.
    delete_returns_object: bool = True
    # Field selector fields whose Go value is not a string: what they read as when unset ("false").
    field_defaults: tuple[tuple[str, str], ...] = ()
    # Field selector labels that select another stored field (the scheme's field label conversion:
    # events.k8s.io's ``regarding.kind`` is the stored core Event's ``involvedObject.kind``).
    field_labels: tuple[tuple[str, str], ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: one object set per group and plural, shared by all versions."""
        return self.storage or (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def subresource(self, name: str) -> Subresource | None:
        return next((s for s in self.subresources if s.name == name), None)

    def schema_errors(self, obj: Any, *, strict: bool) -> list[tuple[str, str]]:
        if self.crd is None:
            return []
        return crdschema.errors(obj, self.crd, version=self.version, strict=strict)

    def prune(self, obj: Any) -> Any:
        if self.crd is None:
            return obj
        return crdschema.prune(obj, self.crd, version=self.version)


class Registry:
    """The served resource types; thread-safe because CRDs may be registered while serving."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self.generation = 0  # counts changes of what is served (documents built from it are kept until then)
        from tests.apiserver.builtin import BUILTIN  # it imports ResourceType from here

        for rt in BUILTIN:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        with self._lock:
            self._types[(rt.group, rt.version, rt.plural)] = rt
            self.generation += 1

    def add_crd(self, crd: crdschema.CRDSource) -> list[ResourceType]:
        """Serve every served version of the CRD; returns the types added."""
        doc = crdschema.load_crd(crd)
        spec = doc["spec"]
        names = spec["names"]
        added = []
        for v in spec["versions"]:
            if not v.get("served", True):
                continue
            status = "status" in (v.get("subresources") or {})
            rt = ResourceType(
                spec["group"],
                v["name"],
                names["plural"],
                names["kind"],
                spec["scope"] == "Namespaced",
                status,
                COMMON_FIELDS,
                tuple(names.get("shortNames", ())),
                doc,
                unconditional_update=False,
                categories=tuple(names.get("categories", ())),
            )
            self.add(rt)
            added.append(rt)
        return added

    def remove_crd(self, crd: crdschema.CRDSource) -> None:
        """Stop serving the CRD's resources (their objects stay in the store, unreachable)."""
        spec = crdschema.load_crd(crd)["spec"]
        with self._lock:
            for key in [k for k in self._types if k[0] == spec["group"] and k[2] == spec["names"]["plural"]]:
                del self._types[key]
            self.generation += 1

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        with self._lock:
            return self._types.get((group, version, plural))

    def all(self) -> list[ResourceType]:
        with self._lock:
            return list(self._types.values())

    # ---- discovery ------------------------------------------------------------------------------------

    def group_versions(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for rt in self.all():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def api_versions(self) -> dict[str, Any]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        }

    def _group(self, group: str, versions: list[str]) -> dict[str, Any]:
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}

    def api_group_list(self) -> dict[str, Any]:
        groups = [self._group(g, vs) for g, vs in sorted(self.group_versions().items()) if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def api_group(self, group: str) -> dict[str, Any] | None:
        versions = self.group_versions().get(group)
        if not group or versions is None:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group(group, versions)}

    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        types = sorted(
            (rt for rt in self.all() if rt.group == group and rt.version == version), key=lambda t: t.plural
        )
        if not types:
            return None
        resources: list[dict[str, Any]] = []
        for rt in types:
            base = {"namespaced": rt.namespaced, "kind": rt.kind, "singularName": ""}
            main = {**base, "name": rt.plural, "singularName": rt.kind.lower(), "verbs": list(rt.verbs)}
            if rt.short_names:
                main["shortNames"] = list(rt.short_names)
            if rt.categories:
                main["categories"] = list(rt.categories)
            resources.append(main)
            if rt.status_subresource:
                resources.append({"name": f"{rt.plural}/status", **base, "verbs": ["get", "patch", "update"]})
            for sub in rt.subresources:
                entry = {"name": f"{rt.plural}/{sub.name}", **base, "verbs": list(sub.verbs)}
                if sub.kind:
                    entry["kind"] = sub.kind
                if sub.group is not None:
                    entry["group"], entry["version"] = sub.group, sub.version
                resources.append(entry)
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }


def crd_written(registry: Registry, typ: str, obj: dict[str, Any]) -> None:
    """A CRD object was written: change what is served and set its status, as the apiextensions
    controllers do (status is set on ``obj`` in place, before it is stored)."""
    if typ == "DELETED":
        registry.remove_crd(obj)
        return
    try:
        registry.add_crd(obj)
    except (KeyError, TypeError, ValueError) as err:
        raise status.invalid(
            "CustomResourceDefinition",
            "apiextensions.k8s.io",
            obj["metadata"]["name"],
            [("spec", f"not a usable CRD: {err!r}")],
        ) from err
    names = obj["spec"]["names"]
    accepted = {
        "kind": names["kind"],
        "plural": names["plural"],
        "listKind": f"{names['kind']}List",
        **{k: names[k] for k in ("singular", "shortNames") if k in names},
    }
    conditions = [
        {
            "type": t,
            "status": "True",
            "reason": r,
            "message": "",
            "lastTransitionTime": obj["metadata"]["creationTimestamp"],
        }
        for t, r in (("NamesAccepted", "NoConflicts"), ("Established", "InitialNamesAccepted"))
    ]
    obj["status"] = {
        "acceptedNames": accepted,
        "conditions": conditions,
        "storedVersions": [v["name"] for v in obj["spec"]["versions"] if v.get("storage")],
    }
