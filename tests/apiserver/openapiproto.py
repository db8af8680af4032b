"""``/openapi/v2`` as protobuf: the gnostic ``openapi.v2.Document`` (``github.com/google/gnostic-models/
openapiv2/OpenAPIv2.proto``) that kubectl and client-go's ``OpenAPISchema()`` ask for with ``Accept:
application/com.github.proto-openapi.spec.v2@v1.0+protobuf`` and decode with no JSON fallback.

The Swagger document of :mod:`tests.apiserver.openapi` is written field by field with the message
numbers of ``OpenAPIv2.proto``: info, paths (operations with their query, path and body parameters and
responses) and definitions (schemas with types, formats, descriptions, references, properties, items,
``additionalProperties``, ``allOf``, ``required``, limits, and ``x-*`` keys as vendor extensions whose
value is carried as YAML text, which is how kube-openapi reads them back). Keywords Swagger 2.0 does not
have (``anyOf``, ``oneOf``, ``nullable``...) are left out, as kube-apiserver's v2 conversion drops them.
"""

from __future__ import annotations

import json
import struct
from typing import Any

# Asked for with "@v1.0" (client-go) or ".v1.0"; answered with the form Go's mime package can parse.
MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_ACCEPTED = ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf", MEDIA_TYPE)
Obj = dict[str, Any]
_OPERATIONS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}
# Schema: numbers of its string, integer, double and bool fields
_SCHEMA_STRINGS = {"$ref": 1, "format": 2, "title": 3, "description": 4, "pattern": 13, "discriminator": 26}
_SCHEMA_INTS = {
    "maxLength": 11,
    "minLength": 12,
    "maxItems": 14,
    "minItems": 15,
    "maxProperties": 17,
    "minProperties": 18,
}
_SCHEMA_DOUBLES = {"multipleOf": 6, "maximum": 7, "minimum": 9}
_SCHEMA_BOOLS = {"exclusiveMaximum": 8, "exclusiveMinimum": 10, "uniqueItems": 16, "readOnly": 27}


def wants_protobuf(accept: str | None) -> bool:
    return any(t in (accept or "") for t in _ACCEPTED)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string(number: int, text: Any) -> bytes:
    return _field(number, str(text).encode()) if text not in (None, "") else b""


def _bool(number: int, value: Any) -> bytes:
    return _varint(number << 3) + _varint(1) if value else b""


def _int(number: int, value: Any) -> bytes:
    return _varint(number << 3) + _varint(int(value)) if isinstance(value, int) and value else b""


def _double(number: int, value: Any) -> bytes:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return b""
    return _varint(number << 3 | 1) + struct.pack("<d", float(value))


def _any(number: int, value: Any) -> bytes:
    return _field(number, _string(2, json.dumps(value)))  # Any{yaml}: JSON is YAML


def _extensions(number: int, obj: Obj) -> bytes:
    return b"".join(
        _field(number, _string(1, key) + _any(2, value)) for key, value in obj.items() if key.startswith("x-")
    )


def schema(s: Obj) -> bytes:
    out = bytearray()
    for key, value in s.items():
        if key in _SCHEMA_STRINGS:
            out += _string(_SCHEMA_STRINGS[key], value)
        elif key in _SCHEMA_INTS:
            out += _int(_SCHEMA_INTS[key], value)
        elif key in _SCHEMA_DOUBLES:
            out += _double(_SCHEMA_DOUBLES[key], value)
        elif key in _SCHEMA_BOOLS:
            out += _bool(_SCHEMA_BOOLS[key], value)
        elif key == "default":
            out += _any(5, value)
        elif key == "example":
            out += _any(30, value)
        elif key == "required" and isinstance(value, list):
            out += b"".join(_string(19, v) for v in value)
        elif key == "enum" and isinstance(value, list):
            out += b"".join(_any(20, v) for v in value)
        elif key == "additionalProperties":
            item = _field(1, schema(value)) if isinstance(value, dict) else _bool(2, value)
            out += _field(21, item)
        elif key == "type":
            types = value if isinstance(value, list) else [value]
            out += _field(22, b"".join(_string(1, t) for t in types))
        elif key == "items" and isinstance(value, dict):
            out += _field(23, _field(1, schema(value)))
        elif key == "allOf" and isinstance(value, list):
            out += b"".join(_field(24, schema(v)) for v in value)
        elif key == "properties" and isinstance(value, dict):
            named = b"".join(_field(1, _string(1, k) + _field(2, schema(v))) for k, v in value.items())
            out += _field(25, named)
    out += _extensions(31, s)
    return bytes(out)


def _parameter(p: Obj) -> bytes:
    if p.get("in") == "body":
        body = _string(1, p.get("description")) + _string(2, p.get("name")) + _string(3, "body")
        body += _bool(4, p.get("required")) + _field(5, schema(p.get("schema") or {}))
        return _field(1, _field(1, body))  # ParametersItem.parameter.body_parameter
    common = _bool(1, p.get("required")) + _string(2, p.get("in")) + _string(3, p.get("description"))
    common += _string(4, p.get("name"))
    if p.get("in") == "path":
        sub = _field(4, common + _string(5, p.get("type")) + _bool(19, p.get("uniqueItems")))
    else:
        sub = _field(3, common + _string(6, p.get("type")) + _bool(20, p.get("uniqueItems")))
    return _field(1, _field(2, sub))  # ParametersItem.parameter.non_body_parameter


def _operation(op: Obj) -> bytes:
    out = bytearray()
    out += b"".join(_string(1, t) for t in op.get("tags") or ())
    out += _string(3, op.get("description")) + _string(5, op.get("operationId"))
    out += b"".join(_string(6, t) for t in op.get("produces") or ())
    out += b"".join(_string(7, t) for t in op.get("consumes") or ())
    out += b"".join(_field(8, _parameter(p)) for p in op.get("parameters") or ())
    codes = b""
    for code, response in (op.get("responses") or {}).items():
        body = _string(1, response.get("description"))
        if isinstance(response.get("schema"), dict):
            body += _field(2, _field(1, schema(response["schema"])))
        codes += _field(1, _string(1, code) + _field(2, _field(1, body)))
    out += _field(9, codes)
    out += _extensions(13, op)
    return bytes(out)


def _path_item(item: Obj) -> bytes:
    out = bytearray()
    for verb, number in _OPERATIONS.items():
        if isinstance(item.get(verb), dict):
            out += _field(number, _operation(item[verb]))
    out += b"".join(_field(9, _parameter(p)) for p in item.get("parameters") or ())
    return bytes(out)


def encode(doc: Obj) -> bytes:
    """The Swagger 2.0 ``doc`` as a gnostic ``openapi.v2.Document``."""
    info = doc.get("info") or {}
    out = _string(1, doc.get("swagger", "2.0")) + _field(
        2, _string(1, info.get("title")) + _string(2, info.get("version"))
    )
    paths = b"".join(
        _field(2, _string(1, name) + _field(2, _path_item(item)))
        for name, item in (doc.get("paths") or {}).items()
    )
    out += _field(8, paths)
    defs = b"".join(
        _field(1, _string(1, name) + _field(2, schema(s)))
        for name, s in (doc.get("definitions") or {}).items()
    )
    out += _field(9, defs)
    return out
