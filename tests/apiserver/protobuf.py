"""Decoding ``application/vnd.kubernetes.protobuf`` request bodies into the JSON a client would have sent.

kube-apiserver's protobuf serializer (``apimachinery/pkg/runtime/serializer/protobuf``): the body is the
magic ``k8s\\x00`` followed by a ``runtime.Unknown`` whose ``typeMeta`` names apiVersion and kind and whose
``raw`` holds the object's own message. The protobuf wire format is read here (varints, fixed 32/64-bit
and length-delimited fields; unknown field numbers skipped, as Go's decoder does) and each message is
turned into JSON by the field table of :mod:`tests.apiserver.protomessages`. A kind outside that table
decodes to None, which the caller answers with a 415 like kube-apiserver's for a type it cannot decode;
a body that breaks the wire format is a 400.
"""

from __future__ import annotations

import base64
import datetime
import functools
from collections.abc import Iterator
from typing import Any

from tests.apiserver import status
from tests.apiserver.protomessages import ANY_VERSION_KINDS, KINDS, MESSAGES

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
_MAX_DEPTH = 32


class _Field:
    __slots__ = ("keep", "kind", "name", "type")

    def __init__(self, spec: str) -> None:
        name, _, rest = spec.partition("=")
        number, _, typ = rest.partition(":")
        self.keep = number.endswith("!") or typ.endswith("!")
        typ = typ.rstrip("!") or "s"
        self.name = name
        self.kind = "repeated" if typ.startswith("[]") else "map" if typ.startswith("{}") else "single"
        self.type = typ[2:] if self.kind != "single" else typ


@functools.cache
def _fields(message: str) -> dict[int, _Field]:
    out = {}
    for spec in MESSAGES[message].split():
        number = int(spec.partition("=")[2].partition(":")[0].rstrip("!"))
        out[number] = _Field(spec)
    return out


def bad(why: str) -> status.APIError:
    return status.bad_request(f"the protobuf body does not decode: {why}")


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise bad("truncated varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def wire_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of each field of one message, in order."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == _VARINT:
            value, i = _varint(data, i)
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
            if i + size > len(data):
                raise bad("truncated fixed-size field")
            value, i = int.from_bytes(data[i : i + size], "little"), i + size
        elif wire == _BYTES:
            size, i = _varint(data, i)
            if i + size > len(data):
                raise bad("truncated length-delimited field")
            value, i = data[i : i + size], i + size
        else:
            raise bad(f"wire type {wire} of field {number} is not supported")
        if number == 0:
            raise bad("field number 0")
        yield number, wire, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _time(data: bytes, micro: bool) -> str | None:
    if not data:
        return None  # Go's zero time marshals to an empty message
    seconds = nanos = 0
    for number, _, value in wire_fields(data):
        if number == 1 and isinstance(value, int):
            seconds = _signed(value)
        elif number == 2 and isinstance(value, int):
            nanos = _signed(value)
    try:
        at = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        raise bad(f"time {seconds} is out of range") from None
    if micro:
        return at.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _int_or_string(data: bytes) -> int | str:
    kind, number, text = 0, 0, ""
    for n, _, value in wire_fields(data):
        if n == 1 and isinstance(value, int):
            kind = value
        elif n == 2 and isinstance(value, int):
            number = _signed(value)
        elif n == 3 and isinstance(value, bytes):
            text = _text(value)
    return text if kind == 1 else number


def _text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("a string field is not UTF-8") from None


def _scalar(typ: str, wire: int, value: int | bytes, depth: int) -> Any:
    if typ in ("i", "b"):
        if not isinstance(value, int):
            raise bad(f"expected a varint, got wire type {wire}")
        return bool(value) if typ == "b" else _signed(value)
    if not isinstance(value, bytes):
        raise bad(f"expected a length-delimited field, got wire type {wire}")
    if typ == "s":
        return _text(value)
    if typ == "y":
        return base64.b64encode(value).decode()
    if typ in ("t", "mt"):
        return _time(value, typ == "mt")
    if typ == "ios":
        return _int_or_string(value)
    return message(typ, value, depth + 1)


def _zero(value: Any) -> bool:
    if isinstance(value, bool):
        return not value
    return value is None or value in ("", 0) or value == [] or value == {}


def message(name: str, data: bytes, depth: int = 0) -> dict[str, Any]:
    """Decode ``data`` as the message ``name`` of :data:`MESSAGES` into a JSON object."""
    if depth > _MAX_DEPTH:
        raise bad("messages nested too deeply")
    fields = _fields(name)
    out: dict[str, Any] = {}
    for number, wire, value in wire_fields(data):
        field = fields.get(number)
        if field is None:
            continue
        if field.kind == "map":
            if not isinstance(value, bytes):
                raise bad(f"map field {field.name} is not length-delimited")
            key, item = "", None
            for n, w, v in wire_fields(value):
                if n == 1 and isinstance(v, bytes):
                    key = _text(v)
                elif n == 2:
                    item = _scalar(field.type, w, v, depth)
            out.setdefault(field.name, {})[key] = "" if item is None else item
        elif field.kind == "repeated":
            out.setdefault(field.name, []).append(_scalar(field.type, wire, value, depth))
        else:
            out[field.name] = _scalar(field.type, wire, value, depth)
    for field in fields.values():
        if field.name in out and (out[field.name] is None or (not field.keep and _zero(out[field.name]))):
            del out[field.name]
    return out


def decode(body: bytes) -> dict[str, Any] | None:
    """The object a protobuf body carries, as JSON; None when its kind is not one this server decodes."""
    if not body.startswith(MAGIC):
        raise bad("the body does not start with the k8s protobuf magic number")
    type_meta, raw, encoding = b"", b"", b""
    for number, _, value in wire_fields(body[len(MAGIC) :]):  # runtime.Unknown
        if isinstance(value, bytes):
            if number == 1:
                type_meta = value
            elif number == 2:
                raw = value
            elif number == 3:
                encoding = value
    if encoding:
        raise bad(f"content encoding {_text(encoding)!r} is not supported")
    meta = message("runtime.TypeMeta", type_meta)
    api_version, kind = str(meta.get("apiVersion") or ""), str(meta.get("kind") or "")
    name = KINDS.get((api_version, kind)) or (kind if kind in ANY_VERSION_KINDS else None)
    if name is None:
        return None
    return {"apiVersion": api_version, "kind": kind, **message(name, raw)}
