"""AdmissionReview in and out (``admission.k8s.io/v1`` and ``v1beta1``, answered in the version asked):
an :class:`Admission` is what a handler decides, allowed or denied with a message, and for a mutation the
JSON patch from the object received to the object wanted (:func:`json_patch`)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]


class BadReview(ValueError):
    """The request is not an AdmissionReview we can answer (HTTP 400)."""


@dataclass(frozen=True, slots=True)
class Request:
    uid: str
    api_version: str
    operation: str
    kind: str
    namespace: str
    name: str
    obj: Obj | None
    old: Obj | None
    dry_run: bool


@dataclass(frozen=True, slots=True)
class Admission:
    allowed: bool
    message: str = ""
    code: int = 200
    patch: tuple[Mapping[str, Any], ...] = ()


ALLOW = Admission(True)


def deny(message: str, code: int = 403) -> Admission:
    return Admission(False, message, code)


def parse(body: bytes) -> Request:
    try:
        doc = json.loads(body)
    except ValueError as err:
        raise BadReview(f"the body is not JSON: {err}") from None
    if not isinstance(doc, Mapping) or doc.get("kind") != "AdmissionReview":
        raise BadReview("the body is not an AdmissionReview")
    api_version = str(doc.get("apiVersion") or "")
    if api_version not in ("admission.k8s.io/v1", "admission.k8s.io/v1beta1"):
        raise BadReview(f"unsupported AdmissionReview version {api_version!r}")
    req = doc.get("request")
    if not isinstance(req, Mapping) or not req.get("uid"):
        raise BadReview("the AdmissionReview has no request uid")
    obj, old = req.get("object"), req.get("oldObject")
    raw_kind = req.get("kind")
    kind: Mapping[str, Any] = raw_kind if isinstance(raw_kind, Mapping) else {}
    return Request(
        uid=str(req["uid"]),
        api_version=api_version,
        operation=str(req.get("operation") or ""),
        kind=str(kind.get("kind") or ""),
        namespace=str(req.get("namespace") or ""),
        name=str(req.get("name") or ""),
        obj=obj if isinstance(obj, Mapping) else None,
        old=old if isinstance(old, Mapping) else None,
        dry_run=bool(req.get("dryRun")),
    )


def response(req: Request, admission: Admission) -> bytes:
    """The AdmissionReview answering ``req``."""
    out: dict[str, Any] = {"uid": req.uid, "allowed": admission.allowed}
    if not admission.allowed or admission.message:
        out["status"] = {"code": admission.code, "message": admission.message}
        if not admission.allowed:
            out["status"]["reason"] = "Forbidden" if admission.code == 403 else "BadRequest"
    if admission.patch:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(json.dumps(list(admission.patch)).encode()).decode()
    doc = {"apiVersion": req.api_version, "kind": "AdmissionReview", "response": out}
    return json.dumps(doc).encode()


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def json_patch(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """RFC 6902 operations turning ``before`` into ``after``: objects key by key, anything else (lists
    included) replaced whole where it differs."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        ops: list[dict[str, Any]] = []
        for key in before:
            if key not in after:
                ops.append({"op": "remove", "path": f"{path}/{_pointer(key)}"})
        for key, value in after.items():
            where = f"{path}/{_pointer(key)}"
            if key not in before:
                ops.append({"op": "add", "path": where, "value": value})
            else:
                ops.extend(json_patch(before[key], value, where))
        return ops
    if before == after and type(before) is type(after):
        return []
    return [{"op": "replace", "path": path or "", "value": after}]
