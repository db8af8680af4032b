"""``metav1.Status`` bodies and the error type of the test API server.

Messages and reasons follow kube-apiserver's wording (``pods "x" not found``, ``Operation cannot be
fulfilled on ...``), so client code that inspects ``ApiException.reason`` or the body behaves as in a
cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None, *, success: bool = False
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if success else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    if success:
        del body["reason"]
        del body["message"]
    return body


class APIError(Exception):
    """An API failure answered as a ``Status`` with ``code``; ``headers`` adds e.g. ``Retry-After``."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return status_body(self.code, self.reason, self.message, self.details)


def _details(plural: str, group: str, name: str) -> dict[str, Any]:
    return {"name": name, "group": group, "kind": plural}


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> APIError:
    return APIError(
        404, f'{_qualified(plural, group)} "{name}" not found', details=_details(plural, group, name)
    )


def already_exists(plural: str, group: str, name: str) -> APIError:
    return APIError(
        409,
        f'{_qualified(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(plural, group, name),
    )


def conflict(plural: str, group: str, name: str, why: str) -> APIError:
    return APIError(
        409,
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
        details=_details(plural, group, name),
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


# A field error: (path, message) is an invalid value; a third element names another kind of error.
Cause = tuple[str, str] | tuple[str, str, str]
_CAUSE_KINDS = {
    "Invalid": ("FieldValueInvalid", "Invalid value"),
    "Required": ("FieldValueRequired", "Required value"),
    "Forbidden": ("FieldValueForbidden", "Forbidden"),
    "NotSupported": ("FieldValueNotSupported", "Unsupported value"),
    "Duplicate": ("FieldValueDuplicate", "Duplicate value"),
}


def _cause(cause: Cause) -> tuple[str, str, str]:
    field, message = cause[0], cause[1]
    reason, label = _CAUSE_KINDS[cause[2] if len(cause) == 3 else "Invalid"]
    return field, reason, f"{label}: {message}" if message else label


def invalid(kind: str, group: str, name: str, causes: Sequence[Cause]) -> APIError:
    """422 Invalid listing field errors as ``field.ErrorList.ToAggregate`` words them."""
    what = f"{kind}.{group}" if group else kind
    parts = [_cause(c) for c in causes]
    text = ", ".join(f"{field}: {message}" for field, _, message in parts)
    if len(parts) > 1:
        text = f"[{text}]"
    details = {
        "name": name,
        "group": group,
        "kind": kind,
        "causes": [
            {"reason": reason, "message": message, "field": field} for field, reason, message in parts
        ],
    }
    return APIError(422, f'{what} "{name}" is invalid: {text}', details=details)


def forbidden(plural: str, group: str, name: str, why: str) -> APIError:
    what = _qualified(plural, group)
    subject = f'{what} "{name}"' if name else what
    return APIError(403, f"{subject} is forbidden: {why}", details=_details(plural, group, name))


def gone(requested: int, oldest: int) -> APIError:
    return APIError(410, f"too old resource version: {requested} ({oldest})")


def bad_request(message: str) -> APIError:
    return APIError(400, message)


def internal(message: str) -> APIError:
    return APIError(500, f"Internal error occurred: {message}")
