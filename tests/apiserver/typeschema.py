"""The structure of the built-in API types, read from the official Python client's models.

The client is generated from kube-apiserver's own OpenAPI document, so its models carry every field of
every built-in type with its JSON name, its type and its description. This module turns a model class
into a small tree (:class:`Model` of :class:`Field` of :class:`TypeRef`) that the rest of the server
uses for what kube-apiserver derives from its Go types: the OpenAPI documents (:mod:`tests.apiserver.
openapi`) and dropping unknown fields (:func:`prune`, the decoder's behaviour that ``fieldValidation``
turns into warnings or errors). Fields of type ``JSONSchemaProps`` (a CRD's schema), ``RawExtension`` and
other free-form JSON keep whatever they hold.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import re
import typing
from typing import Any

_PREFIX = re.compile(r"^(?P<group>[A-Z][a-z0-9]+)?(?P<version>V\d+(?:alpha\d+|beta\d+)?)(?P<bare>[A-Z].*)$")
_FREE_FORM_MODELS = frozenset({"V1JSONSchemaProps"})
_GROUP_PREFIX = {"": "Core"}


@dataclasses.dataclass(frozen=True, slots=True)
class TypeRef:
    """``kind`` is string, integer, boolean, number, date-time, byte, int-or-string, any (free-form
    JSON), array or map (of ``item``), or model (named ``model``)."""

    kind: str
    item: TypeRef | None = None
    model: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: TypeRef
    description: str
    required: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Model:
    name: str  # the client's class name, e.g. V1PodSpec
    description: str
    fields: dict[str, Field]

    @property
    def short_name(self) -> str:
        """The Go type's name (PodSpec), as kubectl explain shows it."""
        m = _PREFIX.match(self.name)
        return m.group("bare") if m else self.name

    @property
    def definition(self) -> str:
        """The name of this type's OpenAPI definition: ``io.k8s.<group>.<version>.<Type>``."""
        m = _PREFIX.match(self.name)
        if m is None:
            return f"io.k8s.{self.name}"
        group = (m.group("group") or "").lower()
        return ".".join(p for p in ("io.k8s", group, m.group("version").lower(), m.group("bare")) if p)


def _models() -> Any:
    from kubernetes.client import models

    return models


def model_class_for(group: str, version: str, kind: str) -> str | None:
    """The client's model class of a kind (``CoreV1Event``, ``V1Pod``...), or None if it has none."""
    models = _models()
    prefix = _GROUP_PREFIX.get(group, group.split(".", maxsplit=1)[0].capitalize())
    for name in (f"{prefix}{version.capitalize()}{kind}", f"{version.capitalize()}{kind}"):
        if hasattr(models, name):
            return name
    return None


def _type_of(annotation: Any) -> TypeRef:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_of(args[0])
    if origin is typing.Union:
        kept = [a for a in args if a is not type(None)]
        if len(kept) == 1:
            return _type_of(kept[0])
        names = {getattr(_strip(a), "__name__", "") for a in kept}
        if names == {"int", "str"}:
            return TypeRef("int-or-string")
        if names == {"bytes", "str"}:
            return TypeRef("byte")
        if names == {"float", "int"}:
            return TypeRef("number")
        return TypeRef("any")
    if origin is list:
        return TypeRef("array", _type_of(args[0]))
    if origin is dict:
        return TypeRef("map", _type_of(args[1]))
    if isinstance(annotation, type):
        if annotation.__name__ in _FREE_FORM_MODELS:
            return TypeRef("any")
        if hasattr(annotation, "model_fields"):
            return TypeRef("model", model=annotation.__name__)
        simple = {str: "string", int: "integer", bool: "boolean", float: "number", bytes: "byte"}
        if annotation in simple:
            return TypeRef(simple[annotation])
        if annotation is datetime.datetime:
            return TypeRef("date-time")
    return TypeRef("any")


def _strip(annotation: Any) -> Any:
    return typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation


def _doc(cls: type) -> str:
    text = (cls.__doc__ or "").strip()
    return text.split("\n\n", 1)[0].strip() if not text.startswith("Attributes:") else ""


@functools.cache
def model(name: str) -> Model:
    """The structure of the client's model class ``name``."""
    cls = getattr(_models(), name)
    names: dict[str, str] = getattr(cls, "attribute_map", {})
    fields = {}
    for attr, info in cls.model_fields.items():
        json_name = names.get(attr) or info.serialization_alias or info.alias or attr
        fields[json_name] = Field(
            json_name, _type_of(info.annotation), info.description or "", info.is_required()
        )
    return Model(name, _doc(cls), fields)


def closure(root: str) -> dict[str, Model]:
    """``root`` and every model reachable from it, by class name."""
    seen: dict[str, Model] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        m = seen[name] = model(name)
        for f in m.fields.values():
            ref = f.type
            while ref.item is not None:
                ref = ref.item
            if ref.kind == "model":
                todo.append(ref.model)
    return seen


@dataclasses.dataclass(slots=True)
class Decoded:
    """What decoding JSON into a type found: the value without unknown fields, their paths, and the
    first value of the wrong JSON type (``path``, expected kind), which Go's decoder refuses."""

    value: Any
    dropped: list[str] = dataclasses.field(default_factory=list)
    wrong_type: tuple[str, str] | None = None


def prune(name: str, obj: Any) -> Decoded:
    """``obj`` read as an object of model ``name``: fields its type does not have are dropped (with their
    paths, ``spec.containers[0].foo``), nulls of struct, list and map fields too, and values of the wrong
    JSON type noted, as Go's JSON decoding does. ``obj`` itself is not changed. Strings also take numbers
    (a Quantity may be written either way)."""
    found = Decoded(None)
    found.value = _prune(TypeRef("model", model=name), obj, "", found)
    return found


_SCALARS: dict[str, tuple[type, ...]] = {
    "string": (str, int, float),
    "date-time": (str,),
    "byte": (str,),
    "boolean": (bool,),
    "number": (int, float),
    "int-or-string": (int, str),
}


# A JSON null decodes to the Go zero value: nil for a pointer, slice or map, an empty struct otherwise, all
# of which the object leaves out; nulls of scalar fields are kept as given.
_STRUCTURED = frozenset({"model", "array", "map"})


def _fits(kind: str, value: Any) -> bool:
    if value is None or kind == "any":
        return True
    if kind == "integer":
        return (
            isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        ) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in _SCALARS:
        return isinstance(value, _SCALARS[kind]) and not isinstance(value, bool)
    return isinstance(value, list if kind == "array" else dict)


def _prune(ref: TypeRef, value: Any, path: str, found: Decoded) -> Any:
    if not _fits(ref.kind, value):
        if found.wrong_type is None:
            found.wrong_type = (path, model(ref.model).short_name if ref.model else ref.kind)
        return value
    if ref.kind == "model" and isinstance(value, dict):
        fields = model(ref.model).fields
        out = {}
        for key, item in value.items():
            at = f"{path}.{key}" if path else key
            field = fields.get(key)
            if field is None:
                found.dropped.append(at)
            elif item is not None or field.type.kind not in _STRUCTURED:
                out[key] = _prune(field.type, item, at, found)
        return out
    if ref.kind == "array" and isinstance(value, list) and ref.item is not None:
        return [_prune(ref.item, v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    if ref.kind == "map" and isinstance(value, dict) and ref.item is not None:
        return {k: _prune(ref.item, v, f"{path}[{k}]", found) for k, v in value.items()}
    return value
