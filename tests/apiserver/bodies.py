"""Request bodies: read off the connection and decoded by their Content-Type, as kube-apiserver's
``negotiation.NegotiateInputSerializer`` and the handlers in ``apiserver/pkg/endpoints/handlers`` do.

Reading: ``Content-Length`` or ``Transfer-Encoding: chunked`` (every byte of the body is consumed, so a
kept-alive connection stays in step with the client); more than 3 MiB is a 413, a malformed length or
chunk a 400 after which the connection is closed.

Decoding: JSON (also when no Content-Type is sent: the official client sends none on some calls), YAML,
and ``application/vnd.kubernetes.protobuf`` for the built-in kinds :mod:`tests.apiserver.protobuf` knows.
Any other media type, and protobuf for a custom resource or an unknown kind, is kube-apiserver's 415
UnsupportedMediaType naming what is accepted. A PATCH body is JSON for the patch types served; its media
type is checked by :mod:`tests.apiserver.patch`. JSON with
a repeated key is a strict decoding error: a 400 under ``fieldValidation=Strict``, a warning under Warn.
"""

from __future__ import annotations

import json
from email.message import Message
from io import BufferedIOBase
from typing import Any

import yaml

from tests.apiserver import fieldvalidation, protobuf, status
from tests.apiserver.patch import JSON_PATCH, MERGE, STRATEGIC
from tests.apiserver.resources import ResourceType

MAX_BODY_BYTES = 3 * 1024 * 1024  # kube-apiserver's MaxRequestBodyBytes
JSON, YAML, PROTOBUF = "application/json", "application/yaml", protobuf.MEDIA_TYPE
_MAX_CHUNK_LINE = 1024
PATCH_TYPES = ("", JSON_PATCH, MERGE, STRATEGIC)


class FramingError(status.APIError):
    """The body could not be delimited: the rest of the connection's bytes mean nothing any more."""


def read(rfile: BufferedIOBase, headers: Message[str, str]) -> bytes:
    """The whole body of the request whose headers were just read (b"" when it has none)."""
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        return _read_chunked(rfile)
    text = (headers.get("Content-Length") or "").strip()
    if not text:
        return b""
    if not text.isdecimal():
        raise FramingError(400, f"invalid Content-Length: {text!r}")
    length = int(text)
    if length > MAX_BODY_BYTES:
        raise FramingError(413, _too_large(), reason="RequestEntityTooLarge")
    data = rfile.read(length)
    if len(data) != length:
        raise FramingError(400, "the request body ended before its Content-Length")
    return data


def _too_large() -> str:
    return f"Request entity too large: limit is {MAX_BODY_BYTES}"


def _read_chunked(rfile: BufferedIOBase) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        line = rfile.readline(_MAX_CHUNK_LINE)
        head = line.split(b";", 1)[0].strip()
        try:
            n = int(head, 16)
        except ValueError:
            raise FramingError(400, f"malformed chunk size line: {line[:40]!r}") from None
        if n < 0:
            raise FramingError(400, f"malformed chunk size line: {line[:40]!r}")
        if n == 0:
            break
        size += n
        if size > MAX_BODY_BYTES:
            raise FramingError(413, _too_large(), reason="RequestEntityTooLarge")
        chunk = rfile.read(n)
        if len(chunk) != n or rfile.read(2) != b"\r\n":
            raise FramingError(400, "a chunk of the request body is cut short")
        parts.append(chunk)
    while True:  # trailer fields, up to the empty line
        line = rfile.readline(_MAX_CHUNK_LINE)
        if line in (b"\r\n", b"\n", b""):
            break
    return b"".join(parts)


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def unsupported(accepted: tuple[str, ...]) -> status.APIError:
    return status.APIError(
        415,
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def accepted_for(rt: ResourceType | None) -> tuple[str, ...]:
    """What kube-apiserver accepts for objects of ``rt``: custom resources have no protobuf form."""
    if rt is None or rt.crd is not None:
        return (JSON, YAML)
    return (JSON, YAML, PROTOBUF)


def decode(
    raw: bytes, content_type: str | None, *, rt: ResourceType | None, verb: str, directive: str
) -> Any:
    """The body as JSON values (None when empty); ``directive`` is the request's fieldValidation."""
    if not raw:
        return None
    media = media_type(content_type)
    if verb == "patch":
        # Other patch types (server-side apply's YAML) are refused by tests.apiserver.patch.
        return _json(raw, directive) if media in PATCH_TYPES else None
    if media in ("", JSON, "*/*"):
        return _json(raw, directive)
    if media in (YAML, "application/x-yaml", "text/yaml"):
        return _yaml(raw)
    if media == PROTOBUF and rt is not None and rt.crd is None:
        decoded = protobuf.decode(raw)
        if decoded is not None:
            return decoded
        raise unsupported((JSON, YAML))  # a built-in kind whose protobuf form this server does not know
    raise unsupported(accepted_for(rt))


def _yaml(raw: bytes) -> Any:
    try:
        return yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as err:
        raise status.bad_request(f"the request body is not valid YAML: {err}") from None


class _Object(dict[str, Any]):
    """A decoded JSON object that saw a key twice (the last value wins, as in Go)."""

    repeated: list[str]


def _json(raw: bytes, directive: str) -> Any:
    marked = 0

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal marked
        out: dict[str, Any] = {}
        repeated = []
        for key, value in items:
            if key in out:
                repeated.append(key)
            out[key] = value
        if not repeated:
            return out
        marked += 1
        obj = _Object(out)
        obj.repeated = repeated
        return obj

    try:
        value = json.loads(raw.decode("utf-8"), object_pairs_hook=pairs, parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise status.bad_request(f"the request body is not valid JSON: {err}") from None
    if not marked:
        return value
    found: list[str] = []
    value = _plain(value, "", found)
    fieldvalidation.report([f'duplicate field "{path}"' for path in found], directive)
    return value


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _plain(value: Any, path: str, found: list[str]) -> Any:
    """``value`` with plain dicts only; the paths of repeated keys go to ``found``."""
    if isinstance(value, dict):
        if isinstance(value, _Object):
            found.extend(f"{path}.{k}" if path else k for k in value.repeated)
            value = dict(value)
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                value[k] = _plain(v, f"{path}.{k}" if path else k, found)
        return value
    if isinstance(value, list):
        return [_plain(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value
