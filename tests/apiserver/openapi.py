"""``/openapi/v3`` and ``/openapi/v2``: the API's OpenAPI documents, as kube-apiserver publishes them
(``kube-openapi`` ``handler3``/``handler``, ``apiextensions-apiserver`` ``controller/openapi``).

``GET /openapi/v3`` lists one document per group version (``{"paths": {"apis/apps/v1":
{"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=..."}}}``); each holds the paths of that group
version's resources with their operations (``x-kubernetes-action``, ``x-kubernetes-group-version-kind``,
the ``dryRun``/``fieldManager``/``fieldValidation`` parameters, the patch media types: strategic merge only
for built-in types) and the schemas of :mod:`tests.apiserver.openapischema`. ``kubectl apply`` reads them to
learn that the server validates fields itself and how to compute a strategic merge patch; ``kubectl
explain`` renders them. ``GET /openapi/v2`` is the same as one Swagger 2.0 document, in JSON or in the
protobuf kubectl asks for (:mod:`tests.apiserver.openapiproto`). Documents are rebuilt when the served
types change (a CRD is created or deleted).
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from tests.apiserver import openapischema
from tests.apiserver.resources import Registry, ResourceType

Obj = dict[str, Any]
TITLE, VERSION = "Kubernetes", "v1.33.0"
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json")
STRATEGIC = "application/strategic-merge-patch+json"
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_PARAM_DOCS = {
    "dryRun": "When present, indicates that modifications should not be persisted (All).",
    "fieldManager": "A name associated with the actor or entity that is making these changes.",
    "fieldValidation": "How the server treats unknown or duplicate fields: Ignore, Warn (default) or Strict.",
    "pretty": "If 'true', then the output is pretty printed.",
    "labelSelector": "A selector to restrict the list of returned objects by their labels.",
    "fieldSelector": "A selector to restrict the list of returned objects by their fields.",
    "limit": "The maximum number of responses to return for a list call.",
    "continue": "The continue option from a previous list call, to retrieve the next page.",
    "resourceVersion": "Constrains which resource versions the request may be served from.",
    "watch": "Watch for changes to the described resources and return them as a stream.",
    "gracePeriodSeconds": "The duration in seconds before the object should be deleted.",
}
_LIST_PARAMS = ("labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "watch")


def gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _camel(group: str, version: str) -> str:
    words = (group or "core").replace("-", ".").split(".")
    words = [w for w in words if w not in ("k8s", "io")] or ["core"]
    return "".join(w.capitalize() for w in words) + version.capitalize()


class OpenAPI:
    """The documents of one server; cached until its registry changes."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, ...], tuple[int, Any]] = {}

    def _cached(self, key: tuple[str, ...], build: Any) -> Any:
        generation = self.registry.generation
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == generation:
                return hit[1]
        value = build()
        with self._lock:
            self._cache[key] = (generation, value)
        return value

    def v3_index(self) -> Obj:
        paths = {}
        for group, versions in sorted(self.registry.group_versions().items()):
            for version in versions:
                path = gv_path(group, version)
                digest = self.v3_hash(group, version)
                paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
        return {"paths": paths}

    def v3_hash(self, group: str, version: str) -> str:
        doc = self.v3(group, version)
        return self._cached(
            ("hash", group, version),
            lambda: hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper(),
        )

    def v3(self, group: str, version: str) -> Obj | None:
        """The document of one group version (None when it is not served)."""
        return self._cached(("v3", group, version), lambda: self._build(group, version, v3=True))

    def v2(self) -> Obj:
        return self._cached(("v2",), lambda: self._build(None, None, v3=False))

    def _build(self, group: str | None, version: str | None, *, v3: bool) -> Obj | None:
        prefix = "#/components/schemas/" if v3 else "#/definitions/"
        types = [
            rt
            for rt in sorted(self.registry.all(), key=lambda t: (t.group, t.version, t.plural))
            if group is None or (rt.group, rt.version) == (group, version)
        ]
        if not types:
            return None
        schemas: dict[str, Obj] = {}
        paths: dict[str, Obj] = {}
        for rt in types:
            if rt.crd is not None:
                name, listed, found = openapischema.crd_schemas(rt, prefix, v3=v3)
            else:
                name, listed, found = openapischema.kind_schemas(rt, prefix, v3=v3)
            _merge(schemas, found)
            refs = (prefix + name if name else "", prefix + listed if listed else "")
            paths.update(_paths(rt, refs, v3=v3))
        info = {"title": TITLE, "version": VERSION}
        if v3:
            return {"openapi": "3.0.0", "info": info, "paths": paths, "components": {"schemas": schemas}}
        return {"swagger": "2.0", "info": info, "paths": paths, "definitions": schemas}


