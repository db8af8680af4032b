"""Server-side Table output: what ``kubectl get`` asks for (``Accept: application/json;as=Table;v=v1;
g=meta.k8s.io``), as ``apiserver/pkg/endpoints/handlers/response.go`` (``transformObject``) answers it.

:func:`negotiate` reads the Accept header the way ``negotiation.NegotiateOutputMediaType`` does: the
first clause the endpoint can serve wins (a Table in ``meta.k8s.io`` v1 or v1beta1, or plain JSON);
clauses asking for anything else are skipped. A get, a list and each watch event then become a Table
whose rows hold the cells of the type's printer (:mod:`tests.apiserver.printers`), of a CRD's
``additionalPrinterColumns`` (``apiextensions-apiserver`` ``tableconvertor``: JSONPath cells, ``date``
columns as ages, an Age column when the CRD lists none) or the default Name and Created At. Each row
carries the object as ``includeObject`` says: ``Metadata`` (the default, a PartialObjectMetadata),
``Object`` or ``None``. A watch sends the column definitions in its first event only (``NoHeaders`` after).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.apiserver import ages, events, printers, status
from tests.apiserver.printers import Column
from tests.apiserver.resources import ResourceType

Obj = dict[str, Any]
GROUP = "meta.k8s.io"
INCLUDE = ("None", "Metadata", "Object")


def negotiate(accept: str | None) -> str | None:
    """The Table version the client asked for first (``v1``/``v1beta1``), or None for plain JSON."""
    for clause in (accept or "").split(","):
        media, _, rest = clause.partition(";")
        media = media.strip().lower()
        params = {
            k.strip().lower(): v.strip()
            for k, _, v in (p.partition("=") for p in rest.split(";"))
            if k.strip()
        }
        if media not in ("application/json", "*/*", "application/*", ""):
            continue
        shape = params.get("as")
        if shape is None:
            return None
        if shape == "Table" and params.get("g") == GROUP and params.get("v") in ("v1", "v1beta1"):
            return params["v"]
    return None


def include_object(query: dict[str, str]) -> str:
    value = query.get("includeObject") or "Metadata"
    if value not in INCLUDE:
        raise status.bad_request(f'includeObject: unsupported value "{value}": use None, Metadata or Object')
    return value


def _columns(rt: ResourceType) -> tuple[tuple[Column, ...], printers.Cells]:
    if rt.crd is not None:
        return _crd_columns(rt)
    return printers.PRINTERS.get(rt.key, printers.DEFAULT)


def _crd_columns(rt: ResourceType) -> tuple[tuple[Column, ...], printers.Cells]:
    assert rt.crd is not None
    version = next(v for v in rt.crd["spec"]["versions"] if v["name"] == rt.version)
    given = version.get("additionalPrinterColumns") or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]
    columns = [printers.NAME] + [
        Column(
            c["name"],
            c.get("type", "string"),
            int(c.get("priority") or 0),
            c.get("format", ""),
            c.get("description")
            or f"Custom resource definition column (in JSONPath format): {c['jsonPath']}",
        )
        for c in given
    ]

    def cells(obj: Obj, now: float) -> list[Any]:
        out: list[Any] = [obj["metadata"]["name"]]
        for c in given:
            found = jsonpath(obj, c["jsonPath"])
            out.append(None if not found else _cell(c.get("type", "string"), found[0], now))
        return out

    return tuple(columns), cells


def _cell(typ: str, value: Any, now: float) -> Any:
    """``cellForJSONValue``: the JSON value as the column type shows it; None when it does not fit."""
    if value is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if typ == "string":
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if typ == "integer" and number:
        return int(value)
    if typ == "number" and number:
        return float(value)
    if typ == "boolean" and isinstance(value, bool):
        return value
    if typ == "date" and isinstance(value, str):
        at = ages.parse_time(value)
        return "<invalid>" if at is None else ages.human_duration(now - at)
    return None


_STEP = re.compile(
    r"\.([A-Za-z0-9_\-$]+)|\[(\d+)\]|\['([^']*)'\]|\[\?\(@\.([\w.\-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]|\[\*\]"
)


def jsonpath(obj: Any, path: str) -> list[Any]:
    """The values a simple JSONPath (``.a.b``, ``[0]``, ``['k']``, ``[*]``, ``[?(@.k=="v")]``) finds."""
    text = path.strip().removeprefix("{").removesuffix("}").strip()
    if text.startswith("$"):
        text = text[1:]
    values = [obj]
    pos = 0
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None:
            raise status.bad_request(f"unrecognized column definition {path!r}")
        pos = m.end()
        field, index, key, filter_key, filter_value = m.groups()
        nxt: list[Any] = []
        for v in values:
            if field is not None or key is not None:
                name = field if field is not None else key
                if isinstance(v, dict) and name in v:
                    nxt.append(v[name])
            elif index is not None:
                if isinstance(v, list) and int(index) < len(v):
                    nxt.append(v[int(index)])
            elif filter_key is not None:
                for item in v if isinstance(v, list) else ():
                    found = jsonpath(item, "." + filter_key)
                    if found and str(found[0]) == filter_value:
                        nxt.append(item)
            elif isinstance(v, list):
                nxt.extend(v)
        values = nxt
    return values


def _row_object(rt: ResourceType, obj: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":  # converted to the request's version, so named whatever the list left out
        return {"kind": rt.kind, "apiVersion": rt.api_version, **obj}
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": f"{GROUP}/v1",
        "metadata": obj.get("metadata") or {},
    }


def table(
    rt: ResourceType, payload: Obj, version: str, include: str, now: float, *, headers: bool = True
) -> Obj:
    """``payload`` (one object, or a list of them) as a Table."""
    columns, cells = _columns(rt)
    listed = isinstance(payload.get("items"), list)
    rows = []
    for item in payload["items"] if listed else [payload]:
        row: Obj = {"cells": cells(events.stored_shape(rt, item), now)}
        obj = _row_object(rt, item, include)
        if obj is not None:
            row["object"] = obj
        rows.append(row)
    meta = payload.get("metadata") or {}
    kept = ("resourceVersion", "continue", "remainingItemCount") if listed else ("resourceVersion",)
    out: Obj = {
        "kind": "Table",
        "apiVersion": f"{GROUP}/{version}",
        "metadata": {k: meta[k] for k in kept if k in meta},
    }
    if headers:
        out["columnDefinitions"] = [c.definition() for c in columns]
    out["rows"] = rows
    return out
