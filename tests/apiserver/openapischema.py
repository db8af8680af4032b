"""OpenAPI schemas of the served types, for :mod:`tests.apiserver.openapi`.

Built-in types: each model of :mod:`tests.apiserver.typeschema` becomes one schema (``properties`` with
types, formats and descriptions, ``required``, ``additionalProperties`` for maps, references to the models
it holds), with the patch tags of :mod:`tests.apiserver.patchmeta` as ``x-kubernetes-patch-strategy``/
``x-kubernetes-patch-merge-key`` (plus ``x-kubernetes-list-type``/``x-kubernetes-list-map-keys``) and, on a
kind's top-level schema, ``x-kubernetes-group-version-kind``. Custom resources: the version's
``openAPIV3Schema`` with ``metadata`` as ObjectMeta and ``apiVersion``/``kind`` described, as
``apiextensions-apiserver``'s ``builder`` publishes it. ``ref`` prefixes references: ``#/components/
schemas/`` in v3, ``#/definitions/`` in v2.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tests.apiserver import patchmeta, typeschema
from tests.apiserver.resources import ResourceType
from tests.apiserver.typeschema import TypeRef

Obj = dict[str, Any]
_SCALARS: dict[str, Obj] = {
    "string": {"type": "string"},
    "integer": {"type": "integer", "format": "int64"},
    "boolean": {"type": "boolean"},
    "number": {"type": "number", "format": "double"},
    "date-time": {"type": "string", "format": "date-time"},
    "byte": {"type": "string", "format": "byte"},
    "int-or-string": {"type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": True},
    "any": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}
API_VERSION_DOC = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
    "recognized schemas to the latest internal value, and may reject unrecognized values."
)
KIND_DOC = (
    "Kind is a string value representing the REST resource this object represents. Servers may infer this "
    "from the endpoint the client submits requests to. In CamelCase."
)


def gvk(group: str, version: str, kind: str) -> Obj:
    return {"group": group, "version": version, "kind": kind}


def _type(ref: TypeRef, prefix: str) -> Obj:
    if ref.kind == "model":
        return {"$ref": prefix + typeschema.model(ref.model).definition}
    if ref.kind == "array" and ref.item is not None:
        return {"type": "array", "items": _type(ref.item, prefix)}
    if ref.kind == "map" and ref.item is not None:
        return {"type": "object", "additionalProperties": _type(ref.item, prefix)}
    return dict(_SCALARS.get(ref.kind, _SCALARS["any"]))


def _property(model: str, field: typeschema.Field, prefix: str, v3: bool) -> Obj:
    prop = _type(field.type, prefix)
    if "$ref" in prop and v3:
        prop = {"allOf": [prop], "default": {}}  # v3 keeps a description beside a reference this way
    if field.description:
        prop["description"] = field.description
    tagged = patchmeta.strategy(model, field.name)
    if tagged is not None:
        prop["x-kubernetes-patch-strategy"] = tagged.tag
        if tagged.merge and tagged.key:
            prop["x-kubernetes-patch-merge-key"] = tagged.key
            prop["x-kubernetes-list-type"] = "map"
            prop["x-kubernetes-list-map-keys"] = [tagged.key]
        elif tagged.merge:
            prop["x-kubernetes-list-type"] = "set"
    return prop


def model_schemas(root: str, prefix: str, *, v3: bool) -> dict[str, Obj]:
    """Every schema the model ``root`` needs, by definition name."""
    out = {}
    for name, m in typeschema.closure(root).items():
        schema: Obj = {"type": "object"}
        if m.description:
            schema["description"] = m.description
        schema["properties"] = {f.name: _property(name, f, prefix, v3) for f in m.fields.values()}
        required = sorted(f.name for f in m.fields.values() if f.required)
        if required:
            schema["required"] = required
        out[m.definition] = schema
    return out


def kind_schemas(rt: ResourceType, prefix: str, *, v3: bool) -> tuple[str, str, dict[str, Obj]]:
    """The schemas of a built-in kind and of its list (when the client has one), and the names of both."""
    model = typeschema.model_class_for(rt.group, rt.version, rt.kind)
    listed = ""
    if model is None:
        return "", "", {}
    list_model = typeschema.model_class_for(rt.group, rt.version, rt.list_kind)
    schemas = model_schemas(list_model, prefix, v3=v3) if list_model is not None else {}
    schemas.update(model_schemas(model, prefix, v3=v3))
    definition = typeschema.model(model).definition
    schemas[definition]["x-kubernetes-group-version-kind"] = [gvk(rt.group, rt.version, rt.kind)]
    if list_model is not None:
        listed = typeschema.model(list_model).definition
        schemas[listed]["x-kubernetes-group-version-kind"] = [gvk(rt.group, rt.version, rt.list_kind)]
    return definition, listed, schemas


def crd_definition(rt: ResourceType, kind: str | None = None) -> str:
    """``sh.koordinator.slo.v1alpha1.NodeMetric``: the group reversed, the version, the kind."""
    return ".".join([*reversed(rt.group.split(".")), rt.version, kind or rt.kind])


def crd_schemas(rt: ResourceType, prefix: str, *, v3: bool) -> tuple[str, str, dict[str, Obj]]:
    """The schemas of a custom resource and its list, plus ObjectMeta and what it holds; both names."""
    assert rt.crd is not None
    version = next(v for v in rt.crd["spec"]["versions"] if v["name"] == rt.version)
    given: Mapping[str, Any] = (version.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}
    schema = copy.deepcopy(dict(given))
    props = schema.setdefault("properties", {})
    meta = typeschema.model("V1ObjectMeta").definition
    props["apiVersion"] = {"type": "string", "description": API_VERSION_DOC}
    props["kind"] = {"type": "string", "description": KIND_DOC}
    props["metadata"] = {"$ref": prefix + meta}
    schema["x-kubernetes-group-version-kind"] = [gvk(rt.group, rt.version, rt.kind)]
    name, list_name = crd_definition(rt), crd_definition(rt, rt.list_kind)
    listed = {
        "type": "object",
        "description": f"{rt.list_kind} is a list of {rt.kind}",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": API_VERSION_DOC},
            "kind": {"type": "string", "description": KIND_DOC},
            "items": {"type": "array", "items": {"$ref": prefix + name}},
            "metadata": {"$ref": prefix + typeschema.model("V1ListMeta").definition},
        },
        "x-kubernetes-group-version-kind": [gvk(rt.group, rt.version, rt.list_kind)],
    }
    schemas = {name: schema, list_name: listed}
    for root in ("V1ObjectMeta", "V1ListMeta"):
        schemas.update(model_schemas(root, prefix, v3=v3))
    return name, list_name, schemas