def _merge(into: dict[str, Obj], found: dict[str, Obj]) -> None:
    """Add schemas; one that several kinds reach keeps every kind it was marked with."""
    key = "x-kubernetes-group-version-kind"
    for name, schema in found.items():
        kinds = [
            *into.get(name, {}).get(key, ()),
            *(k for k in schema.get(key, ()) if k not in into.get(name, {}).get(key, ())),
        ]
        into[name] = {**schema, key: kinds} if kinds else schema


def _param(name: str, where: str, v3: bool, *, required: bool = False, typ: str = "string") -> Obj:
    p: Obj = {"name": name, "in": where, "description": _PARAM_DOCS.get(name, name)}
    if required:
        p["required"] = True
    if v3:
        p["schema"] = {"type": typ, "uniqueItems": True}
    else:
        p.update(type=typ, uniqueItems=True)
    return p


def _operation(
    rt: ResourceType, action: str, verb: str, refs: tuple[str, str], v3: bool, **extra: Any
) -> Obj:
    """One operation: its id, GVK, parameters, request body (``body``) and response (``refs``: the
    schemas of the kind and of its list, "" when there is none)."""
    namespaced = "Namespaced" if rt.namespaced else ""
    suffix = extra.pop("suffix", "")
    kind = rt.list_kind if action == "list" else rt.kind
    op: Obj = {
        "operationId": f"{verb}{_camel(rt.group, rt.version)}{namespaced}{rt.kind}{suffix}",
        "tags": [f"{(rt.group or 'core').split('.')[0]}_{rt.version}"],
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": openapischema.gvk(rt.group, rt.version, kind),
    }
    params = [
        _param(n, "query", v3, typ="integer" if n == "limit" else "string") for n in extra.pop("query", ())
    ]
    body_types: tuple[str, ...] = extra.pop("body", ())
    response: Obj = {"description": "OK"}
    ref = refs[1] if action == "list" else refs[0]
    if ref:
        schema = {"$ref": ref}
        if v3:
            response["content"] = {"application/json": {"schema": schema}}
        else:
            response["schema"] = schema
    if body_types:
        body_schema = {"$ref": refs[0]} if refs[0] and action != "patch" else {"type": "object"}
        if v3:
            op["requestBody"] = {
                "content": {t: {"schema": body_schema} for t in body_types},
                "required": True,
            }
        else:
            op["consumes"] = list(body_types)
            params.append({"name": "body", "in": "body", "required": True, "schema": body_schema})
    if params:
        op["parameters"] = params
    if not v3:
        op["produces"] = ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]
    op["responses"] = {"200": response, "201": response} if action in ("post", "put") else {"200": response}
    return op


def _paths(rt: ResourceType, ref: tuple[str, str], *, v3: bool) -> dict[str, Obj]:
    base = "/" + gv_path(rt.group, rt.version)
    scope = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    patch_types = (*PATCH_TYPES, STRATEGIC) if rt.crd is None else PATCH_TYPES
    write = {"query": _WRITE_PARAMS, "body": ("application/json", "application/yaml")}
    path_params = [_param("namespace", "path", v3, required=True)] if rt.namespaced else []
    named_params = [_param("name", "path", v3, required=True), *path_params]
    verbs = set(rt.verbs)
    out: dict[str, Obj] = {}
    collection: Obj = {"parameters": path_params} if path_params else {}
    if "list" in verbs:
        collection["get"] = _operation(rt, "list", "list", ref, v3, query=_LIST_PARAMS)
    if "create" in verbs:
        collection["post"] = _operation(rt, "post", "create", ref, v3, **write)
    if "deletecollection" in verbs:
        collection["delete"] = _operation(
            rt, "deletecollection", "deleteCollection", ref, v3, query=_LIST_PARAMS
        )
    if len(collection) > bool(path_params):
        out[scope] = collection
    if "get" in verbs:
        one: Obj = {
            "parameters": named_params,
            "get": _operation(rt, "get", "read", ref, v3),
            "put": _operation(rt, "put", "replace", ref, v3, **write),
            "patch": _operation(rt, "patch", "patch", ref, v3, query=_WRITE_PARAMS, body=patch_types),
            "delete": _operation(rt, "delete", "delete", ref, v3, query=("gracePeriodSeconds", "dryRun")),
        }
        out[f"{scope}/{{name}}"] = one
        if rt.status_subresource:
            out[f"{scope}/{{name}}/status"] = {
                "parameters": named_params,
                "get": _operation(rt, "get", "read", ref, v3, suffix="Status"),
                "put": _operation(rt, "put", "replace", ref, v3, suffix="Status", **write),
                "patch": _operation(
                    rt, "patch", "patch", ref, v3, suffix="Status", query=_WRITE_PARAMS, body=patch_types
                ),
            }
    if rt.namespaced and "list" in verbs:
        out[f"{base}/{rt.plural}"] = {
            "get": _operation(rt, "list", "list", ref, v3, suffix="ForAllNamespaces", query=_LIST_PARAMS)
        }
    return out
