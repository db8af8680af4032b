"""Validate objects against a CRD's ``openAPIV3Schema``, the way kube-apiserver does (test helper).

Used by the in-repo test API server (``tests.apiserver``) to answer 422 Invalid, and by end-to-end tests
to check what the agent reports. The Kubernetes dialect is turned into plain JSON Schema for the
``jsonschema`` package: ``x-kubernetes-int-or-string`` becomes integer-or-string (a ``pattern`` then
applies to the string form only, as in Kubernetes), ``nullable`` admits ``null``, and objects without
``x-kubernetes-preserve-unknown-fields`` reject unknown fields in strict mode. :func:`prune` drops unknown
fields and non-nullable nulls instead, which is what the real server does by default (field validation
"Warn"/"Ignore"). Formats (``date-time`` ...) are not checked.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRDSource = str | Path | Mapping[str, Any]


class CRDValidationError(ValueError):
    """An object failed its CRD schema; ``causes`` holds ``(field path, message)`` pairs."""

    def __init__(self, causes: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{field}: {message}" for field, message in causes))
        self.causes = causes


@functools.lru_cache(maxsize=32)
def _load_file(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
        raise ValueError(f"{path} is not a CustomResourceDefinition")
    return doc


def load_crd(crd: CRDSource) -> dict[str, Any]:
    """The CRD as a dict, from a YAML file path or a dict (returned as is, not copied)."""
    if isinstance(crd, Mapping):
        return dict(crd)
    return _load_file(str(Path(crd).resolve()))


def version_schema(crd: CRDSource, version: str | None = None) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of ``version`` (default: the storage version)."""
    doc = load_crd(crd)
    versions = doc["spec"]["versions"]
    for v in versions:
        if (version is None and v.get("storage")) or v["name"] == version:
            schema: dict[str, Any] = v["schema"]["openAPIV3Schema"]
            return schema
    raise ValueError(f"CRD {doc['metadata']['name']} has no version {version!r}")


def to_json_schema(schema: Mapping[str, Any], *, strict: bool = True) -> dict[str, Any]:
    """Translate one Kubernetes structural schema node (recursively) into JSON Schema."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {name: to_json_schema(sub, strict=strict) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, Mapping):
            out[key] = to_json_schema(value, strict=strict)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [to_json_schema(sub, strict=strict) for sub in value]
        else:
            out[key] = copy.deepcopy(value)
    if schema.get("x-kubernetes-int-or-string"):
        # Kubernetes puts no "type" on int-or-string; numbers other than integers are refused.
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    if (
        strict
        and schema.get("type") == "object"
        and "properties" in schema
        and "additionalProperties" not in schema
        and not preserve
    ):
        out["additionalProperties"] = False
    if schema.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        elif "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out


def _path(error: jsonschema.ValidationError, prefix: str) -> str:
    parts = [prefix] if prefix else []
    for p in error.absolute_path:
        if isinstance(p, int):
            if parts:
                parts[-1] += f"[{p}]"
            else:
                parts.append(f"[{p}]")
        else:
            parts.append(str(p))
    return ".".join(parts) or "<root>"


def _subschema(crd: CRDSource, subresource: str | None, version: str | None) -> dict[str, Any]:
    root = version_schema(crd, version)
    if subresource is None:
        return root
    sub: dict[str, Any] | None = root.get("properties", {}).get(subresource)
    if sub is None:
        raise ValueError(f"the CRD schema has no top-level property {subresource!r}")
    return sub


def errors(
    obj: Any,
    crd: CRDSource,
    subresource: str | None = None,
    *,
    version: str | None = None,
    strict: bool = True,
) -> list[tuple[str, str]]:
    """Every schema violation of ``obj`` as ``(field path, message)``, empty when valid.

    ``subresource=None`` checks a whole object (apiVersion, kind, metadata, spec, status). With
    ``subresource="status"`` (or ``"spec"``), ``obj`` is that part alone, e.g. the agent's status dict.
    """
    schema = to_json_schema(_subschema(crd, subresource, version), strict=strict)
    if subresource is None:
        # kube-apiserver validates metadata itself, not through the CRD schema.
        schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    validator = jsonschema.Draft7Validator(schema)
    found = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    return [(_path(e, subresource or ""), e.message) for e in found]


def validate(
    obj: Any,
    crd_path_or_dict: CRDSource,
    subresource: str | None = None,
    *,
    version: str | None = None,
    strict: bool = True,
) -> None:
    """Raise :class:`CRDValidationError` when ``obj`` violates the CRD schema (see :func:`errors`)."""
    causes = errors(obj, crd_path_or_dict, subresource, version=version, strict=strict)
    if causes:
        raise CRDValidationError(causes)


def prune(obj: Any, crd: CRDSource, subresource: str | None = None, *, version: str | None = None) -> Any:
    """A copy of ``obj`` without unknown fields and non-nullable nulls (kube-apiserver's pruning)."""
    schema = _subschema(crd, subresource, version)
    return _prune(copy.deepcopy(obj), schema, top=subresource is None)


def _prune(value: Any, schema: Mapping[str, Any], *, top: bool = False) -> Any:
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        return value
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        out: dict[str, Any] = {}
        for key, item in value.items():
            if top and key in ("apiVersion", "kind", "metadata"):
                out[key] = item
                continue
            sub = props.get(key)
            if sub is None and isinstance(extra, Mapping):
                sub = extra
            if sub is None:
                if keep_unknown:
                    out[key] = item
                continue
            if item is None and not sub.get("nullable"):
                continue
            out[key] = _prune(item, sub)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_prune(item, schema["items"]) for item in value]
    return value
