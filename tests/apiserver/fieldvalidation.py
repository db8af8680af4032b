"""``fieldValidation``: what a write does with fields its type does not have (KEP-2885, server-side field
validation; ``apiserver/pkg/endpoints/handlers/rest.go`` ``fieldValidation``).

Unknown fields are always dropped before the object is stored: built-in types as Go's decoder drops
them (their structure comes from :mod:`tests.apiserver.typeschema`), custom resources by pruning against
their CRD schema (``tests.crdschema``), and the metadata of both as ``ObjectMeta``. The directive decides
what the client hears: ``Strict`` is a 400 ``strict decoding error: unknown field "spec.foo"``, ``Warn``
(the default) a ``Warning`` header per field, ``Ignore`` nothing. Repeated JSON keys are the other strict
decoding error; they are found while the body is decoded (:mod:`tests.apiserver.bodies`).
"""

from __future__ import annotations

from typing import Any

from tests.apiserver import requestwarnings, status, typeschema
from tests.apiserver.resources import ResourceType

DIRECTIVES = ("Ignore", "Strict", "Warn")
DEFAULT = "Warn"


def admit(rt: ResourceType, obj: dict[str, Any], directive: str) -> dict[str, Any]:
    """``obj`` without unknown fields; raises (Strict) or warns (Warn) about those it had."""
    if rt.crd is not None:
        pruned: dict[str, Any] = rt.prune(obj)
        dropped = list(_dropped(obj, pruned, ""))
        meta = pruned.get("metadata")
        if meta is not None:
            decoded = typeschema.prune("V1ObjectMeta", meta)
            _refuse_wrong_type(rt.kind, rt.version, decoded, "metadata.")
            pruned["metadata"] = decoded.value
            dropped += [f"metadata.{p}" for p in decoded.dropped]
        report([f'unknown field "{path}"' for path in dropped], directive)
        return pruned
    return admit_kind(rt.group, rt.version, rt.kind, obj, directive)


def admit_kind(group: str, version: str, kind: str, obj: Any, directive: str) -> Any:
    """``obj`` decoded as the built-in ``kind`` (also the kinds subresources take: an Eviction, a
    TokenRequest, a Scale): 400 for a value of the wrong JSON type, unknown fields dropped and reported.
    A kind the official client has no model of is taken as it is."""
    model = typeschema.model_class_for(group, version, kind)
    if model is None:
        return obj
    decoded = typeschema.prune(model, obj)
    _refuse_wrong_type(kind, version, decoded, "")
    report([f'unknown field "{path}"' for path in decoded.dropped], directive)
    return decoded.value


def report(problems: list[str], directive: str) -> None:
    """Strict decoding problems (unknown or repeated fields) as the directive says: a 400 listing them
    all (Strict), one warning each (Warn), nothing (Ignore)."""
    if not problems:
        return
    if directive == "Strict":
        raise status.bad_request("strict decoding error: " + ", ".join(problems))
    if directive == "Warn":
        for p in problems:
            requestwarnings.add(p)


def _refuse_wrong_type(kind: str, version: str, decoded: typeschema.Decoded, prefix: str) -> None:
    """Go's decoder stops at a value of the wrong JSON type: 400, as kube-apiserver words it."""
    if decoded.wrong_type is None:
        return
    path, expected = decoded.wrong_type
    where = f"{prefix}{path}" if path else (prefix.rstrip(".") or "the object")
    raise status.bad_request(
        f'{kind} in version "{version}" cannot be handled as a {kind}: '
        f"json: cannot unmarshal into Go struct field {kind}.{where} of type {expected}"
    )


def _dropped(before: Any, after: Any, path: str) -> list[str]:
    """Paths of the fields pruning removed (nulls it dropped are not unknown fields)."""
    out: list[str] = []
    if isinstance(before, dict) and isinstance(after, dict):
        for key, value in before.items():
            at = f"{path}.{key}" if path else key
            if key not in after:
                if value is not None:
                    out.append(at)
            else:
                out += _dropped(value, after[key], at)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            out += _dropped(b, a, f"{path}[{i}]")
    return out
